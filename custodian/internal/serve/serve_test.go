package serve

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/internal/contract"
	"jr2.dev/boundary/internal/testkit/testpki"
)

const (
	keyValue   = "sk-SENTINEL-serve-0123456789abcdef"
	tokenValue = "tok-SENTINEL-serve-sandbox-token"
)

var keySI = contract.StandIn("KEY")

// syncBuf is a log sink the server writes from many goroutines.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// upstream is a bound target: it records what it received and echoes it.
type upstream struct {
	srv      *httptest.Server
	target   string
	hits     atomic.Int64
	mu       sync.Mutex
	lastReq  *http.Request
	sseStep  chan struct{}
	received []string
	conns    atomic.Int64  // TLS connections accepted
	arrived  chan struct{} // a request reached /v1/barrier
	release  chan struct{} // closed: /v1/barrier answers
	ws       wsSeen        // what /v1/ws received
}

func newUpstream(t *testing.T, uca *testpki.CA) *upstream {
	u := &upstream{sseStep: make(chan struct{}), arrived: make(chan struct{}, 1024), release: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		if r.URL.Path == "/v1/ws" {
			serveWebSocket(w, r, &u.ws) // websocket_test.go
			return
		}
		if r.URL.Path == "/v1/barrier" {
			u.arrived <- struct{}{}
			<-u.release
			io.WriteString(w, "released")
			return
		}
		u.mu.Lock()
		u.lastReq = r.Clone(context.Background())
		u.mu.Unlock()
		if r.URL.Path == "/v1/early" {
			io.WriteString(w, "early") // an answer before the body is read
			return
		}
		body, _ := io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/v1/sse":
			w.Header().Set("Content-Type", "text/event-stream")
			fl := w.(http.Flusher)
			for i := 0; i < 3; i++ {
				fmt.Fprintf(w, "data: event %d\n\n", i)
				fl.Flush()
				select {
				case <-u.sseStep:
				case <-r.Context().Done():
					return
				case <-time.After(10 * time.Second):
					return
				}
			}
			return
		case "/v1/gzip":
			w.Header().Set("Content-Encoding", "gzip")
			zw := gzip.NewWriter(w)
			fmt.Fprintf(zw, "you sent %s", r.Header.Get("X-Api-Key"))
			zw.Close()
			return
		case "/v1/echo-body":
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Write(body)
			return
		case "/v1/range-echo":
			// An echo that honours Range, as a static-file server does.
			http.ServeContent(w, r, "", time.Time{}, strings.NewReader("you sent "+r.Header.Get("X-Api-Key")))
			return
		case "/v1/trailer-echo":
			w.Header().Set(http.TrailerPrefix+r.Header.Get("X-Api-Key"), "1")
			w.Header().Set(http.TrailerPrefix+"X-Sum", r.Header.Get("X-Api-Key"))
			io.WriteString(w, "body")
			return
		case "/v1/hop-gzip", "/v1/hop-x-gzip", "/v1/hop-deflate", "/v1/hop-br":
			// The encoding named hop-by-hop: a relay that
			// drops what Connection names before the engine decides passes
			// the compressed echo on without the header that says so.
			enc := strings.TrimPrefix(r.URL.Path, "/v1/hop-")
			w.Header().Set("Connection", "Content-Encoding, Content-Type")
			w.Header().Set("Content-Encoding", enc)
			w.Header().Set("Content-Type", "text/plain")
			compress(w, enc, "you sent "+r.Header.Get("X-Api-Key"))
			return
		case "/v1/br":
			w.Header().Set("Content-Encoding", "br")
			io.WriteString(w, "opaque")
			return
		}
		w.Header().Set("X-Echo", r.Header.Get("X-Api-Key"))
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"path": r.URL.RequestURI(), "host": r.Host, "headers": r.Header, "body": string(body),
		})
	})
	u.srv = httptest.NewUnstartedServer(mux)
	leaf := uca.Leaf(t, "127.0.0.1")
	u.srv.TLS = &tls.Config{Certificates: []tls.Certificate{leaf.TLS}}
	u.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			u.conns.Add(1)
		}
	}
	u.srv.StartTLS()
	t.Cleanup(u.srv.Close)
	u.target = u.srv.Listener.Addr().String()
	return u
}

