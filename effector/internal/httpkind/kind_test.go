package httpkind

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/iotest"
	"time"

	"jr2.dev/boundary/effector/internal/effect"
	"jr2.dev/boundary/effector/internal/efftest"
	"jr2.dev/boundary/effector/internal/wire"
	"jr2.dev/boundary/filter/scrub"
)

// seen is what an upstream got.
type seen struct {
	mu      sync.Mutex
	method  string
	target  string
	header  http.Header
	body    []byte
	reqHost string
}

func (s *seen) record(r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.method, s.target, s.header, s.body, s.reqHost = r.Method, r.RequestURI, r.Header.Clone(), b, r.Host
}

type env struct {
	pki  *efftest.PKI
	up   *efftest.Upstream
	seen *seen
	kind *Kind
	work string
}

// newEnv serves h (nil: record and answer 200 "ok") and a kind whose only
// target is that upstream, with PLAIN, TOKEN and CTRL listed.
func newEnv(t *testing.T, h http.HandlerFunc) *env {
	t.Helper()
	pki := efftest.NewPKI(t, "127.0.0.1")
	e := &env{pki: pki, seen: &seen{}, work: t.TempDir()}
	if h == nil {
		h = func(w http.ResponseWriter, r *http.Request) {
			e.seen.record(r)
			w.Header().Set("Content-Type", "text/plain")
			io.WriteString(w, "ok")
		}
	}
	e.up = efftest.StartTLS(t, pki, h)
	e.kind = New(Options{
		Targets: []Target{{Scheme: "https", Host: "127.0.0.1", Port: e.up.Port, Secrets: []string{"PLAIN", "TOKEN", "CTRL"}}},
		Values:  values, Roots: pki.Pool, Work: e.work,
	})
	return e
}

func (e *env) url(path string) string { return "https://127.0.0.1:" + strconv.Itoa(e.up.Port) + path }

func sc(t *testing.T) *effect.Scrubber {
	var held []scrub.Secret
	for n, v := range testValues {
		held = append(held, scrub.Secret{Name: n, Value: []byte(v)})
	}
	s, err := scrub.New(held)
	if err != nil {
		t.Fatal(err)
	}
	return effect.Held(s)
}

// run prepares and runs h as one start; a 400 fails the test.
func (e *env) run(t *testing.T, h *wire.HTTP) wire.Outcome {
	t.Helper()
	plan, err := e.kind.Prepare("e1", &wire.Start{Kind: wire.KindHTTP, TimeoutMs: 5000, HTTP: h})
	if err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	return plan.Run(context.Background(), sc(t))
}

func TestRequestAsBuilt(t *testing.T) {
	e := newEnv(t, nil)
	cases := []struct {
		name   string
		h      *wire.HTTP
		check  func(s *seen) string
		target string
	}{
		{"bearer and a json body", &wire.HTTP{Method: "POST", URL: wire.Value{wire.Text(e.url("/v1/items/")), wire.Secret("PLAIN")},
			Path: []string{"a b"}, Auth: &wire.Auth{Type: wire.AuthBearer, Secret: "PLAIN"},
			Headers: map[string]wire.Value{"accept": {wire.Text("application/json")}},
			Body:    &wire.Body{JSON: json.RawMessage(`{"a":1}`)}},
			func(s *seen) string {
				if s.header.Get("Authorization") != "Bearer plainvalue123" || s.header.Get("Accept") != "application/json" ||
					s.header.Get("Content-Type") != "application/json" || string(s.body) != `{"a":1}` || s.method != "POST" {
					return "headers or body"
				}
				return ""
			}, "/v1/items/plainvalue123/a%20b"},
		{"basic and a text body", &wire.HTTP{Method: "PUT", URL: wire.Value{wire.Text(e.url("/u?x=1"))},
			Auth: &wire.Auth{Type: wire.AuthBasic, Secret: "TOKEN", User: "deploy"},
			Body: &wire.Body{Text: strPtr("hello")}},
			func(s *seen) string {
				want := "Basic " + base64.StdEncoding.EncodeToString([]byte("deploy:"+testValues["TOKEN"]))
				if s.header.Get("Authorization") != want || s.header.Get("Content-Type") != "text/plain; charset=utf-8" || string(s.body) != "hello" {
					return "basic auth or text body"
				}
				return ""
			}, "/u?x=1"},
		{"text auth and a filled header", &wire.HTTP{Method: "GET", URL: wire.Value{wire.Text(e.url("/"))},
			Auth:    &wire.Auth{Type: wire.AuthText, Secret: "PLAIN"},
			Headers: map[string]wire.Value{"X-Api-Key": {wire.Text("key "), wire.Secret("TOKEN")}},
		},
			func(s *seen) string {
				if s.header.Get("Authorization") != "plainvalue123" || s.header.Get("X-Api-Key") != "key "+testValues["TOKEN"] || len(s.body) != 0 {
					return "text auth or filled header"
				}
				return ""
			}, "/"},
		{"a text body of another type", &wire.HTTP{Method: "PATCH", URL: wire.Value{wire.Text(e.url("/p"))},
			Body: &wire.Body{Text: strPtr("a=1"), ContentType: "application/x-www-form-urlencoded"}},
			func(s *seen) string {
				if s.header.Get("Content-Type") != "application/x-www-form-urlencoded" {
					return "content type"
				}
				return ""
			}, "/p"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := e.run(t, c.h)
			if out.Kind != wire.OutcomeResponse || out.Status != 200 || out.Body == nil || *out.Body != "ok" {
				t.Fatalf("outcome %+v", out)
			}
			e.seen.mu.Lock()
			defer e.seen.mu.Unlock()
			if e.seen.target != c.target {
				t.Errorf("target %q, want %q", e.seen.target, c.target)
			}
			if why := c.check(e.seen); why != "" {
				t.Errorf("%s: %v %q", why, e.seen.header, e.seen.body)
			}
			if e.seen.header.Get("User-Agent") != "jr2-effector" {
				t.Errorf("user agent %q", e.seen.header.Get("User-Agent"))
			}
		})
	}
}

