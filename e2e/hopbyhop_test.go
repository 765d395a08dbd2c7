//go:build linux

package e2e

import (
	"bufio"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"jr2.dev/boundary/filter/scrub"
	"jr2.dev/boundary/filter/standintest"
	"jr2.dev/boundary/internal/contract"
	"jr2.dev/boundary/internal/testkit/testpki"
)

// hopName is the hop-by-hop pod's secret most of its cases send.
const hopName = "HOP_KEY"

// placesName is the hop pod's second secret, bound to the same target: its
// name holds no '_', so a header name holding its stand-in reaches rule 10
// and not rule 2, and the shared table of rule 10's places runs against a
// real Envoy and real custodian serve.
const placesName = "PLACES"

// TestHopByHop runs the transport's holes an adversarial pass found
// against each host, on a pod of its own: an answer whose Content-Encoding
// its Connection header names (on an intercepted target and on the control
// listener), refusals of requests with a body on a keep-alive connection,
// handshakes whose ALPN quotes a stand-in, a path and a forged contract
// line, and "OPTIONS *" on an intercepted connection.
// Then it stops the host and checks all it printed: contract lines only,
// and no value, stand-in or word the peer chose.
func TestHopByHop(t *testing.T) {
	for _, host := range hostsToRun(t) {
		t.Run(host.Name(), func(t *testing.T) { testHopByHop(t, host) })
	}
}

// hopPod is the rendered pod and what surrounds it.
type hopPod struct {
	run    *Running
	target string // the bound upstream, 127.0.0.1:port
	value  string // HOP_KEY's value
	token  string // the Sandbox token's value
	roots  *x509.CertPool
	hits   chan string   // each request target the upstream got
	down   string        // a bound target where nothing listens, 127.0.0.1:port
	gone   chan struct{} // a /v1/hold answer's request ended (the client went away)
	added  atomic.Int64  // requests the upstream got with a header of Envoy's own (x-envoy-*)
}

func testHopByHop(t *testing.T, host Host) {
	p := newHopPod(t, host)
	run(t, "encoding named by Connection", p.testEncoding)
	run(t, "control encoding named by Connection", p.testControlEncoding)
	run(t, "gzip of two members and gzip twice", p.testGzipForms)
	run(t, "refusal with a body keeps the connection", p.testRefusalBody)
	run(t, "OPTIONS star", p.testOptionsStar)
	run(t, "ALPN quoting the peer", p.testALPN)
	run(t, "credential header twice", func(t *testing.T) { p.testDuplicateHeader(t, host) })
	run(t, "a stand-in anywhere else", func(t *testing.T) { p.testStandInElsewhere(t, host) })
	run(t, "an upstream that answers garbage", p.testGarbage)
	run(t, "a 302 passes as sent", p.testRedirect)
	run(t, "a bound target that refuses the dial", p.testUnreachable)
	run(t, "an upstream that resets after the request", p.testReset)
	run(t, "a client that aborts mid-answer", p.testAbort)
	run(t, "an upstream that resets mid-answer", p.testCut)
	run(t, "trailers scrubbed", func(t *testing.T) { p.testTrailers(t, host) })
	run(t, "no header of the host's own upstream", func(t *testing.T) {
		if n := p.added.Load(); n != 0 {
			t.Errorf("%d requests reached the upstream with an x-envoy-* header", n)
		}
	})
	run(t, "output", func(t *testing.T) {
		if err := p.run.Stop(); err != nil {
			t.Errorf("the host did not stop cleanly: %v", err)
		}
		forms := append(scrub.Forms([]byte(p.value)), scrub.Forms([]byte(p.token))...)
		for _, l := range p.run.out.Lines() {
			if strings.HasPrefix(l, "jr2.custodian") && !logLine.MatchString(l) {
				t.Errorf("not a line of the log contract: %q", l)
			}
			low := strings.ToLower(l)
			for _, bad := range []string{contract.StandInPrefix, "secret-path", "forged.example"} {
				if strings.Contains(low, bad) {
					t.Errorf("the output holds %q: %q", bad, l)
				}
			}
			for _, f := range forms {
				if strings.Contains(l, string(f)) {
					t.Errorf("the output holds a form of a value: %q", l)
				}
			}
		}
	})
}