// compress writes text to w encoded as enc: gzip, x-gzip and deflate
// truly, any other name as text (what a server that lies would send).
func compress(w io.Writer, enc, text string) {
	switch enc {
	case "gzip", "x-gzip":
		zw := gzip.NewWriter(w)
		io.WriteString(zw, text)
		zw.Close()
	case "deflate":
		zw := zlib.NewWriter(w)
		io.WriteString(zw, text)
		zw.Close()
	default:
		io.WriteString(w, text)
	}
}

type fixture struct {
	t        *testing.T
	up       *upstream
	orch     *httptest.Server
	orchSeen chan *http.Request
	jca      *testpki.CA
	uca      *testpki.CA // the upstreams' CA, set for newFixtureEdit's edit
	srv      *Server
	log      *syncBuf
	control  string
	egress   string
	health   string
	cancel   context.CancelFunc
	done     chan error
	dead     string // a bound target nothing listens on
	config   string // custodian.json's path
}

// newFixture renders a directory by hand (controlplane render is tested on
// its own) and starts a Server on port 0 listeners.
func newFixture(t *testing.T, resolver *net.Resolver) *fixture {
	return newFixtureWith(t, resolver, nil)
}

// newFixtureWith is newFixture with the Options changed by opt.
func newFixtureWith(t *testing.T, resolver *net.Resolver, opt func(*Options)) *fixture {
	return newFixtureEdit(t, resolver, opt, nil)
}

// held is more secrets a fixture holds, each bound to the upstream
// (LocalTargets), and the value files they need (file name -> content).
// uca is the CA the upstream roots (ca/upstream.crt) hold.
type held func(uca *testpki.CA) (more []filter.SecretConfig, files map[string]string)

// newFixtureHeld is newFixtureWith holding more secrets too.
func newFixtureHeld(t *testing.T, resolver *net.Resolver, opt func(*Options), more held) *fixture {
	return newFixtureEdit(t, resolver, opt, func(f *fixture, dir string, cfg *filter.Config) {
		ms, files := more(f.uca)
		for _, m := range ms {
			m.Targets = []string{f.up.target}
			cfg.Secrets = append(cfg.Secrets, m)
		}
		for name, v := range files {
			must(t, os.WriteFile(filepath.Join(dir, "values", name), []byte(v), 0o600))
		}
	})
}

