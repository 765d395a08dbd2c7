package serve

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"jr2.dev/boundary/internal/contract"
)

// readable is every reading of b an agent could try: as is, gunzipped,
// inflated.
func readable(b []byte) []string {
	out := []string{string(b)}
	if zr, err := gzip.NewReader(bytes.NewReader(b)); err == nil {
		if d, err := io.ReadAll(zr); err == nil || len(d) > 0 {
			out = append(out, string(d))
		}
	}
	if zr, err := zlib.NewReader(bytes.NewReader(b)); err == nil {
		if d, err := io.ReadAll(zr); err == nil || len(d) > 0 {
			out = append(out, string(d))
		}
	}
	return out
}

// An upstream that names Content-Encoding in Connection
// must not get its compressed echo past the scrubber. The engine decides
// on the answer as the upstream sent it: gzip is read and scrubbed, an
// encoding it cannot read is the 502 naming it, and Connection never takes
// a header the engine reads off the answer.
func TestHopByHopNeverHidesTheEncoding(t *testing.T) {
	f := newFixture(t, nil)
	cases := []struct {
		enc    string
		status int
		body   string
	}{
		{"gzip", 200, "you sent [secret:KEY]"},
		{"x-gzip", 200, "you sent [secret:KEY]"},
		{"deflate", 502, "jr2 custodian: " + f.up.target + " answered with content-encoding deflate, which the Custodian cannot read to scrub; the answer was not passed on"},
		{"br", 502, "jr2 custodian: " + f.up.target + " answered with content-encoding br, which the Custodian cannot read to scrub; the answer was not passed on"},
	}
	for _, c := range cases {
		resp, body := f.do("GET", f.up.target, "/v1/hop-"+c.enc, "x-api-key", keySI)
		for _, s := range readable([]byte(body)) {
			if strings.Contains(s, keyValue) {
				t.Fatalf("%s: the value reached the agent: %d %v %q", c.enc, resp.StatusCode, resp.Header, body)
			}
		}
		if resp.StatusCode != c.status || body != c.body {
			t.Errorf("%s: %d %q, want %d %q", c.enc, resp.StatusCode, body, c.status, c.body)
		}
		if resp.StatusCode == 200 && (resp.Header.Get("Content-Encoding") != "" || resp.Header.Get("Content-Type") != "text/plain") {
			t.Errorf("%s: headers %v, want text/plain and no encoding", c.enc, resp.Header)
		}
	}
}

// The same on the control listener, whose answers could hand out the
// Sandbox token.
func TestControlHopByHopNeverHidesTheEncoding(t *testing.T) {
	f := newFixture(t, nil)
	tok := "Bearer " + contract.StandIn(contract.TokenName)
	for _, c := range []struct {
		enc    string
		status int
		body   string
	}{
		{"gzip", 200, "token Bearer [secret:JR2_SANDBOX_TOKEN]"},
		{"deflate", 502, "jr2 custodian: " + f.srv.eng.Config().Orchestrator + " answered with content-encoding deflate, which the Custodian cannot read to scrub; the answer was not passed on"},
	} {
		req, _ := http.NewRequest("GET", "http://"+f.control+"/agents/hop-"+c.enc+"/surface", nil)
		req.Header.Set("Authorization", tok)
		resp, err := (&http.Client{Transport: &http.Transport{DisableCompression: true}}).Do(req)
		must(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		<-f.orchSeen
		for _, s := range readable(b) {
			if strings.Contains(s, tokenValue) {
				t.Fatalf("%s: the token reached the agent: %d %v %q", c.enc, resp.StatusCode, resp.Header, b)
			}
		}
		if resp.StatusCode != c.status || string(b) != c.body || resp.Header.Get("Content-Encoding") != "" {
			t.Errorf("%s: %d %v %q, want %d %q", c.enc, resp.StatusCode, resp.Header, b, c.status, c.body)
		}
	}
}

// On a request, what the engine judges and what goes upstream are one
// list: a header Connection names is neither judged nor forwarded, so it
// cannot carry a stand-in (or a range) past the engine, and naming the
// credential header hides the credential from the swap too.
func TestRequestHopByHopIsNeitherJudgedNorSent(t *testing.T) {
	f := newFixture(t, nil)
	cases := []struct {
		name, headers string
		status        int
		seen          func(h http.Header) bool
	}{
		{"a stand-in in a header Connection names", "Connection: close, X-Smuggle, Range\r\nX-Smuggle: " + keySI + "\r\nRange: bytes=0-3\r\nx-api-key: " + keySI + "\r\n", 200,
			func(h http.Header) bool {
				return h.Get("X-Smuggle") == "" && h.Get("Range") == "" && h.Get("X-Api-Key") == keyValue
			}},
		{"the credential header named by Connection", "Connection: close, x-api-key\r\nx-api-key: " + keySI + "\r\n", 403, nil},
	}
	for _, c := range cases {
		before := f.up.hits.Load()
		raw := f.rawTLS(t, f.up.target, "GET /v1/x HTTP/1.1\r\nHost: "+f.up.target+"\r\n"+c.headers+"\r\n")
		if !strings.HasPrefix(raw, fmt.Sprintf("HTTP/1.1 %d ", c.status)) || strings.Contains(raw, keyValue) {
			t.Errorf("%s: %q", c.name, raw)
			continue
		}
		if c.seen == nil {
			if f.up.hits.Load() != before {
				t.Errorf("%s: a refused request reached the upstream", c.name)
			}
			continue
		}
		f.up.mu.Lock()
		got := f.up.lastReq.Header
		f.up.mu.Unlock()
		if !c.seen(got) {
			t.Errorf("%s: the upstream got %v", c.name, got)
		}
	}
}