func newHopPod(t *testing.T, host Host) *hopPod {
	tmp := t.TempDir()
	p := &hopPod{value: sentinel(t, hopName), token: sentinel(t, contract.TokenName), hits: make(chan string, 256), gone: make(chan struct{}, 4)}
	upCA := testpki.NewCA(t, "e2e hop upstream CA")
	p.target = serveTLS(t, upCA, "127.0.0.1", http.HandlerFunc(p.upstream))
	orch := serveLoopback(t, http.HandlerFunc(p.orchestrator))

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.down = l.Addr().String()
	l.Close() // nothing listens there now
	m := manifest{Pod: podName, Orchestrator: orch, Sandbox: podName,
		Secrets: []manifestSecret{
			{Name: hopName, Hosts: []string{p.target, p.down}, Headers: []string{"x-api-key"}, Paths: []string{keyPaths}},
			{Name: placesName, Hosts: []string{p.target}, Headers: []string{"x-places-key"}, Paths: []string{keyPaths}},
		}}
	dir, roots := renderLocalPod(t, tmp, host, m, upCA, map[string]string{hopName: p.value, placesName: sentinel(t, placesName), contract.TokenName: p.token})
	p.roots = roots
	p.run = host.Start(t, dir, "")
	return p
}

// renderLocalPod renders m (with --allow-local-targets) into tmp/pod for
// host, the values as files, upCA as the trust for the bound targets, and
// returns the directory and the pool that trusts the pod's leaves.
func renderLocalPod(t *testing.T, tmp string, host Host, m manifest, upCA *testpki.CA, values map[string]string) (string, *x509.CertPool) {
	valuesDir := filepath.Join(tmp, "values")
	mustMkdir(t, valuesDir)
	for name, v := range values {
		mustWrite(t, filepath.Join(valuesDir, name), v+"\n", 0o600)
	}
	mb, _ := json.Marshal(m)
	mustWrite(t, filepath.Join(tmp, "held.json"), string(mb), 0o644)
	upCA.WriteFile(t, tmp, "upstream-ca.pem")
	caDir := filepath.Join(tmp, "ca")
	runTool(t, bins.controlplane, "ca", "init", "--dir", caDir)
	dir := filepath.Join(tmp, "pod")
	args := []string{"render", "--manifest", filepath.Join(tmp, "held.json"), "--ca", caDir, "--out", dir,
		"--ca-bundle", filepath.Join(tmp, "upstream-ca.pem"), "--values-dir", valuesDir,
		"--harness-ca-dir", filepath.Join(dir, "ca"), "--allow-local-targets"}
	runTool(t, bins.controlplane, append(args, host.RenderArgs()...)...)
	pem, err := os.ReadFile(filepath.Join(dir, "ca", "extra.crt"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	return dir, roots
}

// serveLoopback serves h over plain HTTP on loopback and returns its
// address.
func serveLoopback(t *testing.T, h http.Handler) string {
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = quietLog()
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// bigText is the start of a /v1/big answer.
var bigText = strings.Repeat("0123456789abcdef", 2048) + " "

// upstream is the bound target: /v1/hop/<enc> answers the credential it
// got, encoded as enc (gzip truly, any other name not at all), with
// Connection naming Content-Encoding; anything else answers "ok" without
// reading the body.
func (p *hopPod) upstream(w http.ResponseWriter, r *http.Request) {
	select {
	case p.hits <- r.RequestURI:
	default: // the GC stress sends more than any case reads
	}
	for k := range r.Header {
		if strings.HasPrefix(strings.ToLower(k), "x-envoy") {
			p.added.Add(1)
		}
	}
	switch r.URL.Path {
	case "/v1/hold":
		// A first chunk (longer than the tail the scrubber holds back
		// across chunks), then nothing until the request ends.
		io.WriteString(w, strings.Repeat("first ", 700))
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
			p.gone <- struct{}{}
		case <-time.After(30 * time.Second):
		}
		return
	case "/v1/garbage":
		// Not HTTP: the request arrived whole, no answer can be read.
		if c, _, err := w.(http.Hijacker).Hijack(); err == nil {
			io.WriteString(c, "NOT HTTP "+r.Header.Get("X-Api-Key")+"\r\n\r\n") // the value, where an error may quote it
			c.Close()
		}
		return
	case "/v1/reset":
		// The request arrived whole; the connection ends with no answer.
		if c, _, err := w.(http.Hijacker).Hijack(); err == nil {
			c.(*tls.Conn).NetConn().(*net.TCPConn).SetLinger(0)
			c.Close()
		}
		return
	case "/v1/cut":
		// An answer begun (a chunk ending in the start of the value),
		// then the connection reset mid-body.
		io.WriteString(w, strings.Repeat("first ", 100)+p.value[:10])
		w.(http.Flusher).Flush()
		if c, _, err := w.(http.Hijacker).Hijack(); err == nil {
			c.(*tls.Conn).NetConn().(*net.TCPConn).SetLinger(0)
			c.Close()
		}
		return
	case "/v1/big":
		// 32 KiB the scrubber must pass through, then the key it got.
		io.WriteString(w, bigText+r.Header.Get("X-Api-Key"))
		return
	case "/v1/redirect":
		w.Header().Set("Location", "https://elsewhere.example/v1/next?x=1")
		w.WriteHeader(http.StatusFound)
		return
	case "/v1/members":
		// Gzip of two members, the key echoed in the
		// second (a server that gzips each flush anew writes this).
		w.Header().Set("Content-Encoding", "gzip")
		writeEncoded(w, "gzip", "first member, ")
		w.(http.Flusher).Flush()
		writeEncoded(w, "gzip", "second member: you sent "+r.Header.Get("X-Api-Key"))
		return
	case "/v1/gzipgzip":
		// Gzip applied twice.
		w.Header().Set("Content-Encoding", "gzip, gzip")
		var inner strings.Builder
		writeEncoded(&inner, "gzip", "you sent "+r.Header.Get("X-Api-Key"))
		writeEncoded(w, "gzip", inner.String())
		return
	case "/v1/trailers":
		// The key it got, echoed in a trailer: the answer's trailers are
		// scrubbed like its headers.
		w.Header().Set("Trailer", "X-Echo")
		io.WriteString(w, "body ")
		w.(http.Flusher).Flush()
		w.Header().Set("X-Echo", "got "+r.Header.Get("X-Api-Key"))
		return
	}
	enc, ok := strings.CutPrefix(r.URL.Path, "/v1/hop/")
	if !ok {
		io.WriteString(w, "ok")
		return
	}
	w.Header().Set("Connection", "content-encoding")
	w.Header().Set("Content-Encoding", enc)
	writeEncoded(w, enc, "you sent "+r.Header.Get("X-Api-Key"))
}

// orchestrator answers every request with the authorization it got,
// gzipped, with Connection naming Content-Encoding.
func (p *hopPod) orchestrator(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	w.Header().Set("Connection", "content-encoding")
	w.Header().Set("Content-Encoding", "gzip")
	writeEncoded(w, "gzip", "token "+r.Header.Get("Authorization"))
}

func writeEncoded(w io.Writer, enc, text string) {
	if enc != "gzip" {
		io.WriteString(w, text)
		return
	}
	zw := gzip.NewWriter(w)
	io.WriteString(zw, text)
	zw.Close()
}

// client is an agent's HTTPS client through the egress listener.
func (p *hopPod) client() *http.Client {
	pu, _ := url.Parse("http://" + p.run.Egress)
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		Proxy:              http.ProxyURL(pu),
		TLSClientConfig:    &tls.Config{RootCAs: p.roots},
		DisableCompression: true,
	}}
}

