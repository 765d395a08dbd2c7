package mediator

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"testing"
	"time"
)

// In the mediator, the engine's refusal of a request
// with a body (on a connection already allowed) leaves the child's
// keep-alive connection usable; it used to panic the handler (full duplex
// with an unread body) and drop it.
func TestRefusalWithABodyKeepsTheConnection(t *testing.T) {
	f := newFixture(t, true)
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: f.ca.Pool()},
		Proxy:           http.ProxyURL(&url.URL{Scheme: "http", Host: f.tcp}),
	}}
	defer c.CloseIdleConnections()
	send := func(method, path, auth string, body io.Reader) (int, bool) {
		t.Helper()
		req, _ := http.NewRequest(method, "https://api.example.com"+path, body)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		var reused bool
		req = req.WithContext(httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
			GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused },
		}))
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("%s %s: the answer was cut: %v", method, path, err)
		}
		return resp.StatusCode, reused
	}
	tok := "Bearer jr2-held-EXAMPLE_TOKEN"
	if st, _ := send("GET", "/v1/ok", tok, nil); st != 200 {
		t.Fatalf("first request: %d", st)
	}
	for _, r := range []struct {
		name, method, path, auth string
		status                   int
	}{
		{"405", "PATCHX", "/v1/x", tok, 405},
		{"no stand-in", "POST", "/v1/x", "Bearer made-up", 403},
		{"stand-in elsewhere", "POST", "/v1/x?k=jr2-held-EXAMPLE_TOKEN", tok, 403},
	} {
		for _, body := range []func() io.Reader{
			func() io.Reader { return strings.NewReader("0123456789") },
			func() io.Reader { return io.MultiReader(strings.NewReader("chunked body")) },
		} {
			if st, reused := send(r.method, r.path, r.auth, body()); st != r.status || !reused {
				t.Errorf("%s: %d (on the open connection: %v), want %d", r.name, st, reused, r.status)
			}
			if st, reused := send("GET", "/v1/ok", tok, nil); st != 200 || !reused {
				t.Errorf("after %s: %d, reused %v: the refusal lost the connection", r.name, st, reused)
			}
		}
	}
}
