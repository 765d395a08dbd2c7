package filter_test

import (
	"bytes"
	"io"
	"testing"
	"time"

	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/filter/sigv4test"
	"jr2.dev/boundary/internal/contract"
)

// TestSigV4Table runs the table every host runs (package sigv4test)
// through the engine itself: each forward verifies with the real key, each
// refusal is its status and reason.
func TestSigV4Table(t *testing.T) {
	dir := t.TempDir()
	if err := sigv4test.WriteValues(dir); err != nil {
		t.Fatal(err)
	}
	c := &filter.Config{Pod: "p", ValuesDir: dir, Secrets: []filter.SecretConfig{sigv4test.Secret(sigv4test.Targets("443")...)}}
	vals, err := filter.LoadValues(c)
	if err != nil {
		t.Fatal(err)
	}
	e, err := filter.New(c, vals)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range sigv4test.Cases(time.Now().UTC(), "") {
		t.Run(tc.Name, func(t *testing.T) {
			r := &filter.Request{Method: tc.Method, Authority: tc.Host, Path: tc.Path, Headers: tc.Headers, ContentLength: tc.ContentLength()}
			target := contract.JoinTarget(tc.Host, 443)
			d := e.DecideRequest(target, r)
			if d.NeedBody {
				d = e.DecideRequestBody(target, r, []byte(tc.Body))
			}
			if tc.Status > 0 {
				if d.Reply == nil || d.Reply.Status != tc.Status || d.Reply.Reason != tc.Reason {
					t.Fatalf("want %d %s, got %+v", tc.Status, tc.Reason, d.Reply)
				}
				return
			}
			if d.Reply != nil {
				t.Fatalf("refused: %+v", d.Reply)
			}
			body := []byte(tc.Body)
			if d.Chunks != nil {
				var err error
				body, err = io.ReadAll(d.Chunks.Reader(io.NopCloser(bytes.NewReader(body))))
				if tc.Status == -1 {
					if err == nil || !d.Chunks.Failed() {
						t.Fatal("a chunk that does not verify went on")
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
			} else if tc.Status == -1 {
				t.Fatal("a signed aws-chunked body has no Chunks")
			}
			out := applied(r.Headers, &d)
			if err := sigv4test.Verify(r.Method, tc.Host, d.Path, out, tc.ContentLength(), body); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// applied is hs with d's removals and Set applied, as a host forwards them.
func applied(hs []filter.Header, d *filter.Decision) []filter.Header {
	var out []filter.Header
	drop := map[string]bool{}
	for _, n := range d.Remove {
		drop[n] = true
	}
	for _, s := range d.Set {
		drop[s.Name] = true
	}
	for _, h := range hs {
		if !drop[contract.Lower(h.Name)] {
			out = append(out, h)
		}
	}
	return append(out, d.Set...)
}