// answer is what do got.
type answer struct {
	status int
	body   []byte
	header http.Header
	reused bool // it went on a connection used before
	close  bool // it closed the connection after it
}

// do sends one request on c and returns its answer.
func do(t *testing.T, c *http.Client, method, u string, body io.Reader, hdr ...string) answer {
	t.Helper()
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	var reused bool
	req = req.WithContext(httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused },
	}))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("%s %s: the answer was cut: %v", method, u, err)
	}
	return answer{resp.StatusCode, b, resp.Header, reused, resp.Close}
}

// assertUnreadable fails t if b, read as is or un-gzipped, holds a form
// of value.
func assertUnreadable(t *testing.T, what string, b []byte, value string) {
	t.Helper()
	texts := [][]byte{b}
	if zr, err := gzip.NewReader(strings.NewReader(string(b))); err == nil {
		d, _ := io.ReadAll(zr)
		texts = append(texts, d)
	}
	for _, s := range texts {
		for _, f := range scrub.Forms([]byte(value)) {
			if strings.Contains(string(s), string(f)) {
				t.Fatalf("%s: a form of the value reached the agent: %q", what, b)
			}
		}
	}
}

func (p *hopPod) testEncoding(t *testing.T) {
	c := p.client()
	for _, tc := range []struct {
		enc    string
		status int
		body   string
	}{
		{"gzip", 200, "you sent [secret:" + hopName + "]"},
		{"br", 502, "jr2 custodian: " + p.target + " answered with content-encoding br, which the Custodian cannot read to scrub; the answer was not passed on"},
	} {
		a := do(t, c, "GET", "https://"+p.target+"/v1/hop/"+tc.enc, nil, "x-api-key", standIn(hopName))
		assertUnreadable(t, tc.enc, a.body, p.value)
		if a.status != tc.status || string(a.body) != tc.body || a.header.Get("Content-Encoding") != "" {
			t.Errorf("%s: %d %v %q, want %d %q", tc.enc, a.status, a.header, a.body, tc.status, tc.body)
		}
	}
}