func strPtr(s string) *string { return &s }

// TestRefusedSendsNothing: each refusal settles refused and the upstream
// sees nothing.
func TestRefusedSendsNothing(t *testing.T) {
	e := newEnv(t, nil)
	other := New(Options{Targets: []Target{{Scheme: "https", Host: "127.0.0.1", Port: e.up.Port, Secrets: []string{"PLAIN"}}},
		Values: values, Roots: e.pki.Pool, Work: e.work})
	cases := []struct {
		name string
		kind *Kind
		h    *wire.HTTP
		want string
	}{
		{"another port", e.kind, &wire.HTTP{Method: "GET", URL: wire.Value{wire.Text("https://127.0.0.1:1/")}}, "is not a target"},
		{"another scheme", e.kind, &wire.HTTP{Method: "GET", URL: wire.Value{wire.Text("http://127.0.0.1:" + strconv.Itoa(e.up.Port) + "/")}}, "is not a target"},
		{"another host", e.kind, &wire.HTTP{Method: "GET", URL: wire.Value{wire.Text("https://localhost:" + strconv.Itoa(e.up.Port) + "/")}}, "is not a target"},
		{"another secret in auth", other, &wire.HTTP{Method: "GET", URL: wire.Value{wire.Text(e.url("/"))},
			Auth: &wire.Auth{Type: wire.AuthBearer, Secret: "TOKEN"}}, "secret TOKEN may not be sent"},
		{"another secret in a header", other, &wire.HTTP{Method: "GET", URL: wire.Value{wire.Text(e.url("/"))},
			Headers: map[string]wire.Value{"x": {wire.Secret("TOKEN")}}}, "secret TOKEN may not be sent"},
		{"another secret in the url", other, &wire.HTTP{Method: "GET", URL: wire.Value{wire.Text(e.url("/v/")), wire.Secret("TOKEN")}}, "secret TOKEN may not be sent"},
		{"a dot dot segment", e.kind, &wire.HTTP{Method: "GET", URL: wire.Value{wire.Text(e.url("/v/"))}, Path: []string{"ok", ".."}}, "path[1]"},
		{"an empty segment", e.kind, &wire.HTTP{Method: "GET", URL: wire.Value{wire.Text(e.url("/v/"))}, Path: []string{""}}, "path[0]"},
		{"a dot segment", e.kind, &wire.HTTP{Method: "GET", URL: wire.Value{wire.Text(e.url("/v/"))}, Path: []string{"."}}, "path[0]"},
		{"a secret with a newline in a header", e.kind, &wire.HTTP{Method: "GET", URL: wire.Value{wire.Text(e.url("/"))},
			Auth: &wire.Auth{Type: wire.AuthBearer, Secret: "CTRL"}}, "control character"},
		{"a file that escapes the worktree", e.kind, &wire.HTTP{Method: "POST", URL: wire.Value{wire.Text(e.url("/"))},
			Body: &wire.Body{File: "../outside"}}, "body.file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := e.up.Hits()
			plan, err := c.kind.Prepare("e1", &wire.Start{Kind: wire.KindHTTP, HTTP: c.h})
			if err != nil {
				t.Fatalf("a refusal came as a 400: %v", err)
			}
			out := plan.Run(context.Background(), sc(t))
			if out.Kind != wire.OutcomeRefused || !strings.Contains(out.Reason, c.want) {
				t.Fatalf("outcome %+v, want refused saying %q", out, c.want)
			}
			if strings.Contains(out.Reason, testValues["TOKEN"]) || strings.Contains(out.Reason, "line1") {
				t.Errorf("the reason carries a value: %q", out.Reason)
			}
			if got := e.up.Hits() - before; got != 0 {
				t.Errorf("the upstream got %d requests", got)
			}
		})
	}
}

