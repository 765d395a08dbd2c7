//go:build linux

package e2e

import (
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"jr2.dev/boundary/filter/scrub"
	"jr2.dev/boundary/internal/testkit/testpki"
)

// seen is one request an upstream received, as it arrived.
type seen struct {
	Method string
	URI    string
	Host   string
	Header http.Header
	Body   string
}

// recorder keeps every request an upstream received: the suite asserts on
// them (the value arrived, the stand-in never did) and counts them (a
// refused request never arrived).
type recorder struct {
	mu   sync.Mutex
	reqs []seen
	hits atomic.Int64
}

func (rc *recorder) record(r *http.Request, body []byte) seen {
	s := seen{Method: r.Method, URI: r.RequestURI, Host: r.Host, Header: r.Header.Clone(), Body: string(body)}
	rc.hits.Add(1)
	rc.mu.Lock()
	rc.reqs = append(rc.reqs, s)
	rc.mu.Unlock()
	return s
}

func (rc *recorder) all() []seen {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]seen(nil), rc.reqs...)
}

func (rc *recorder) last() (seen, bool) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.reqs) == 0 {
		return seen{}, false
	}
	return rc.reqs[len(rc.reqs)-1], true
}

// dump is the request as one text, for sentinel scans.
func (s seen) dump() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s\nhost %s\n", s.Method, s.URI, s.Host)
	for _, k := range sortedHeaderNames(s.Header) {
		for _, v := range s.Header[k] {
			fmt.Fprintf(&b, "%s: %s\n", k, v)
		}
	}
	b.WriteString(s.Body)
	return b.String()
}