// testGzipForms: a gzip body of two members
// reaches the agent whole and scrubbed (never only its first member, ended
// as if complete), and "gzip, gzip" is the 502 naming both, decided on the
// headers before any byte of the answer went out.
func (p *hopPod) testGzipForms(t *testing.T) {
	c := p.client()
	for _, tc := range []struct {
		path   string
		status int
		body   string
	}{
		{"/v1/members", 200, "first member, second member: you sent [secret:" + hopName + "]"},
		{"/v1/gzipgzip", 502, "jr2 custodian: " + p.target + " answered with content-encoding gzip, gzip, which the Custodian cannot read to scrub; the answer was not passed on"},
	} {
		a := do(t, c, "GET", "https://"+p.target+tc.path, nil, "x-api-key", standIn(hopName))
		assertUnreadable(t, tc.path, a.body, p.value)
		if a.status != tc.status || string(a.body) != tc.body || a.header.Get("Content-Encoding") != "" {
			t.Errorf("%s: %d %v %q, want %d %q", tc.path, a.status, a.header, a.body, tc.status, tc.body)
		}
	}
	drain(p.hits)
}

func (p *hopPod) testControlEncoding(t *testing.T) {
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableCompression: true}}
	a := do(t, c, "GET", "http://"+p.run.Control+"/agents/a1/surface", nil, "Authorization", "Bearer "+standIn(contract.TokenName))
	assertUnreadable(t, "control", a.body, p.token)
	if want := "token Bearer [secret:" + contract.TokenName + "]"; a.status != 200 || string(a.body) != want || a.header.Get("Content-Encoding") != "" {
		t.Errorf("control: %d %v %q, want 200 %q", a.status, a.header, a.body, want)
	}
}