func TestMalformedIsAnError(t *testing.T) {
	e := newEnv(t, nil)
	instance := New(Options{Values: values, Roots: e.pki.Pool})
	cases := []struct {
		name string
		kind *Kind
		h    *wire.HTTP
		want string
	}{
		{"a file body on the Instance Effector", instance, &wire.HTTP{Method: "POST", URL: wire.Value{wire.Text(e.url("/"))},
			Body: &wire.Body{File: "x"}}, "only a Sandbox Effector"},
		{"a scheme that is not http", e.kind, &wire.HTTP{Method: "GET", URL: wire.Value{wire.Text("ftp://127.0.0.1/")}}, "scheme"},
		{"a header text with a newline", e.kind, &wire.HTTP{Method: "GET", URL: wire.Value{wire.Text(e.url("/"))},
			Headers: map[string]wire.Value{"x": {wire.Text("a\r\nb")}}}, "control character"},
		{"a secret not held", e.kind, &wire.HTTP{Method: "GET", URL: wire.Value{wire.Text(e.url("/")), wire.Secret("NOPE")}}, "holds no such secret"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.kind.Prepare("e1", &wire.Start{Kind: wire.KindHTTP, HTTP: c.h})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want %q", err, c.want)
			}
		})
	}
	if e.up.Hits() != 0 {
		t.Errorf("the upstream got %d requests", e.up.Hits())
	}
}

func TestRedirectIsTheAnswer(t *testing.T) {
	e := newEnv(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "https://elsewhere.example/steal", http.StatusFound)
	})
	out := e.run(t, &wire.HTTP{Method: "GET", URL: wire.Value{wire.Text(e.url("/r"))}, Auth: &wire.Auth{Type: wire.AuthBearer, Secret: "PLAIN"}})
	if out.Kind != wire.OutcomeResponse || out.Status != 302 || out.Headers["location"][0] != "https://elsewhere.example/steal" {
		t.Fatalf("outcome %+v", out)
	}
	if e.up.Hits() != 1 {
		t.Errorf("hits %d", e.up.Hits())
	}
}

// TestNoProxyFromEnv: a proxy named in the environment is not used.
func TestNoProxyFromEnv(t *testing.T) {
	dead, _ := net.Listen("tcp", "127.0.0.1:0")
	defer dead.Close()
	t.Setenv("HTTPS_PROXY", "http://"+dead.Addr().String())
	t.Setenv("HTTP_PROXY", "http://"+dead.Addr().String())
	t.Setenv("NO_PROXY", "")
	e := newEnv(t, nil)
	out := e.run(t, &wire.HTTP{Method: "GET", URL: wire.Value{wire.Text(e.url("/"))}})
	if out.Kind != wire.OutcomeResponse || e.up.Hits() != 1 {
		t.Fatalf("outcome %+v, hits %d", out, e.up.Hits())
	}
}

