package sendtrace

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestSent(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _, _ := w.(http.Hijacker).Hijack()
		c.Close() // the request arrived; no answer
	}))
	defer srv.Close()
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := "http://" + ln.Addr().String() + "/secret-in-path"
	ln.Close()
	for _, c := range []struct {
		url  string
		sent bool
	}{{dead, false}, {srv.URL + "/secret-in-path", true}} {
		req, _ := http.NewRequest("POST", c.url, strings.NewReader("body"))
		req, sent := Trace(req)
		_, err := (&http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}).Do(req)
		if err == nil {
			t.Fatalf("%s: no error", c.url)
		}
		if sent() != c.sent {
			t.Errorf("%s: sent %v, want %v", c.url, sent(), c.sent)
		}
		if r := Reason(err); strings.Contains(r, "secret-in-path") || r == "" {
			t.Errorf("the reason names the url: %q", r)
		}
	}
}

func TestReasonWords(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://127.0.0.1:1/x", nil)
	_, err := http.DefaultClient.Do(req)
	if got := Reason(err); got != "timed out" {
		t.Errorf("Reason = %q", got)
	}
}