func (p *hopPod) testRefusalBody(t *testing.T) {
	si := standIn(hopName)
	up := "https://" + p.target
	ctl := "http://" + p.run.Control
	tok := "Bearer " + standIn(contract.TokenName)
	for _, tc := range []struct {
		name, method, url string
		hdr               []string
		status            int
		next              string // a request answered on the same connection
		nextHdr           []string
	}{
		{"intercept 403 path", "POST", up + "/admin", []string{"x-api-key", si}, 403, up + "/v1/ok", []string{"x-api-key", si}},
		{"intercept 403 no stand-in", "POST", up + "/v1/x", []string{"x-api-key", "made-up"}, 403, up + "/v1/ok", []string{"x-api-key", si}},
		{"intercept 400 encoded", "POST", up + "/v1/a%2Fb", []string{"x-api-key", si}, 400, up + "/v1/ok", []string{"x-api-key", si}},
		{"control 404", "POST", ctl + "/admin", []string{"Authorization", tok}, 404, ctl + "/agents/a1/surface", []string{"Authorization", tok}},
		{"control 403", "POST", ctl + "/agents/a1/events", []string{"Authorization", "Bearer made-up"}, 403, ctl + "/agents/a1/surface", []string{"Authorization", tok}},
	} {
		for _, body := range []func() io.Reader{
			func() io.Reader { return strings.NewReader("0123456789") },
			func() io.Reader { return io.MultiReader(strings.NewReader("a chunked body")) },
		} {
			c := p.client() // https through the egress listener
			if strings.HasPrefix(tc.url, "http:") {
				c = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
			}
			do(t, c, "GET", tc.next, nil, tc.nextHdr...)
			a := do(t, c, tc.method, tc.url, body(), tc.hdr...)
			if a.status != tc.status || !strings.HasPrefix(string(a.body), "jr2 custodian: ") || !a.reused {
				t.Errorf("%s: %d %q (on the open connection: %v), want %d", tc.name, a.status, a.body, a.reused, tc.status)
			}
			// The next request is answered: on the same connection, or
			// on a new one when the refusal said it closes this one (Envoy
			// closes after a local reply to a request it did not read).
			if n := do(t, c, "GET", tc.next, nil, tc.nextHdr...); n.status != 200 || !n.reused && !a.close {
				t.Errorf("after %s: %d, reused %v, the refusal said close: %v: the connection was lost", tc.name, n.status, n.reused, a.close)
			}
			c.CloseIdleConnections()
		}
	}
}

// tlsThrough opens a CONNECT to target on the egress listener and returns
// the connection, ready for a ClientHello.
func (p *hopPod) tlsThrough(t *testing.T, target string) net.Conn {
	c, err := net.Dial("tcp", p.run.Egress)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT %s: %v %v", target, resp, err)
	}
	return &readerConn{Conn: c, r: br}
}

// readerConn reads through r: what was buffered past the CONNECT answer,
// then the connection.
type readerConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *readerConn) Read(b []byte) (int, error) { return c.r.Read(b) }

func (p *hopPod) testOptionsStar(t *testing.T) {
	drain(p.hits)
	tc := tls.Client(p.tlsThrough(t, p.target), &tls.Config{RootCAs: p.roots, ServerName: "127.0.0.1"})
	defer tc.Close()
	fmt.Fprintf(tc, "OPTIONS * HTTP/1.1\r\nHost: %s\r\nx-api-key: %s\r\nConnection: close\r\n\r\n", p.target, standIn(hopName))
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if want := "jr2 custodian: the request target must be a path that starts with /"; resp.StatusCode != 400 || string(b) != want {
		t.Errorf("OPTIONS *: %d %q, want 400 %q", resp.StatusCode, b, want)
	}
	if got := drain(p.hits); len(got) != 0 {
		t.Errorf("OPTIONS * reached the upstream: %q", got)
	}
}