func TestUnreachableSentNothing(t *testing.T) {
	e := newEnv(t, nil)
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedPort := closed.Addr().(*net.TCPAddr).Port
	closed.Close()
	untrusting := New(Options{Targets: []Target{{Scheme: "https", Host: "127.0.0.1", Port: e.up.Port}}, Values: values, Roots: nil})
	cases := []struct {
		name string
		kind *Kind
		url  string
		want string
	}{
		{"connection refused", New(Options{Targets: []Target{{Scheme: "https", Host: "127.0.0.1", Port: closedPort}}, Values: values}),
			"https://127.0.0.1:" + strconv.Itoa(closedPort) + "/", "connection refused"},
		{"an untrusted certificate", untrusting, e.url("/"), "certificate"},
		{"a name that does not resolve", New(Options{Targets: []Target{{Scheme: "https", Host: "nowhere.invalid", Port: 443}}, Values: values}),
			"https://nowhere.invalid/", "nowhere.invalid"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			plan, err := c.kind.Prepare("e1", &wire.Start{Kind: wire.KindHTTP, TimeoutMs: 5000, HTTP: &wire.HTTP{Method: "POST", URL: wire.Value{wire.Text(c.url)}}})
			if err != nil {
				t.Fatal(err)
			}
			out := plan.Run(context.Background(), sc(t))
			if out.Kind != wire.OutcomeUnreachable || !strings.Contains(out.Reason, c.want) {
				t.Fatalf("outcome %+v, want unreachable saying %q", out, c.want)
			}
		})
	}
	if e.up.Hits() != 0 {
		t.Errorf("the upstream got %d requests", e.up.Hits())
	}
}

func TestUnknownWhenSent(t *testing.T) {
	// The timeout case's handler answers nothing until the test ends: its
	// request context ending (the client went away) is no cue to answer,
	// or a 200 could beat the client's own deadline on a loaded machine.
	var hold chan struct{} // made per case, closed before its upstream stops
	cases := []struct {
		name    string
		handler http.HandlerFunc
		timeout int64
		want    string
	}{
		{"the connection is dropped", func(w http.ResponseWriter, r *http.Request) {
			c, _, _ := w.(http.Hijacker).Hijack()
			c.Close()
		}, 5000, "no answer came"},
		{"the timeout comes first", func(w http.ResponseWriter, r *http.Request) {
			<-hold
		}, 200, "timeout"},
		{"the body is cut", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "100")
			w.WriteHeader(200)
			io.WriteString(w, "partial")
			w.(http.Flusher).Flush()
			c, _, _ := w.(http.Hijacker).Hijack()
			c.Close()
		}, 5000, "the server answered 200"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hold = make(chan struct{})
			e := newEnv(t, c.handler)
			t.Cleanup(func() { close(hold) }) // runs before newEnv's: the upstream can stop
			plan, err := e.kind.Prepare("e1", &wire.Start{Kind: wire.KindHTTP, TimeoutMs: c.timeout, HTTP: &wire.HTTP{Method: "POST", URL: wire.Value{wire.Text(e.url("/"))}}})
			if err != nil {
				t.Fatal(err)
			}
			out := plan.Run(context.Background(), sc(t))
			if out.Kind != wire.OutcomeUnknown || !strings.Contains(out.Reason, c.want) {
				t.Fatalf("outcome %+v, want unknown saying %q", out, c.want)
			}
			if e.up.Hits() != 1 {
				t.Errorf("hits %d", e.up.Hits())
			}
		})
	}
}

func TestTextAndSize(t *testing.T) {
	cases := []struct {
		name, ctype string
		body        []byte
		text        bool
		ctypeOut    string
	}{
		{"text/plain", "text/plain", []byte("hi"), true, "text/plain"},
		{"text/html", "text/html; charset=utf-8", []byte("<p>"), true, "text/html; charset=utf-8"},
		{"json", "application/json", []byte(`{}`), true, "application/json"},
		{"problem json", "application/problem+json", []byte(`{}`), true, "application/problem+json"},
		{"xml", "application/xml", []byte(`<a/>`), true, "application/xml"},
		{"atom xml", "application/atom+xml", []byte(`<a/>`), true, "application/atom+xml"},
		{"form", "application/x-www-form-urlencoded", []byte(`a=1`), true, "application/x-www-form-urlencoded"},
		{"javascript", "application/javascript", []byte(`x()`), true, "application/javascript"},
		{"text javascript", "text/javascript", []byte(`x()`), true, "text/javascript"},
		{"octet stream", "application/octet-stream", []byte("hi"), false, "application/octet-stream"},
		{"png", "image/png", []byte("\x89PNG\r\n\x1a\n"), false, "image/png"},
		{"no type, text", "", []byte("plain words"), true, "text/plain; charset=utf-8"},
		{"no type, binary", "", []byte("\x00\x01\x02\x03binary"), false, "application/octet-stream"},
		{"no type, png", "", []byte("\x89PNG\r\n\x1a\n0000"), false, "image/png"},
		{"unparsable type", "text/", []byte("hi"), false, "text/"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header()["Content-Type"] = nil
				if c.ctype != "" {
					w.Header().Set("Content-Type", c.ctype)
				}
				w.Write(c.body)
			})
			out := e.run(t, &wire.HTTP{Method: "GET", URL: wire.Value{wire.Text(e.url("/"))}})
			if out.Kind != wire.OutcomeResponse || (out.Body != nil) != c.text || out.ContentType != c.ctypeOut || out.Size != int64(len(c.body)) {
				t.Fatalf("outcome %+v (body %v)", out, out.Body != nil)
			}
			if c.text && *out.Body != string(c.body) {
				t.Errorf("body %q", *out.Body)
			}
		})
	}
}

