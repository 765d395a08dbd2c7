package httpkind

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"jr2.dev/boundary/effector/internal/wire"
	"jr2.dev/boundary/internal/bundle"
)

// bodyRecords are the http-request-body records of a receipts file.
func bodyRecords(t *testing.T, path string) []bundle.RequestBodyRecord {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []bundle.RequestBodyRecord
	for _, line := range bytes.Split(bytes.TrimSpace(raw), []byte("\n")) {
		var head struct{ Kind string }
		json.Unmarshal(line, &head)
		if head.Kind != bundle.KindRequestBody {
			continue
		}
		var r bundle.RequestBodyRecord
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// A live body is sent whole and recorded as it streams: chunks of at most
// bodyChunkBytes while the Effector's budget lasts, then "cut", the close
// counting every scrubbed byte and hashing them all; a held value in the
// body is its label in the record and itself upstream. Each case is one
// Effector (its own budget), one body.
func TestReceiptsBodyBudget(t *testing.T) {
	value := testValues["PLAIN"]
	long := strings.Repeat("a", 40000) + value + strings.Repeat("b", 40000)
	for _, tc := range []struct {
		name    string
		text    string
		budget  int64
		wantCut bool
	}{
		{"small", "x " + value + " y", 0, false},
		{"chunked", long, 0, false},
		{"cut by the budget", long, 40000, true},
		{"no budget", long, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil)
			path := filepath.Join(t.TempDir(), "r.jsonl")
			w, err := bundle.Create(path, bundle.Options{})
			if err != nil {
				t.Fatal(err)
			}
			e.kind = New(Options{Targets: []Target{{Scheme: "https", Host: "127.0.0.1", Port: e.up.Port, Secrets: []string{"PLAIN"}}},
				Values: values, Roots: e.pki.Pool, Receipts: w, BodyBudget: tc.budget})
			text := tc.text
			out := e.run(t, &wire.HTTP{Method: "POST", URL: wire.Value{wire.Text(e.url("/b"))}, Body: &wire.Body{Text: &text}})
			if err := w.Seal(); err != nil {
				t.Fatal(err)
			}
			if out.Kind != wire.OutcomeResponse || string(e.seen.body) != tc.text {
				t.Fatalf("outcome %s %s; the upstream got %d bytes, want %d", out.Kind, out.Reason, len(e.seen.body), len(tc.text))
			}
			recs := bodyRecords(t, path)
			if len(recs) == 0 || !recs[len(recs)-1].End {
				t.Fatalf("no closing record: %+v", recs)
			}
			end, chunks := recs[len(recs)-1], recs[:len(recs)-1]
			var got []int
			var all strings.Builder
			for _, c := range chunks {
				got = append(got, len(*c.Body))
				all.WriteString(*c.Body)
			}
			scrubbed := strings.ReplaceAll(tc.text, value, "[secret:PLAIN]")
			sum := sha256.Sum256([]byte(scrubbed))
			budget := tc.budget
			if budget == 0 {
				budget = DefaultBodyBudget
			}
			if end.Cut != tc.wantCut || end.Chunks != len(chunks) || end.Error != "" ||
				end.Bytes != int64(len(scrubbed)) || end.Read != int64(len(tc.text)) || end.SHA256 != hex.EncodeToString(sum[:]) {
				t.Errorf("chunks %v, end %+v; want cut %v, %d bytes of %d read", got, end, tc.wantCut, len(scrubbed), len(tc.text))
			}
			if int64(all.Len()) > budget || slices.Max(append(got, 0)) > bodyChunkBytes {
				t.Errorf("chunks %v: over the budget %d or over %d each", got, budget, bodyChunkBytes)
			}
			if rec := all.String(); !strings.HasPrefix(scrubbed, rec) || (!tc.wantCut && rec != scrubbed) {
				t.Errorf("the chunks (%d bytes) are not the scrubbed body (%d bytes), or its start when cut", len(rec), len(scrubbed))
			}
			raw, _ := os.ReadFile(path)
			if bytes.Contains(raw, []byte(value)) {
				t.Error("the receipts hold the value")
			}
		})
	}
}