// roundTrip sends one raw request on a connection opened for the bound
// target and returns the answer, body read.
func (p *hopPod) roundTrip(t *testing.T, raw string) (*http.Response, string) {
	t.Helper()
	return p.roundTripTo(t, p.target, raw)
}

// roundTripTo is roundTrip on a connection opened for target.
func (p *hopPod) roundTripTo(t *testing.T, target, raw string) (*http.Response, string) {
	t.Helper()
	tc := tls.Client(p.tlsThrough(t, target), &tls.Config{RootCAs: p.roots, ServerName: "127.0.0.1"})
	defer tc.Close()
	io.WriteString(tc, raw)
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("the body: %v", err)
	}
	return resp, string(b)
}

// testDuplicateHeader: rule 6 — a credential header sent twice is
// refused, and nothing reaches the upstream.
func (p *hopPod) testDuplicateHeader(t *testing.T, _ Host) {
	drain(p.hits)
	si := standIn(hopName)
	resp, body := p.roundTrip(t, fmt.Sprintf("GET /v1/x HTTP/1.1\r\nHost: %s\r\nx-api-key: %s\r\nx-api-key: %s\r\nConnection: close\r\n\r\n", p.target, si, si))
	want := "jr2 custodian: header x-api-key was sent more than once; send it once" // the secret's own spelling, in both hosts
	if resp.StatusCode != 400 || body != want {
		t.Errorf("x-api-key twice: %d %q, want 400 %q", resp.StatusCode, body, want)
	}
	if got := drain(p.hits); len(got) != 0 {
		t.Errorf("a refused request reached the upstream: %q", got)
	}
}

// testUnreachable: a bound target where nothing listens gets the 502 of
// a request that was not sent — the engine's text in custodian serve, the
// rendered mapper's in Envoy (its flag UF), the reason each host's own.
func (p *hopPod) testUnreachable(t *testing.T) {
	resp, b := p.roundTripTo(t, p.down, fmt.Sprintf("GET /v1/x HTTP/1.1\r\nHost: %s\r\nx-api-key: %s\r\nConnection: close\r\n\r\n", p.down, standIn(hopName)))
	if want := "jr2 custodian: " + p.down + " could not be reached: "; resp.StatusCode != 502 || !strings.HasPrefix(b, want) {
		t.Errorf("%d %q, want 502 %q…", resp.StatusCode, b, want)
	}
}

// testReset: an upstream that reads the request and resets the
// connection gets the 502 of a request that may have reached it.
func (p *hopPod) testReset(t *testing.T) {
	resp, body := p.roundTrip(t, fmt.Sprintf("GET /v1/reset HTTP/1.1\r\nHost: %s\r\nx-api-key: %s\r\nConnection: close\r\n\r\n", p.target, standIn(hopName)))
	if want := "jr2 custodian: " + p.target + " did not answer; the request may have reached it: "; resp.StatusCode != 502 || !strings.HasPrefix(body, want) {
		t.Errorf("%d %q, want 502 %q…", resp.StatusCode, body, want)
	}
	if got := drain(p.hits); len(got) == 0 {
		t.Error("the upstream never got the request")
	}
}

