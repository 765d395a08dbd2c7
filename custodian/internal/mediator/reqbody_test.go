package mediator

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"strings"
	"testing"

	"jr2.dev/boundary/custodian/internal/runtest"
	"jr2.dev/boundary/internal/mode"
)

// bodyOf joins the http-request-body chunk records of request seq and
// returns them with the closing record.
func bodyOf(recs []runtest.Rec, seq float64) (string, runtest.Rec) {
	var b strings.Builder
	var end runtest.Rec
	for _, r := range recs {
		if r["kind"] != "http-request-body" || r["request"] != seq {
			continue
		}
		if r["end"] == true {
			end = r
			continue
		}
		s, _ := r["body"].(string)
		b.WriteString(s)
	}
	return b.String(), end
}

// sendBody sends one request with body through the mediator (200
// expected), closes it and returns the recorded body and its closing
// record.
func (f *fixture) sendBody(t *testing.T, method, u string, body io.Reader) (string, runtest.Rec) {
	t.Helper()
	req, _ := http.NewRequest(method, u, body)
	if req.URL.Hostname() == "api.example.com" {
		req.Header.Set("Authorization", "Bearer jr2-held-EXAMPLE_TOKEN")
	}
	resp, err := f.client(false).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	recs := f.records(t)
	var reqSeq float64
	for _, r := range recs {
		if r["kind"] == "http-request" {
			reqSeq = r["seq"].(float64)
		}
	}
	return bodyOf(recs, reqSeq)
}

// A request body is on the record as read, a held value in it (split
// across two reads, so no single read holds it) recorded as its label,
// and the closing record's sha-256 is of the recorded bytes. The upstream
// still gets the body as the child sent it.
func TestRequestBodyRecorded(t *testing.T) {
	f := newFixture(t, true)
	half := len(sentinel) / 2
	parts := []string{"{\"note\":\"" + sentinel[:half], sentinel[half:] + "\",\"n\":1}"}
	pr, pw := io.Pipe()
	go func() {
		for _, p := range parts {
			pw.Write([]byte(p))
		}
		pw.Close()
	}()
	got, end := f.sendBody(t, "POST", "https://api.example.com/v1/notes", pr)
	want := `{"note":"[secret:EXAMPLE_TOKEN]","n":1}`
	if got != want {
		t.Errorf("recorded body %q, want %q", got, want)
	}
	sum := sha256.Sum256([]byte(want))
	if end == nil || end["sha256"] != hex.EncodeToString(sum[:]) || end["bytes"] != float64(len(want)) ||
		end["read"] != float64(len(strings.Join(parts, ""))) || end["scrubbed"] != true || end["cut"] != nil {
		t.Errorf("closing record %v; want sha256 %x, bytes %d, read %d, scrubbed", end, sum, len(want), len(strings.Join(parts, "")))
	}
	if bytes.Contains(f.bundle.Bytes(), []byte(sentinel[:half])) && bytes.Contains(f.bundle.Bytes(), []byte(sentinel[half:])) {
		t.Error("both halves of the value are in the bundle")
	}
}

// Past the run's budget a body's bytes are hashed, not recorded, and the
// closing record says cut; the request still goes.
func TestRequestBodyBudget(t *testing.T) {
	f := newFixture(t, true)
	f.m.bodyBudget.Store(8)
	body := strings.Repeat("abcdefgh", 64)
	got, end := f.sendBody(t, "PUT", "https://open.example.com/blob", strings.NewReader(body))
	sum := sha256.Sum256([]byte(body))
	if len(got) > 8 || end == nil || end["cut"] != true || end["sha256"] != hex.EncodeToString(sum[:]) || end["bytes"] != float64(len(body)) {
		t.Errorf("recorded %d bytes, closing %v; want at most 8 recorded, cut, the whole body's sha256", len(got), end)
	}
}

// A mode other than live reads a body whole, at most 16 MiB: past that
// the answer is the exact 413, nothing is sent, and the refuse line names
// only the target and the word.
func TestModeBodyOverTheBound(t *testing.T) {
	f := newFixture(t, true)
	layer, err := mode.New(mode.Config{Mode: mode.ReadOnly}, mode.Names{}, f.m.o.Record)
	if err != nil {
		t.Fatal(err)
	}
	f.m.o.Mode = layer
	req, _ := http.NewRequest("PUT", "https://open.example.com/big", io.LimitReader(zeros{}, modeBodyMax+1))
	resp, err := f.client(false).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := "jr2 custodian: mode read-only reads a request body whole to match it, and this one is over 16 MiB\n"
	if resp.StatusCode != http.StatusRequestEntityTooLarge || string(b) != want {
		t.Errorf("%d %q; want 413 %q", resp.StatusCode, b, want)
	}
	if got := f.tlsUp.received(); len(got) != 0 {
		t.Errorf("the upstream got %q", got)
	}
	f.m.Close()
	if log := string(f.log.Bytes()); !strings.Contains(log, "action=refuse target=open.example.com:443 reason=body-size") {
		t.Errorf("refuse line: %q", log)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
