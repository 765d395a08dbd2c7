package bundle

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"strings"
	"sync/atomic"
	"testing"

	"jr2.dev/boundary/filter/scrub"
)

// bodyValue is the held value the fuzzed bodies hold.
const bodyValue = "bodyvalue-91c2e7"

// FuzzBodyRecorder feeds any body, in reads of any sizes, through a
// RecordedBody: what it passes on is the body; the records hold no value,
// their chunks within maxChunk and the budget joined are the scrubbed
// body (or its start when cut), and the close counts and hashes all of it.
func FuzzBodyRecorder(f *testing.F) {
	f.Add([]byte("a "+bodyValue+" b"), []byte{3, 5}, uint16(1000), uint8(4))
	f.Add([]byte(strings.Repeat("x", 100)+bodyValue), []byte{99, 1, 2}, uint16(10), uint8(0))
	f.Add([]byte{0xff, 0xfe, 'b', 'o'}, []byte{1}, uint16(0), uint8(1))
	sc, err := scrub.New([]scrub.Secret{{Name: "V", Value: []byte(bodyValue)}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body, reads []byte, budget uint16, maxChunk uint8) {
		var out bytes.Buffer
		w := New(&out, Options{ContainsSecret: func(line []byte) bool { return bytes.Contains(line, []byte(bodyValue)) }})
		var left atomic.Int64
		left.Store(int64(budget))
		rec := NewBodyRecorder(w, 1, sc.NewStream(), &left, int(maxChunk))
		rb := RecordedBody(io.NopCloser(&splitReader{b: body, sizes: reads}), rec, -1)
		got, err := io.ReadAll(rb)
		rb.Close()
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("read %q, %v; want the body", got, err)
		}
		if err := w.Seal(); err != nil {
			t.Fatal(err)
		}
		if res, err := VerifyReader(bytes.NewReader(out.Bytes())); err != nil || res.Status != Verified {
			t.Fatalf("verify: %v %v", res, err)
		}
		var joined []byte
		var end RequestBodyRecord
		for _, line := range bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n")) {
			var r RequestBodyRecord
			var head struct{ Kind string }
			json.Unmarshal(line, &head)
			if head.Kind != KindRequestBody {
				continue
			}
			if err := json.Unmarshal(line, &r); err != nil {
				t.Fatal(err)
			}
			if r.End {
				end = r
				continue
			}
			p := r.BodyBase64
			if r.Body != nil {
				p = []byte(*r.Body)
			}
			if maxChunk > 0 && len(p) > int(maxChunk) {
				t.Fatalf("a chunk of %d bytes, over %d", len(p), maxChunk)
			}
			joined = append(joined, p...)
		}
		scrubbed := sc.Bytes(body)
		sum := sha256.Sum256(scrubbed)
		if !end.End || end.Bytes != int64(len(scrubbed)) || end.Read != int64(len(body)) || end.SHA256 != hex.EncodeToString(sum[:]) {
			t.Fatalf("close %+v; want %d bytes of %d read", end, len(scrubbed), len(body))
		}
		if len(joined) > int(budget) || !bytes.HasPrefix(scrubbed, joined) || (!end.Cut && !bytes.Equal(joined, scrubbed)) {
			t.Fatalf("chunks %q of scrubbed %q (cut %v, budget %d)", joined, scrubbed, end.Cut, budget)
		}
	})
}

// splitReader reads b in reads of the given sizes (each at least 1), then
// of the rest.
type splitReader struct {
	b     []byte
	sizes []byte
}

func (s *splitReader) Read(p []byte) (int, error) {
	if len(s.b) == 0 {
		return 0, io.EOF
	}
	n := len(s.b)
	if len(s.sizes) > 0 {
		n, s.sizes = max(int(s.sizes[0]), 1), s.sizes[1:]
	}
	n = min(n, len(p), len(s.b))
	copy(p, s.b[:n])
	s.b = s.b[n:]
	return n, nil
}