// newFixtureEdit is newFixtureWith whose config edit changes before it is
// written (edit may write more files into the directory, dir, and start
// upstreams under f.uca).
func newFixtureEdit(t *testing.T, resolver *net.Resolver, opt func(*Options), edit func(f *fixture, dir string, cfg *filter.Config)) *fixture {
	f := &fixture{t: t, log: &syncBuf{}, orchSeen: make(chan *http.Request, 16)}
	uca := testpki.NewCA(t, "upstream test CA")
	f.jca = testpki.NewCA(t, "jr2 test CA")
	f.up = newUpstream(t, uca)
	f.orch = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.orchSeen <- r.Clone(context.Background())
		if enc, ok := strings.CutPrefix(r.URL.Path, "/agents/hop-"); ok {
			enc = strings.TrimSuffix(enc, "/surface")
			w.Header().Set("Connection", "content-encoding")
			w.Header().Set("Content-Encoding", enc)
			compress(w, enc, "token "+r.Header.Get("Authorization"))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"path":%q,"auth":%q}`, r.URL.RequestURI(), r.Header.Get("Authorization"))
	}))
	t.Cleanup(f.orch.Close)
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	f.dead = l.Addr().String()
	l.Close()

	dir := t.TempDir()
	cfg := filter.Config{
		Pod: "ws-test", Sandbox: "ws-test", Orchestrator: f.orch.Listener.Addr().String(), ValuesDir: "values",
		Listeners:    filter.Listeners{Control: "127.0.0.1:0", Egress: "127.0.0.1:0", Health: "127.0.0.1:0"},
		LocalTargets: true,
		Secrets: []filter.SecretConfig{
			{Name: "KEY", StandIn: keySI, Targets: []string{f.up.target, f.dead}, Headers: []string{"x-api-key"}, Paths: []string{"/v1/"}},
			{Name: contract.TokenName, StandIn: contract.StandIn(contract.TokenName), Headers: []string{"authorization"}},
		},
	}
	must(t, os.MkdirAll(filepath.Join(dir, "values"), 0o700))
	must(t, os.MkdirAll(filepath.Join(dir, "tls"), 0o755))
	if edit != nil {
		f.uca = uca
		edit(f, dir, &cfg)
	}
	b, _ := json.MarshalIndent(cfg, "", "  ")
	must(t, os.WriteFile(filepath.Join(dir, "custodian.json"), b, 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "values", "KEY"), []byte(keyValue+"\n"), 0o600))
	must(t, os.WriteFile(filepath.Join(dir, "values", contract.TokenName), []byte(tokenValue), 0o600))
	for _, tg := range []string{f.up.target, f.dead} {
		leaf := f.jca.Leaf(t, "127.0.0.1")
		base := filepath.Join(dir, contract.LeafBase(tg))
		must(t, os.WriteFile(base+".crt", leaf.CertPEM, 0o644))
		must(t, os.WriteFile(base+".key", leaf.KeyPEM, 0o600))
	}
	must(t, os.MkdirAll(filepath.Join(dir, "ca"), 0o755))
	uca.WriteFile(t, filepath.Join(dir, "ca"), "upstream.crt")

	o := Options{ConfigPath: filepath.Join(dir, "custodian.json"), Log: f.log, Resolver: resolver, Grace: time.Second}
	if opt != nil {
		opt(&o)
	}
	srv, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	f.srv, f.config = srv, o.ConfigPath
	f.control, f.egress, f.health = srv.Addrs()
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel, f.done = cancel, make(chan error, 1)
	go func() { f.done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-f.done:
		case <-time.After(5 * time.Second):
			t.Error("the server did not stop")
		}
		if l := f.log.String(); strings.Contains(l, keyValue) || strings.Contains(l, tokenValue) || strings.Contains(l, "jr2-held-") {
			t.Errorf("a log line holds a value or a stand-in:\n%s", l)
		}
	})
	waitLog(t, f.log, "jr2.custodian ready ")
	return f
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func waitLog(t *testing.T, log *syncBuf, want string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(log.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no log line %q in:\n%s", want, log.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// client goes through the egress listener as HTTPS_PROXY, trusting the jr2 CA.
func (f *fixture) client() *http.Client {
	pu, _ := url.Parse("http://" + f.egress)
	return &http.Client{Transport: &http.Transport{
		Proxy:              http.ProxyURL(pu),
		TLSClientConfig:    &tls.Config{RootCAs: f.jca.Pool()},
		DisableCompression: true,
	}, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func (f *fixture) do(method, target, path string, hdr ...string) (*http.Response, string) {
	f.t.Helper()
	req, err := http.NewRequest(method, "https://"+target+path, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := f.client().Do(req)
	if err != nil {
		f.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestSwapScrubAndLog(t *testing.T) {
	f := newFixture(t, nil)
	resp, body := f.do("GET", f.up.target, "/v1/echo?q=1", "x-api-key", keySI, "authorization", "Bearer agent-made-this-up")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	f.up.mu.Lock()
	got := f.up.lastReq
	f.up.mu.Unlock()
	if got.Header.Get("X-Api-Key") != keyValue {
		t.Fatalf("upstream got x-api-key %q", got.Header.Get("X-Api-Key"))
	}
	if got.Header.Get("Authorization") != "" || got.Header.Get("Accept-Encoding") != "identity" || got.Header.Get("User-Agent") != "Go-http-client/1.1" {
		t.Fatalf("upstream headers %v", got.Header)
	}
	if strings.Contains(body, keyValue) || strings.Contains(resp.Header.Get("X-Echo"), keyValue) {
		t.Fatalf("the value came back: %s %v", body, resp.Header)
	}
	if resp.Header.Get("X-Echo") != "[secret:KEY]" || !strings.Contains(body, "[secret:KEY]") {
		t.Fatalf("not scrubbed as [secret:KEY]: %s %v", body, resp.Header)
	}
	if resp.Header.Get("Content-Length") != "" || resp.Header.Get("Date") == "" {
		t.Fatalf("content-length kept or upstream date lost: %v", resp.Header)
	}
	if !strings.Contains(body, `"path":"/v1/echo?q=1"`) {
		t.Fatalf("path upstream: %s", body)
	}
	waitLog(t, f.log, "jr2.custodian action=intercept target="+f.up.target+" secret=KEY method=GET status=200\n")
}

func TestRefusalsNeverLeave(t *testing.T) {
	f := newFixture(t, nil)
	cases := []struct {
		method, path string
		hdr          []string
		status       int
		body         string
	}{
		{"TRACE", "/v1/x", []string{"x-api-key", keySI}, 405, "jr2 custodian: method TRACE is not allowed; use GET, HEAD, POST, PUT, PATCH, DELETE or OPTIONS"},
		{"GET", "/v1/x", []string{"x-api-key", keySI, "x_api_key", "1"}, 400, `jr2 custodian: header X_api_key has "_" in its name; header names here use "-"`},
		{"GET", "/v1/a%2Fb", []string{"x-api-key", keySI}, 400, `jr2 custodian: the path holds an encoded "/", "." or "\" (%2f, %2e or %5c); send it unencoded`},
		{"GET", "/admin", []string{"x-api-key", keySI}, 403, "jr2 custodian: KEY may not be sent to this path; its paths are /v1/"},
		{"GET", "/v1/x", nil, 403, "jr2 custodian: needs the stand-in of KEY in x-api-key"},
		{"GET", "/v1/x?k=" + keySI, []string{"x-api-key", keySI}, 403, "jr2 custodian: the stand-in of KEY is in the query; a stand-in rides only a header its secret is bound to, and is never sent upstream"},
		// Go sends the name as Jr2-Held-Key: the stand-in, case folded.
		{"GET", "/v1/x", []string{"x-api-key", keySI, keySI, "1"}, 403, "jr2 custodian: the stand-in of KEY is in a header name; a stand-in rides only a header its secret is bound to, and is never sent upstream"},
	}
	for _, c := range cases {
		resp, body := f.do(c.method, f.up.target, c.path, c.hdr...)
		if resp.StatusCode != c.status || body != c.body {
			t.Errorf("%s %s: %d %q, want %d %q", c.method, c.path, resp.StatusCode, body, c.status, c.body)
		}
	}
	// 421: a Host that does not name the target, through a raw TLS request.
	raw := f.rawTLS(t, f.up.target, "GET /v1/x HTTP/1.1\r\nHost: evil.example\r\nx-api-key: "+keySI+"\r\nConnection: close\r\n\r\n")
	if !strings.HasPrefix(raw, "HTTP/1.1 421 ") || !strings.HasSuffix(raw, "jr2 custodian: the Host header must name "+f.up.target) {
		t.Errorf("421: %q", raw)
	}
	if n := f.up.hits.Load(); n != 0 {
		t.Fatalf("the upstream got %d refused requests", n)
	}
	waitLog(t, f.log, "jr2.custodian action=refuse target="+f.up.target+" reason=no-stand-in\n")
}