// testCut: an upstream that resets its connection mid-answer never looks
// like a complete answer to the agent (its read of the body fails), and
// the start of the value the scrubber held back is not passed on.
func (p *hopPod) testCut(t *testing.T) {
	tc := tls.Client(p.tlsThrough(t, p.target), &tls.Config{RootCAs: p.roots, ServerName: "127.0.0.1"})
	defer tc.Close()
	tc.SetDeadline(time.Now().Add(15 * time.Second))
	fmt.Fprintf(tc, "GET /v1/cut HTTP/1.1\r\nHost: %s\r\nx-api-key: %s\r\n\r\n", p.target, standIn(hopName))
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	if err == nil {
		t.Errorf("the agent read a whole answer (%d, %d bytes) from an upstream that reset mid-answer", resp.StatusCode, len(got))
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(strings.Repeat("first ", 100), string(got)) && !strings.HasPrefix(string(got), strings.Repeat("first ", 100)) {
		t.Errorf("%d, the agent read %d bytes that are not the answer's start", resp.StatusCode, len(got))
	}
	if strings.Contains(string(got), p.value[:10]) {
		t.Error("the start of the value the scrubber held back reached the agent")
	}
	drain(p.hits)
}

// testAbort: a client that goes away mid-answer ends the upstream's
// request too (its connection is closed or reset, not left to hang), and
// the host serves the next request.
func (p *hopPod) testAbort(t *testing.T) {
	tc := tls.Client(p.tlsThrough(t, p.target), &tls.Config{RootCAs: p.roots, ServerName: "127.0.0.1"})
	fmt.Fprintf(tc, "GET /v1/hold HTTP/1.1\r\nHost: %s\r\nx-api-key: %s\r\n\r\n", p.target, standIn(hopName))
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		t.Fatal(err)
	}
	first := make([]byte, 600)
	if _, err := io.ReadFull(resp.Body, first); err != nil || string(first) != strings.Repeat("first ", 100) {
		t.Fatalf("the first chunk: %q %v", first, err)
	}
	tc.Close() // the client goes away mid-answer
	select {
	case <-p.gone:
	case <-time.After(15 * time.Second):
		t.Fatal("the upstream's request did not end after the client went away")
	}
	if resp, body := p.roundTrip(t, fmt.Sprintf("GET /v1/x HTTP/1.1\r\nHost: %s\r\nx-api-key: %s\r\nConnection: close\r\n\r\n", p.target, standIn(hopName))); resp.StatusCode != 200 || body != "ok" {
		t.Errorf("the next request: %d %q", resp.StatusCode, body)
	}
	drain(p.hits)
}

// testStandInElsewhere: rule 10 — the stand-in in the path or in a header
// value it is not bound to is refused 403 naming the place, and nothing
// reaches the upstream.
func (p *hopPod) testStandInElsewhere(t *testing.T, _ Host) {
	si := standIn(hopName)
	for _, tc := range []struct {
		path, extra, place string
	}{
		{"/v1/" + si, "", "the path"},
		// (In a header name: this secret's name holds "_", so rule 2 answers first.)
		{"/v1/x", "x-note: " + si + "\r\n", "header x-note"}, // as the header came, in both hosts
	} {
		drain(p.hits)
		resp, body := p.roundTrip(t, fmt.Sprintf("GET %s HTTP/1.1\r\nHost: %s\r\nx-api-key: %s\r\n%sConnection: close\r\n\r\n", tc.path, p.target, si, tc.extra))
		want := "jr2 custodian: the stand-in of " + hopName + " is in " + tc.place + "; a stand-in rides only a header its secret is bound to, and is never sent upstream"
		if resp.StatusCode != 403 || body != want {
			t.Errorf("%s: %d %q, want 403 %q", tc.place, resp.StatusCode, body, want)
		}
		if got := drain(p.hits); len(got) != 0 {
			t.Errorf("%s: a refused request reached the upstream: %q", tc.place, got)
		}
	}
	// The one table every host runs, on the wire: each header name as
	// written here reaches the host's codec (Envoy lowercases it, Go's
	// server canonicalises it) before the engine folds its case.
	for _, c := range standintest.Cases(standIn(placesName), "/v1/") {
		drain(p.hits)
		extra := ""
		if c.Header.Name != "" {
			extra = c.Header.Name + ": " + c.Header.Value + "\r\n"
		}
		resp, body := p.roundTrip(t, fmt.Sprintf("GET %s HTTP/1.1\r\nHost: %s\r\nx-api-key: %s\r\n%sConnection: close\r\n\r\n", c.Path, p.target, si, extra))
		if want := standintest.Body(placesName, c.Place); resp.StatusCode != standintest.Status || body != want {
			t.Errorf("%s: %d %q, want %d %q", c.Name, resp.StatusCode, body, standintest.Status, want)
		}
		if got := drain(p.hits); len(got) != 0 {
			t.Errorf("%s: a refused request reached the upstream: %q", c.Name, got)
		}
	}
}