// TestEncodedBodyIsNotText: a body still in a content coding is never
// returned, whatever its type says: it could not be scrubbed.
func TestEncodedBodyIsNotText(t *testing.T) {
	e := newEnv(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Encoding", "br")
		w.Write([]byte("compressed bytes"))
	})
	out := e.run(t, &wire.HTTP{Method: "GET", URL: wire.Value{wire.Text(e.url("/"))},
		Headers: map[string]wire.Value{"accept-encoding": {wire.Text("br")}}})
	if out.Kind != wire.OutcomeResponse || out.Body != nil || out.Size != 16 {
		t.Fatalf("outcome %+v", out)
	}
}

// TestScrubThenTruncate: the bound cuts the scrubbed body, so a secret
// that straddles the cut is replaced whole; size counts every byte.
func TestScrubThenTruncate(t *testing.T) {
	v := testValues["PLAIN"]
	body := strings.Repeat("x", 10) + v + strings.Repeat("y", 5000)
	e := newEnv(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, body)
	})
	for _, max := range []int64{12, 15, 22, 40} {
		out := e.run(t, &wire.HTTP{Method: "GET", URL: wire.Value{wire.Text(e.url("/"))}, MaxResponseBytes: max})
		if out.Size != int64(len(body)) || !out.Truncated || int64(len(*out.Body)) > max {
			t.Fatalf("max %d: outcome size %d truncated %v body %q", max, out.Size, out.Truncated, *out.Body)
		}
		want := (strings.Repeat("x", 10) + "[secret:PLAIN]" + strings.Repeat("y", 40))[:max]
		if max < 24 {
			want = strings.Repeat("x", 10) // the cut goes before a label it would split
		}
		if *out.Body != want {
			t.Errorf("max %d: body %q, want %q", max, *out.Body, want)
		}
		for i := 1; i < len(v); i++ {
			if strings.HasSuffix(*out.Body, v[:i]) {
				t.Errorf("max %d: the body ends with a piece of the value", max)
			}
		}
	}
}

// TestReadBodySplits feeds a body one byte at a time and in odd chunks:
// the secret is replaced whatever the reads.
func TestReadBodySplits(t *testing.T) {
	v := testValues["TOKEN"]
	body := []byte("head " + v + " middle " + v + " tail")
	for _, r := range []io.Reader{iotest.OneByteReader(bytes.NewReader(body)), iotest.HalfReader(bytes.NewReader(body)), bytes.NewReader(body)} {
		got, size, truncated, err := readBody(r, nil, true, 1<<20, sc(t))
		if err != nil || truncated || size != int64(len(body)) {
			t.Fatalf("err %v truncated %v size %d", err, truncated, size)
		}
		if want := "head [secret:TOKEN] middle [secret:TOKEN] tail"; string(got) != want {
			t.Errorf("got %q", got)
		}
	}
}