// rawTLS sends a raw request through a CONNECT to target and returns the
// answer.
func (f *fixture) rawTLS(t *testing.T, target, req string) string {
	c, err := net.Dial("tcp", f.egress)
	must(t, err)
	defer c.Close()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	must(t, err)
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT %s: %d", target, resp.StatusCode)
	}
	tc := tls.Client(&bufConn{Conn: c, r: br}, &tls.Config{RootCAs: f.jca.Pool(), ServerName: "127.0.0.1"})
	io.WriteString(tc, req)
	b, _ := io.ReadAll(tc)
	return string(b)
}

type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufConn) Read(p []byte) (int, error) { return c.r.Read(p) }

func TestSSEArrivesEventByEvent(t *testing.T) {
	f := newFixture(t, nil)
	req, _ := http.NewRequest("GET", "https://"+f.up.target+"/v1/sse", nil)
	req.Header.Set("x-api-key", keySI)
	resp, err := f.client().Do(req)
	must(t, err)
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for i := 0; i < 3; i++ {
		// The upstream sends event i+1 only after we read event i: a
		// Custodian that held an event would deadlock here.
		done := make(chan string, 1)
		go func() {
			line, _ := br.ReadString('\n')
			br.ReadString('\n')
			done <- line
		}()
		select {
		case line := <-done:
			if line != fmt.Sprintf("data: event %d\n", i) {
				t.Fatalf("event %d: %q", i, line)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("event %d did not arrive before the next was sent", i)
		}
		f.up.sseStep <- struct{}{}
	}
}

func TestGzipAndUnreadableEncodings(t *testing.T) {
	f := newFixture(t, nil)
	resp, body := f.do("GET", f.up.target, "/v1/gzip", "x-api-key", keySI)
	if resp.StatusCode != 200 || body != "you sent [secret:KEY]" || resp.Header.Get("Content-Encoding") != "" {
		t.Fatalf("gzip: %d %q %v", resp.StatusCode, body, resp.Header)
	}
	resp, body = f.do("GET", f.up.target, "/v1/br", "x-api-key", keySI)
	want := "jr2 custodian: " + f.up.target + " answered with content-encoding br, which the Custodian cannot read to scrub; the answer was not passed on"
	if resp.StatusCode != 502 || body != want {
		t.Fatalf("br: %d %q", resp.StatusCode, body)
	}
}

// An agent that could ask for a byte range of an echo would get the value
// in pieces, each too short to be a form the scrubber knows: Range and
// If-Range never go upstream, so the whole echo comes back, scrubbed.
func TestRangeNeverCutsAnEcho(t *testing.T) {
	f := newFixture(t, nil)
	for _, rng := range []string{"bytes=9-20", "bytes=9-20,21-40", "bytes=-5"} {
		resp, body := f.do("GET", f.up.target, "/v1/range-echo", "x-api-key", keySI, "range", rng)
		if resp.StatusCode != 200 || body != "you sent [secret:KEY]" || resp.Header.Get("Content-Range") != "" {
			t.Errorf("Range %s: %d %v %q", rng, resp.StatusCode, resp.Header, body)
		}
		f.up.mu.Lock()
		got := f.up.lastReq.Header
		f.up.mu.Unlock()
		if got.Get("Range") != "" || got.Get("If-Range") != "" {
			t.Errorf("Range %s: the upstream got %v", rng, got)
		}
		for i := 0; i+6 <= len(keyValue); i++ {
			if strings.Contains(body, keyValue[i:i+6]) {
				t.Fatalf("Range %s: a piece of the value came back: %q", rng, body)
			}
		}
	}
}

// A trailer is held to what a header is: a name that holds a value (Go
// writes it case-folded, Sk-Sentinel-…) is dropped, a value is scrubbed.
func TestTrailersAreScrubbedLikeHeaders(t *testing.T) {
	f := newFixture(t, nil)
	req, _ := http.NewRequest("GET", "https://"+f.up.target+"/v1/trailer-echo", nil)
	req.Header.Set("x-api-key", keySI)
	resp, err := f.client().Do(req)
	must(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "body" {
		t.Fatalf("%d %q", resp.StatusCode, b)
	}
	if len(resp.Trailer) != 1 || resp.Trailer.Get("X-Sum") != "[secret:KEY]" {
		t.Fatalf("trailers %v, want only X-Sum: [secret:KEY]", resp.Trailer)
	}
}

func TestUnreachableBoundTarget(t *testing.T) {
	f := newFixture(t, nil)
	resp, body := f.do("POST", f.dead, "/v1/x", "x-api-key", keySI)
	if resp.StatusCode != 502 || !strings.HasPrefix(body, "jr2 custodian: "+f.dead+" could not be reached: ") {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	waitLog(t, f.log, "action=intercept target="+f.dead+" secret=KEY method=POST status=502\n")
}

// fakeDNS answers every A query with 127.0.0.1: a name that resolves to a
// guarded address.
func fakeDNS(t *testing.T) *net.Resolver { return fakeDNSOf(t, [4]byte{127, 0, 0, 1}) }

// fakeDNSOf answers every A query with the addresses, in order.
func fakeDNSOf(t *testing.T, addrs ...[4]byte) *net.Resolver {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	must(t, err)
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 512)
		for {
			n, addr, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			q := buf[:n]
			i := 12
			for i < len(q) && q[i] != 0 {
				i += int(q[i]) + 1
			}
			if i+5 > len(q) {
				continue
			}
			qtype := int(q[i+1])<<8 | int(q[i+2])
			resp := append([]byte{}, q[:i+5]...)
			resp[2], resp[3] = 0x81, 0x80
			resp[6], resp[7], resp[8], resp[9], resp[10], resp[11] = 0, 0, 0, 0, 0, 0
			if qtype == 1 {
				resp[7] = byte(len(addrs))
				for _, a := range addrs {
					resp = append(resp, 0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, a[0], a[1], a[2], a[3])
				}
			}
			pc.WriteTo(resp, addr)
		}
	}()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", pc.LocalAddr().String())
	}}
}

