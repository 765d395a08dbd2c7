package mediator

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"io"
	"net/http"
	"strings"
	"testing"
)

// hopAnswer answers /hop-<encoding> as an upstream that names its
// Content-Encoding in Connection (which once hid the encoding from the
// engine, so a gzipped echo passed unscrubbed), with the credential
// it got inside, gzipped truly or, under any other name, not encoded at
// all (a server that lies). It reports whether it answered.
func hopAnswer(w http.ResponseWriter, r *http.Request) bool {
	enc, ok := strings.CutPrefix(r.URL.Path, "/hop-")
	if !ok {
		return false
	}
	w.Header().Set("Connection", "content-encoding")
	w.Header().Set("Content-Encoding", enc)
	text := "auth=" + r.Header.Get("Authorization")
	if enc != "gzip" {
		io.WriteString(w, text) // the engine must refuse it unread
		return true
	}
	zw := gzip.NewWriter(w)
	io.WriteString(zw, text)
	zw.Close()
	return true
}

// The contained run shares the relay's response path: an answer whose
// encoding Connection names is decided as the upstream sent it, for the
// child as for the agent of the Custodian.
func TestHopByHopNeverHidesTheEncoding(t *testing.T) {
	f := newFixture(t, true)
	c := f.client(true)
	c.Transport.(*http.Transport).DisableCompression = true
	for _, tc := range []struct {
		enc    string
		status int
		body   string
	}{
		{"gzip", 200, "auth=Bearer [secret:EXAMPLE_TOKEN]"},
		{"deflate", 502, "jr2 custodian: api.example.com:443 answered with content-encoding deflate, which the Custodian cannot read to scrub; the answer was not passed on"},
		{"br", 502, "jr2 custodian: api.example.com:443 answered with content-encoding br, which the Custodian cannot read to scrub; the answer was not passed on"},
	} {
		st, body, h, err := get(t, c, "https://api.example.com/hop-"+tc.enc, "Authorization", "Bearer jr2-held-EXAMPLE_TOKEN")
		if err != nil {
			t.Fatalf("%s: %v", tc.enc, err)
		}
		for _, s := range readable([]byte(body)) {
			if strings.Contains(s, sentinel) {
				t.Fatalf("%s: the value reached the child: %d %v %q", tc.enc, st, h, body)
			}
		}
		if st != tc.status || body != tc.body || h.Get("Content-Encoding") != "" {
			t.Errorf("%s: %d %v %q, want %d %q", tc.enc, st, h, body, tc.status, tc.body)
		}
	}
	f.m.Close()
	if bytes.Contains(f.bundle.Bytes(), []byte(sentinel)) {
		t.Fatal("the bundle holds the value")
	}
}

// readable is every reading of b a child could try: as is, gunzipped,
// inflated.
func readable(b []byte) []string {
	out := []string{string(b)}
	if zr, err := gzip.NewReader(bytes.NewReader(b)); err == nil {
		d, _ := io.ReadAll(zr)
		out = append(out, string(d))
	}
	if zr, err := zlib.NewReader(bytes.NewReader(b)); err == nil {
		d, _ := io.ReadAll(zr)
		out = append(out, string(d))
	}
	return out
}