// testGarbage: an upstream that reads the request and answers something
// that is not HTTP gets the may-have-reached-it 502 (Envoy: its protocol
// error flag).
func (p *hopPod) testGarbage(t *testing.T) {
	resp, body := p.roundTrip(t, fmt.Sprintf("GET /v1/garbage HTTP/1.1\r\nHost: %s\r\nx-api-key: %s\r\nConnection: close\r\n\r\n", p.target, standIn(hopName)))
	if want := "jr2 custodian: " + p.target + " did not answer; the request may have reached it: "; resp.StatusCode != 502 || !strings.HasPrefix(body, want) {
		t.Errorf("%d %q, want 502 %q…", resp.StatusCode, redact(body, p.value), want)
	}
	for _, f := range scrub.Forms([]byte(p.value)) {
		if strings.Contains(body, string(f)) {
			t.Errorf("the 502 quotes the upstream's bytes with a form of the value: %q", redact(body, p.value))
		}
	}
	drain(p.hits)
}

// testRedirect: a 302 reaches the client with its Location as the
// upstream sent it (no host follows it, none rewrites it).
func (p *hopPod) testRedirect(t *testing.T) {
	resp, _ := p.roundTrip(t, fmt.Sprintf("GET /v1/redirect HTTP/1.1\r\nHost: %s\r\nx-api-key: %s\r\nConnection: close\r\n\r\n", p.target, standIn(hopName)))
	if loc := resp.Header.Get("Location"); resp.StatusCode != 302 || loc != "https://elsewhere.example/v1/next?x=1" {
		t.Errorf("302: %d Location %q", resp.StatusCode, loc)
	}
	if got := drain(p.hits); len(got) != 1 || got[0] != "/v1/redirect" {
		t.Errorf("the upstream got %q", got)
	}
}

// testTrailers: a trailer that echoes the value reaches the client with
// the value's label in its place, after the whole body (custodian serve);
// Envoy, whose HTTP/1 codec takes no trailers unless enable_trailers is
// on (it stays off: it would pass the agent's request trailers upstream
// unjudged), drops it (envoy/README.md). Neither passes the value.
func (p *hopPod) testTrailers(t *testing.T, host Host) {
	resp, body := p.roundTrip(t, fmt.Sprintf("GET /v1/trailers HTTP/1.1\r\nHost: %s\r\nx-api-key: %s\r\nTE: trailers\r\nConnection: close\r\n\r\n", p.target, standIn(hopName)))
	if resp.StatusCode != 200 || body != "body " {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	want := "got [secret:" + hopName + "]"
	if host.Name() == "envoy" {
		want = ""
	}
	if got := resp.Trailer.Get("X-Echo"); got != want {
		t.Errorf("the trailer is %q, want %q", redact(got, p.value), want)
	}
	drain(p.hits)
}

func (p *hopPod) testALPN(t *testing.T) {
	for _, protos := range [][]string{
		{standIn(hopName), "/v1/secret-path"},
		{"jr2.custodian action=tunnel target=forged.example:443"},
	} {
		tc := tls.Client(p.tlsThrough(t, p.target), &tls.Config{RootCAs: p.roots, ServerName: "127.0.0.1", NextProtos: protos})
		if err := tc.Handshake(); err == nil && tc.ConnectionState().NegotiatedProtocol != "" {
			t.Errorf("ALPN %q: negotiated %q", protos, tc.ConnectionState().NegotiatedProtocol)
		}
		tc.Close()
	}
}

// drain returns what ch holds now.
func drain(ch chan string) []string {
	var out []string
	for {
		select {
		case s := <-ch:
			out = append(out, s)
		default:
			return out
		}
	}
}