func TestTunnelDialGuard(t *testing.T) {
	f := newFixture(t, fakeDNS(t))
	for _, c := range []struct{ target, body string }{
		{"127.1:22", "jr2 custodian: 127.1:22 is guarded (loopback); a tunnel never reaches it"},
		{"[::ffff:7f00:1]:22", "jr2 custodian: [::ffff:127.0.0.1]:22 is guarded (IPv4-mapped form of loopback); a tunnel never reaches it"},
		{"rebind.example:" + strings.Split(f.up.target, ":")[1], "jr2 custodian: rebind.example:" + strings.Split(f.up.target, ":")[1] + " is guarded (loopback); a tunnel never reaches it"},
	} {
		c2, err := net.Dial("tcp", f.egress)
		must(t, err)
		fmt.Fprintf(c2, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", c.target, c.target)
		resp, err := http.ReadResponse(bufio.NewReader(c2), nil)
		must(t, err)
		b, _ := io.ReadAll(resp.Body)
		c2.Close()
		if resp.StatusCode != 403 || string(b) != c.body {
			t.Errorf("CONNECT %s: %d %q", c.target, resp.StatusCode, b)
		}
	}
	waitLog(t, f.log, "action=refuse target=rebind.example:")
	if n := f.up.hits.Load(); n != 0 {
		t.Fatal("a guarded tunnel reached the upstream")
	}
}

// A name that resolves to several addresses is guarded on each address
// actually dialled: when the first fails, the next is checked before it is
// dialled, whatever the order. (Envoy's rendered guard judges only the
// first address of a DNS cache entry; see the review notes.)
func TestTunnelGuardsEveryAddressOfAName(t *testing.T) {
	var own [4]byte
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() && !ipn.IP.IsLinkLocalUnicast() {
			copy(own[:], ipn.IP.To4())
		}
	}
	if own == [4]byte{} {
		t.Skip("no non-loopback IPv4 address here to fail a first dial fast")
	}
	for _, order := range [][][4]byte{{own, {127, 0, 0, 1}}, {{127, 0, 0, 1}, own}} {
		f := newFixture(t, fakeDNSOf(t, order...))
		target := "several.example:" + strings.Split(f.up.target, ":")[1]
		c, err := net.Dial("tcp", f.egress)
		must(t, err)
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		must(t, err)
		b, _ := io.ReadAll(resp.Body)
		c.Close()
		want := "jr2 custodian: " + target + " is guarded (loopback); a tunnel never reaches it"
		// A 200 here would be a tunnel up to the loopback upstream.
		if resp.StatusCode != 403 || string(b) != want {
			t.Errorf("order %v: %d %q, want 403 %q", order, resp.StatusCode, b, want)
		}
	}
}

