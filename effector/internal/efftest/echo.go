package efftest

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
)

// Reflected lists what an echo server can see of a request that carries a
// secret: every header value, a Basic pair decoded, the request target,
// the path as sent and decoded, each path segment decoded, the url as the
// server sees it, and the body.
func Reflected(r *http.Request, body []byte) []string {
	var seen []string
	names := make([]string, 0, len(r.Header))
	for n := range r.Header {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		for _, v := range r.Header[n] {
			seen = append(seen, v)
			if b, ok := strings.CutPrefix(v, "Basic "); ok {
				if pair, err := base64.StdEncoding.DecodeString(b); err == nil {
					seen = append(seen, string(pair))
				}
			}
			if b, ok := strings.CutPrefix(v, "Bearer "); ok {
				seen = append(seen, b)
			}
		}
	}
	seen = append(seen, r.RequestURI, r.URL.EscapedPath(), r.URL.Path, "https://"+r.Host+r.RequestURI)
	for _, seg := range strings.Split(r.URL.EscapedPath(), "/") {
		if dec, err := url.PathUnescape(seg); err == nil && dec != "" {
			seen = append(seen, dec)
		}
	}
	if len(body) > 0 {
		seen = append(seen, string(body))
	}
	return seen
}

// EchoHandler answers text/plain holding every form of everything the
// request showed (Reflected), each after a label, and a few forms in
// response headers too. It writes the body in pieces of 1, 2, 3, … 13
// bytes, flushing each, so the reader sees forms cut at every offset.
func EchoHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := make([]byte, 0, 1<<10)
		buf := make([]byte, 32<<10)
		for {
			n, err := r.Body.Read(buf)
			body = append(body, buf[:n]...)
			if err != nil {
				break
			}
		}
		var out strings.Builder
		for i, s := range Reflected(r, body) {
			for _, f := range Forms([]byte(s)) {
				fmt.Fprintf(&out, "%d %s: %s\n", i, f.Label, f.Echo)
			}
			if i < 8 {
				w.Header().Add(fmt.Sprintf("X-Echo-%d", i), base64.StdEncoding.EncodeToString([]byte(s)))
				w.Header().Add(fmt.Sprintf("X-Echo-%d-Pct", i), url.QueryEscape(s))
			}
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		text := []byte(out.String())
		fl, _ := w.(http.Flusher)
		for step := 1; len(text) > 0; step = step%13 + 1 {
			n := min(step, len(text))
			w.Write(text[:n])
			text = text[n:]
			if fl != nil && step%4 == 0 {
				fl.Flush()
			}
		}
	})
}

// Leaks returns the labels of the forms of each value found in answer.
func Leaks(answer string, values ...string) []string {
	var found []string
	for _, v := range values {
		for _, f := range Forms([]byte(v)) {
			if len(f.Core) >= 8 && strings.Contains(answer, f.Core) {
				found = append(found, fmt.Sprintf("%s of %.12q…", f.Label, v))
			}
		}
	}
	return found
}