// TestEachEffectANewConnectionThatResumes: every effect opens its own
// connection (none is reused, so no request can be sent again on a stale
// one), and each after the first resumes the target's TLS session instead
// of a full handshake.
func TestEachEffectANewConnectionThatResumes(t *testing.T) {
	var mu sync.Mutex
	var addrs []string
	var resumed []bool
	e := newEnv(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		addrs, resumed = append(addrs, r.RemoteAddr), append(resumed, r.TLS.DidResume)
		mu.Unlock()
	})
	for i := 0; i < 3; i++ {
		if out := e.run(t, &wire.HTTP{Method: "GET", URL: wire.Value{wire.Text(e.url("/r"))}}); out.Kind != wire.OutcomeResponse {
			t.Fatalf("outcome %+v", out)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(addrs) != 3 || addrs[0] == addrs[1] || addrs[1] == addrs[2] || addrs[0] == addrs[2] {
		t.Errorf("connections %v: want one per effect", addrs)
	}
	if !slices.Equal(resumed, []bool{false, true, true}) {
		t.Errorf("resumed %v, want [false true true]", resumed)
	}
}

func TestFileBody(t *testing.T) {
	e := newEnv(t, nil)
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("outside the worktree"), 0o600)
	os.MkdirAll(filepath.Join(e.work, "dist"), 0o755)
	os.WriteFile(filepath.Join(e.work, "dist", "app.txt"), []byte("artifact bytes"), 0o644)
	os.Symlink(filepath.Join(outside, "secret"), filepath.Join(e.work, "link-out"))
	os.Symlink("dist/app.txt", filepath.Join(e.work, "link-in"))
	if err := syscall.Mkfifo(filepath.Join(e.work, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(e.work, "dir"), 0o755)
	cases := []struct {
		file string
		sent string
		want string
	}{
		{"dist/app.txt", "artifact bytes", ""},
		{"link-in", "artifact bytes", ""},
		{"../" + filepath.Base(outside) + "/secret", "", "body.file"},
		{"link-out", "", "body.file"},
		{filepath.Join(outside, "secret"), "", "body.file"},
		{"fifo", "", "not a regular file"},
		{"dir", "", "not a regular file"},
		{"missing", "", "no such file"},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			before := e.up.Hits()
			done := make(chan wire.Outcome, 1)
			go func() {
				done <- e.run(t, &wire.HTTP{Method: "POST", URL: wire.Value{wire.Text(e.url("/upload"))}, Body: &wire.Body{File: c.file, ContentType: "text/plain"}})
			}()
			var out wire.Outcome
			select {
			case out = <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("the effect hung on the file")
			}
			if c.want != "" {
				if out.Kind != wire.OutcomeRefused || !strings.Contains(out.Reason, c.want) || e.up.Hits() != before {
					t.Fatalf("outcome %+v, hits %d", out, e.up.Hits()-before)
				}
				if strings.Contains(out.Reason, outside) || strings.Contains(out.Reason, e.work) {
					t.Errorf("the reason names a path: %q", out.Reason)
				}
				return
			}
			e.seen.mu.Lock()
			defer e.seen.mu.Unlock()
			if out.Kind != wire.OutcomeResponse || string(e.seen.body) != c.sent || e.seen.header.Get("Content-Type") != "text/plain" {
				t.Fatalf("outcome %+v, sent %q", out, e.seen.body)
			}
		})
	}
}

func TestBuiltForms(t *testing.T) {
	e := newEnv(t, nil)
	plan, err := e.kind.Prepare("e1", &wire.Start{Kind: wire.KindHTTP, HTTP: &wire.HTTP{Method: "GET",
		URL:     wire.Value{wire.Text(e.url("/v1/")), wire.Secret("TOKEN")},
		Path:    []string{"x"},
		Headers: map[string]wire.Value{"x-key": {wire.Text("k="), wire.Secret("PLAIN")}},
		Auth:    &wire.Auth{Type: wire.AuthBasic, Secret: "PLAIN", User: "u"}}})
	if err != nil {
		t.Fatal(err)
	}
	enc := escapeSegment(testValues["TOKEN"])
	want := map[string][]string{
		"TOKEN": {e.url("/v1/" + enc + "/x"), "/v1/" + enc + "/x", "/v1/" + enc + "/x"},
		"PLAIN": {"k=plainvalue123", "Basic " + base64.StdEncoding.EncodeToString([]byte("u:plainvalue123")), "u:plainvalue123"},
	}
	for name, forms := range want {
		got := map[string]bool{}
		for _, b := range plan.Built[name] {
			got[string(b)] = true
		}
		for _, f := range forms {
			if !got[f] {
				t.Errorf("%s: %q not among the built forms %q", name, f, plan.Built[name])
			}
		}
	}
	if plan.Method != "GET" || plan.Host != "127.0.0.1" {
		t.Errorf("log fields %s %s", plan.Method, plan.Host)
	}
}