func TestControlListener(t *testing.T) {
	f := newFixture(t, nil)
	tok := "Bearer " + contract.StandIn(contract.TokenName)
	get := func(method, path string, hdr ...string) (int, string) {
		req, _ := http.NewRequest(method, "http://"+f.control+path, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, c := range []struct{ method, path, up string }{
		{"GET", "/agents/a1/surface", "/agents/a1/surface"},
		{"POST", "/agents/a1/events", "/agents/a1/events"},
		{"GET", "/agents/a1/deliveries/d1", "/agents/a1/deliveries/d1"},
		{"POST", "/fetch", "/sandboxes/ws-test/fetch"},
	} {
		st, body := get(c.method, c.path, "Authorization", tok, "x-api-key", "leftover")
		if st != 200 {
			t.Fatalf("%s %s: %d %s", c.method, c.path, st, body)
		}
		r := <-f.orchSeen
		if r.URL.Path != c.up || r.Header.Get("Authorization") != "Bearer "+tokenValue || r.Header.Get("X-Api-Key") != "" {
			t.Fatalf("orchestrator saw %s %v", r.URL.Path, r.Header)
		}
		if strings.Contains(body, tokenValue) || !strings.Contains(body, "[secret:JR2_SANDBOX_TOKEN]") {
			t.Fatalf("answer not scrubbed: %s", body)
		}
	}
	if st, body := get("GET", "/admin", "Authorization", tok); st != 404 || !strings.HasPrefix(body, "jr2 custodian: not a route") {
		t.Fatalf("404: %d %s", st, body)
	}
	if st, body := get("GET", "/agents/a1/surface"); st != 403 || body != "jr2 custodian: needs the stand-in of JR2_SANDBOX_TOKEN in authorization" {
		t.Fatalf("403: %d %s", st, body)
	}
	select {
	case r := <-f.orchSeen:
		t.Fatalf("a refused request reached the orchestrator: %s", r.URL)
	default:
	}
}

func TestControlRetriesAndFailures(t *testing.T) {
	f := newFixture(t, nil)
	f.orch.Close() // nothing listens: nothing is ever sent
	tok := "Bearer " + contract.StandIn(contract.TokenName)
	for _, m := range []struct{ method, path string }{{"GET", "/agents/a/surface"}, {"POST", "/agents/a/events"}} {
		req, _ := http.NewRequest(m.method, "http://"+f.control+m.path, strings.NewReader(""))
		req.Header.Set("Authorization", tok)
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 502 || resp.Header.Get("X-Jr2-Custodian") != "unreachable" || resp.Header.Get("X-Jr2-Custodian-Flags") != "UF" ||
			!strings.HasPrefix(string(b), "jr2 custodian: "+f.srv.eng.Config().Orchestrator+" could not be reached: ") {
			t.Fatalf("%s: %d %v %q", m.path, resp.StatusCode, resp.Header, b)
		}
	}
}

func TestHealthListener(t *testing.T) {
	f := newFixture(t, nil)
	resp, err := http.Get("http://" + f.health + "/healthz")
	must(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "ok" {
		t.Fatalf("healthz: %d %q", resp.StatusCode, b)
	}
	// 16 idle connections hold every place; a 17th is closed at once.
	var conns []net.Conn
	for i := 0; i < healthMaxConns; i++ {
		c, err := net.Dial("tcp", f.health)
		must(t, err)
		conns = append(conns, c)
	}
	time.Sleep(100 * time.Millisecond)
	c, err := net.Dial("tcp", f.health)
	must(t, err)
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("17th connection: %v, want EOF", err)
	}
	c.Close()
	// An idle connection is closed after 5 s, freeing its place.
	conns[0].SetReadDeadline(time.Now().Add(healthIdle + 2*time.Second))
	start := time.Now()
	if _, err := conns[0].Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("idle connection: %v", err)
	}
	if d := time.Since(start); d > healthIdle+time.Second {
		t.Fatalf("idle connection closed after %v", d)
	}
	for _, c := range conns {
		c.Close()
	}
}

func TestNotConnect(t *testing.T) {
	f := newFixture(t, nil)
	resp, err := http.Get("http://" + f.egress + "/")
	must(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 405 || string(b) != "jr2 custodian: this listener takes CONNECT only; use it as HTTPS_PROXY" {
		t.Fatalf("%d %q", resp.StatusCode, b)
	}
}

// Without localTargets, a bound name that resolves to a guarded address is
// never dialled: the agent could be the one serving it.
func TestBoundNameResolvingToLoopback(t *testing.T) {
	uca := testpki.NewCA(t, "upstream test CA")
	jca := testpki.NewCA(t, "jr2 test CA")
	up := newUpstream(t, uca)
	port := strings.Split(up.target, ":")[1]
	target := "bound.example:" + port
	dir := t.TempDir()
	cfg := filter.Config{
		Pod: "ws-test", Orchestrator: "orch.example:4000", ValuesDir: "values",
		Listeners: filter.Listeners{Control: "127.0.0.1:0", Egress: "127.0.0.1:0", Health: "127.0.0.1:0"},
		Secrets: []filter.SecretConfig{
			{Name: "KEY", StandIn: keySI, Targets: []string{target}, Headers: []string{"x-api-key"}},
			{Name: contract.TokenName, StandIn: contract.StandIn(contract.TokenName), Headers: []string{"authorization"}},
		},
	}
	b, _ := json.Marshal(cfg)
	must(t, os.WriteFile(filepath.Join(dir, "custodian.json"), b, 0o644))
	must(t, os.MkdirAll(filepath.Join(dir, "values"), 0o700))
	must(t, os.WriteFile(filepath.Join(dir, "values", "KEY"), []byte(keyValue), 0o600))
	must(t, os.WriteFile(filepath.Join(dir, "values", contract.TokenName), []byte(tokenValue), 0o600))
	must(t, os.MkdirAll(filepath.Join(dir, "tls"), 0o755))
	leaf := jca.Leaf(t, "bound.example")
	base := filepath.Join(dir, contract.LeafBase(target))
	must(t, os.WriteFile(base+".crt", leaf.CertPEM, 0o644))
	must(t, os.WriteFile(base+".key", leaf.KeyPEM, 0o600))
	must(t, os.MkdirAll(filepath.Join(dir, "ca"), 0o755))
	uca.WriteFile(t, filepath.Join(dir, "ca"), "upstream.crt")
	log := &syncBuf{}
	srv, err := New(Options{ConfigPath: filepath.Join(dir, "custodian.json"), Log: log, Resolver: fakeDNS(t), Grace: time.Second})
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	defer func() { cancel(); <-done }()
	_, egress, _ := srv.Addrs()
	pu, _ := url.Parse("http://" + egress)
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu), TLSClientConfig: &tls.Config{RootCAs: jca.Pool()}}}
	req, _ := http.NewRequest("GET", "https://"+target+"/x", nil)
	req.Header.Set("x-api-key", keySI)
	resp, err := c.Do(req)
	must(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := "jr2 custodian: " + target + " could not be reached: "
	if resp.StatusCode != 502 || !strings.HasPrefix(string(body), want) || !strings.Contains(string(body), "guarded") {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	if up.hits.Load() != 0 {
		t.Fatal("the value reached a loopback address")
	}
}

// A large body echoed back arrives whole, every time: the answer may start
// before the forwarder has read the end of the request body, and neither
// side may cut the other then (a regression: the server used to close the
// request body under the forwarder once the answer began).
func TestLargeEchoIsWhole(t *testing.T) {
	f := newFixture(t, nil)
	body := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	c := f.client()
	for i := 0; i < 40; i++ {
		req, _ := http.NewRequest("POST", "https://"+f.up.target+"/v1/echo-body", bytes.NewReader(body))
		req.Header.Set("x-api-key", keySI)
		resp, err := c.Do(req)
		must(t, err)
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || !bytes.Equal(got, body) {
			t.Fatalf("round %d: status %d, %d of %d bytes, err %v", i, resp.StatusCode, len(got), len(body), err)
		}
	}
}