func sortedHeaderNames(h http.Header) []string {
	ks := make([]string, 0, len(h))
	for k := range h {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// echoUpstream is a bound target that leaks on purpose: it reflects the
// request (method, Host, path, every header, the body) and the credential
// it received (x-api-key, else authorization's) in every form the scrubber
// covers, in its body and in two response headers. /v1/sse streams three
// events, the next only when the test says so.
type echoUpstream struct {
	recorder
	target string // ip:port
	step   chan struct{}
}

// sseEvents are the three events /v1/sse sends; %s is the credential the
// upstream received.
var sseEvents = []string{"data: event 0\n\n", "data: event 1 %s\n\n", "data: event 2 done\n\n"}

func newEchoUpstream(t testing.TB, ca *testpki.CA, ip string) *echoUpstream {
	u := &echoUpstream{step: make(chan struct{})}
	u.target = serveTLS(t, ca, ip, u)
	return u
}

func (u *echoUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s := u.record(r, body)
	got := credential(s.Header.Get("X-Api-Key"))
	if got == "" {
		got = credential(s.Header.Get("Authorization"))
	}
	if r.URL.Path == "/v1/sse" {
		u.sse(w, r, got)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Echo", got)
	w.Header().Set("X-Echo-Base64", base64.StdEncoding.EncodeToString([]byte(got)))
	var b strings.Builder
	fmt.Fprintf(&b, "method %s\nhost %s\npath %s\n", s.Method, s.Host, s.URI)
	for _, k := range sortedHeaderNames(s.Header) {
		for _, v := range s.Header[k] {
			fmt.Fprintf(&b, "header %s: %s\n", k, v)
		}
	}
	fmt.Fprintf(&b, "body %s\n", s.Body)
	if got != "" {
		for _, f := range scrub.Forms([]byte(got)) {
			fmt.Fprintf(&b, "form %s\n", f)
		}
	}
	io.WriteString(w, b.String())
}

// sse sends event i+1 only after the test stepped, which it does only after
// the client printed event i: an event held anywhere on the way stalls the
// stream, and the test sees it.
func (u *echoUpstream) sse(w http.ResponseWriter, r *http.Request, got string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	fl := w.(http.Flusher)
	for i, ev := range sseEvents {
		if i > 0 {
			select {
			case <-u.step:
			case <-r.Context().Done():
				return
			case <-time.After(20 * time.Second):
				return
			}
		}
		if strings.Contains(ev, "%s") {
			ev = fmt.Sprintf(ev, got)
		}
		io.WriteString(w, ev)
		fl.Flush()
	}
}

// credential is the credential of a header value: the value after an auth
// scheme, or the whole value.
func credential(v string) string {
	if scheme, rest, ok := strings.Cut(v, " "); ok && (strings.EqualFold(scheme, "bearer") || strings.EqualFold(scheme, "basic")) {
		return rest
	}
	return v
}

// serveTLS serves h over TLS on ip:0 with a leaf of ca for ip and returns
// the bound target.
func serveTLS(t testing.TB, ca *testpki.CA, ip string, h http.Handler) string {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	leaf := ca.Leaf(t, ip)
	srv := &http.Server{
		Handler:           h,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{leaf.TLS}, NextProtos: []string{"http/1.1"}},
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          quietLog(),
	}
	go srv.ServeTLS(l, "", "")
	t.Cleanup(func() { srv.Close() })
	return l.Addr().String()
}

// gitUpstream is a git smart-HTTP server: `git http-backend` as CGI over
// TLS, serving one bare repository, that answers 401 unless the Basic
// password is the value itself.
type gitUpstream struct {
	recorder
	target   string
	repoDir  string // the bare repository, e2e.git
	value    string
	cgi      *cgi.Handler
	authFail atomic.Int64
}

func newGitUpstream(t testing.TB, ca *testpki.CA, ip, value string) *gitUpstream {
	t.Helper()
	backend, err := gitHTTPBackend()
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	u := &gitUpstream{value: value, repoDir: filepath.Join(root, "e2e.git")}
	for _, args := range [][]string{
		{"init", "--bare", "--initial-branch=main", u.repoDir},
		{"-C", u.repoDir, "config", "http.receivepack", "true"},
	} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	u.cgi = &cgi.Handler{
		Path: backend,
		Root: "/",
		Env:  []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"},
	}
	u.target = serveTLS(t, ca, ip, u)
	return u
}

func (u *gitUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.record(r, nil) // a pack is binary: the headers and the URI are what a stand-in could ride
	user, pass, ok := r.BasicAuth()
	if !ok || pass != u.value || user == "" {
		u.authFail.Add(1)
		w.Header().Set("WWW-Authenticate", `Basic realm="e2e"`)
		http.Error(w, "authentication required", http.StatusUnauthorized)
		return
	}
	u.cgi.ServeHTTP(w, r)
}

// gitHTTPBackend finds git-http-backend under `git --exec-path`.
func gitHTTPBackend() (string, error) {
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		return "", fmt.Errorf("git --exec-path: %v; install git", err)
	}
	p := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s: %v; install git with its http-backend", p, err)
	}
	return p, nil
}

// orchestrator is the fake Orchestrator behind the control listener: plain
// HTTP, it records each request and answers with the path and the bearer it
// got, so an answer that carries the token shows whether it is scrubbed.
type orchestrator struct {
	recorder
	addr string
}

func newOrchestrator(t testing.TB) *orchestrator {
	o := &orchestrator{}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: o, ReadHeaderTimeout: 10 * time.Second, ErrorLog: quietLog()}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	o.addr = l.Addr().String()
	return o
}

func (o *orchestrator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s := o.record(r, body)
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"path":%q,"auth":%q,"body":%q}`, s.URI, s.Header.Get("Authorization"), s.Body)
}

// counter is a TCP listener that only counts connections: put where a
// guarded tunnel would land, it proves nothing got there.
type counter struct {
	addr     string
	accepted atomic.Int64
}

func newCounter(t testing.TB, network, addr string) *counter {
	l, err := net.Listen(network, addr)
	if err != nil {
		t.Fatalf("listen %s: %v", addr, err)
	}
	c := &counter{addr: l.Addr().String()}
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			c.accepted.Add(1)
			conn.Close()
		}
	}()
	t.Cleanup(func() { l.Close() })
	return c
}
