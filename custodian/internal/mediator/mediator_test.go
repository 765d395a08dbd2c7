package mediator

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"jr2.dev/boundary/custodian/internal/broker"
	"jr2.dev/boundary/custodian/internal/dnsmsg"
	"jr2.dev/boundary/custodian/internal/policy"
	"jr2.dev/boundary/custodian/internal/runca"
	"jr2.dev/boundary/custodian/internal/runtest"
	"jr2.dev/boundary/filter/sigv4test"
	"jr2.dev/boundary/internal/bundle"
	"jr2.dev/boundary/internal/contract"
	"jr2.dev/boundary/internal/testkit/testpki"
	"jr2.dev/boundary/internal/testkit/wstest"
)

// sentinel is the held value: it must reach the upstream and appear in no
// record, log line or answer.
const sentinel = "sk-sentinel-mediator-0a1b2c3d4e5f"

const testPolicy = `
allow_hosts = ["api.example.com", "open.example.com", "plain.example.com:80"]
[secrets]
EXAMPLE_TOKEN = { env = "EXAMPLE_TOKEN", hosts = ["api.example.com"] }
`

// syncBuffer is a bytes.Buffer safe for the mediator's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}

// upstream is a test server that echoes what it got, value included: the
// mediator must scrub it on the way back.
type upstream struct {
	addr string
	mu   sync.Mutex
	got  []string    // "METHOD host path authorization"
	ws   wstest.Seen // what /ws received (wstest.Handler)
}

func (u *upstream) handler(w http.ResponseWriter, r *http.Request) {
	if strings.HasSuffix(r.Host, ".amazonaws.com") {
		awsHandler(w, r)
		return
	}
	if r.Host == tokenHost {
		tokenHandler(w, r)
		return
	}
	u.mu.Lock()
	u.got = append(u.got, r.Method+" "+r.Host+" "+r.URL.RequestURI()+" "+r.Header.Get("Authorization"))
	u.mu.Unlock()
	if r.URL.Path == "/ws" {
		wstest.Handler("Authorization", &u.ws)(w, r)
		return
	}
	if hopAnswer(w, r) {
		return
	}
	w.Header().Set("X-Echo", r.Header.Get("Authorization"))
	w.Header().Set("Content-Type", "text/plain")
	fmt.Fprintf(w, "auth=%s\n", r.Header.Get("Authorization"))
	w.(http.Flusher).Flush()
	fmt.Fprintf(w, "path=%s\n", r.URL.Path)
	if r.URL.Path == "/v1/parts" { // an upstream that echoes every part of the OAuth secret (kinds_test.go)
		fmt.Fprintf(w, "parts=%s\n", strings.Join(oauthSentinels, " "))
	}
}

func (u *upstream) received() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.got...)
}

func startUpstream(t *testing.T, leaf *testpki.Leaf) *upstream {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &upstream{addr: ln.Addr().String()}
	srv := &http.Server{Handler: http.HandlerFunc(u.handler)}
	if leaf != nil {
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{leaf.TLS}}
		go srv.ServeTLS(ln, "", "")
	} else {
		go srv.Serve(ln)
	}
	t.Cleanup(func() { srv.Close() })
	return u
}

type fixture struct {
	m        *Mediator
	bundle   *syncBuffer
	log      *syncBuffer
	tcp      string // a caught listener on the mediator's address, standing for 443
	plain    string // the same, standing for 80
	literal  string // a caught listener on another address: every dial to it is literal
	dns      string // UDP
	dnsTCP   string
	ca       *runca.CA
	tlsUp    *upstream
	plainUp  *upstream
	resolved []string
}

// newFixture serves a mediator on loopback; local lets it dial its
// loopback upstreams (the dial guard would refuse them).
func newFixture(t *testing.T, local bool) *fixture {
	t.Helper()
	return newFixtureOf(t, local, testPolicy, "EXAMPLE_TOKEN="+sentinel)
}

// newFixtureOf is newFixture under the policy text pol, its secrets' values
// in environ.
func newFixtureOf(t *testing.T, local bool, pol string, environ ...string) *fixture {
	t.Helper()
	p, err := policy.Parse([]byte(pol))
	if err != nil {
		t.Fatal(err)
	}
	br, err := broker.New(p, environ)
	if err != nil {
		t.Fatal(err)
	}
	upCA := testpki.NewCA(t, "upstream test CA")
	f := &fixture{bundle: &syncBuffer{}, log: &syncBuffer{}}
	f.tlsUp = startUpstream(t, upCA.Leaf(t, append([]string{"api.example.com", "open.example.com", tokenHost}, sigv4test.Hosts...)...))
	f.plainUp = startUpstream(t, nil)
	if f.ca, err = runca.New("jr2 run mediator test"); err != nil {
		t.Fatal(err)
	}
	w := bundle.New(f.bundle, bundle.Options{ContainsSecret: br.Contains})
	var rmu sync.Mutex
	f.m, err = New(Options{
		Policy: p, Broker: br, Record: w, CA: f.ca,
		Addr: netip.MustParseAddr("127.0.0.1"),
		Log:  f.log,
		Resolve: func(host string, port uint16) (string, error) {
			rmu.Lock()
			f.resolved = append(f.resolved, fmt.Sprintf("%s:%d", host, port))
			rmu.Unlock()
			if port == 80 {
				return f.plainUp.addr, nil
			}
			return f.tlsUp.addr, nil
		},
		Roots:            upCA.Pool(),
		HandshakeTimeout: 3 * time.Second,
		LocalUpstreams:   local,
	})
	if err != nil {
		t.Fatal(err)
	}
	listen := func(addr string) net.Listener {
		ln, err := net.Listen("tcp4", addr)
		if err != nil {
			t.Fatal(err)
		}
		return ln
	}
	tcp, plain, lit, dnsTCP := listen("127.0.0.1:0"), listen("127.0.0.1:0"), listen("127.0.0.2:0"), listen("127.0.0.1:0")
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.tcp, f.plain, f.literal, f.dns, f.dnsTCP = tcp.Addr().String(), plain.Addr().String(), lit.Addr().String(), pc.LocalAddr().String(), dnsTCP.Addr().String()
	f.m.Serve(Listeners{DNS: pc, DNSTCP: dnsTCP, TCP: []Caught{{tcp, 443}, {plain, 80}, {lit, 0}}})
	t.Cleanup(func() { f.m.Close() })
	return f
}

// client speaks to the mediator as a child would: through the proxy, or
// dialling the caught listener whatever the URL says (DNS answered the
// mediator), trusting only the run CA.
func (f *fixture) client(viaProxy bool) *http.Client {
	tr := &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: f.ca.Pool()},
		DisableKeepAlives: true,
	}
	if viaProxy {
		tr.Proxy = http.ProxyURL(&url.URL{Scheme: "http", Host: f.tcp})
	} else {
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			to := f.tcp
			if strings.HasSuffix(addr, ":80") {
				to = f.plain
			}
			return (&net.Dialer{}).DialContext(ctx, network, to)
		}
	}
	return &http.Client{Transport: tr, Timeout: 5 * time.Second}
}

func get(t *testing.T, c *http.Client, u string, header ...string) (int, string, http.Header, error) {
	t.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
			continue
		}
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header, nil
}

// records closes the mediator and parses the bundle, checking its chain.
func (f *fixture) records(t *testing.T) []runtest.Rec {
	t.Helper()
	f.m.Close()
	raw := f.bundle.Bytes()
	res, err := bundle.VerifyReader(bytes.NewReader(raw))
	if err != nil || res.Status != bundle.Truncated || res.Records == 0 {
		t.Errorf("verify: %v %v (an unsealed bundle whose records all chain is TRUNCATED)", res, err)
	}
	return runtest.Parse(raw)
}

// TestSecretNeverInTheRecord is written first: the upstream gets the
// value; the child's answer, the bundle and the log hold no form of it.
func TestSecretNeverInTheRecord(t *testing.T) {
	f := newFixture(t, true)
	for _, viaProxy := range []bool{true, false} {
		st, body, h, err := get(t, f.client(viaProxy), "https://api.example.com/v1/models?q=1", "Authorization", "Bearer jr2-held-EXAMPLE_TOKEN")
		if err != nil || st != 200 {
			t.Fatalf("proxy=%v: %d %v", viaProxy, st, err)
		}
		if want := "auth=Bearer [secret:EXAMPLE_TOKEN]\npath=/v1/models\n"; body != want {
			t.Errorf("proxy=%v: the child got %q, want %q", viaProxy, body, want)
		}
		if got := h.Get("X-Echo"); got != "Bearer [secret:EXAMPLE_TOKEN]" {
			t.Errorf("proxy=%v: X-Echo %q", viaProxy, got)
		}
	}
	got := f.tlsUp.received()
	want := "GET api.example.com /v1/models?q=1 Bearer " + sentinel
	if len(got) != 2 || got[0] != want || got[1] != want {
		t.Fatalf("the upstream received %q, want twice %q", got, want)
	}
	rs := f.records(t)
	raw := f.bundle.Bytes()
	runtest.AssertNoValue(t, "the bundle", raw, sentinel)
	runtest.AssertNoValue(t, "the log", f.logged(), sentinel)
	if bytes.Contains(f.logged(), []byte("jr2-held-")) || bytes.Contains(f.logged(), []byte("/v1/")) {
		t.Errorf("the log holds a stand-in or a path:\n%s", f.logged())
	}
	for _, via := range []string{"proxy", "sni"} {
		att := runtest.Find(rs, "egress-attempt", runtest.Rec{"host": "api.example.com", "port": 443, "via": via})
		if len(att) != 1 {
			t.Fatalf("egress-attempt via %s: %v", via, att)
		}
		if len(runtest.Find(rs, "egress-decision", runtest.Rec{"attempt": att[0]["seq"], "decision": "allow", "rule": "allow_hosts[0]"})) != 1 {
			t.Errorf("no allow decision for the attempt via %s", via)
		}
	}
	reqs := runtest.Find(rs, "http-request", runtest.Rec{"method": "GET", "url": "https://api.example.com/v1/models?q=1"})
	if len(reqs) != 2 {
		t.Fatalf("http-request records: %v", reqs)
	}
	hdrs := fmt.Sprint(reqs[0]["headers"])
	if !strings.Contains(hdrs, "[Authorization Bearer jr2-held-EXAMPLE_TOKEN]") || !strings.Contains(hdrs, "[Accept-Encoding identity]") {
		t.Errorf("the recorded request shows %s; want the stand-in, and identity encoding", hdrs)
	}
	if n := len(runtest.Find(rs, "secret-injected", runtest.Rec{"request": reqs[0]["seq"], "name": "EXAMPLE_TOKEN", "host": "api.example.com:443"})); n != 1 {
		t.Errorf("secret-injected records: %d", n)
	}
	resp := runtest.Find(rs, "http-response", runtest.Rec{"request": reqs[0]["seq"]})
	var body strings.Builder
	for _, r := range resp {
		if b, ok := r["body"].(string); ok {
			body.WriteString(b)
		}
	}
	if len(resp) < 4 || resp[0]["status"] != 200.0 || body.String() != "auth=Bearer [secret:EXAMPLE_TOKEN]\npath=/v1/models\n" || resp[len(resp)-1]["end"] != true {
		t.Errorf("http-response records: %v", resp)
	}
	if !bytes.Contains(f.logged(), []byte("jr2.custodian action=intercept target=api.example.com:443 secret=EXAMPLE_TOKEN method=GET status=200")) {
		t.Errorf("log:\n%s", f.logged())
	}
}

func TestDenials(t *testing.T) {
	f := newFixture(t, true)
	proxy, direct := f.client(true), f.client(false)

	// A host the policy does not allow: 403 through the proxy, an alert on
	// the SNI path.
	st, body, _, err := get(t, proxy, "https://evil.example/")
	if err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Errorf("CONNECT evil.example: %d %q %v", st, body, err)
	}
	_, _, _, err = get(t, direct, "https://evil.example/x")
	if err == nil || !strings.Contains(err.Error(), "access denied") {
		t.Errorf("SNI evil.example: %v; want the access_denied alert", err)
	}
	st, body, _, _ = get(t, direct, "http://evil.example/x")
	if st != 403 || !strings.HasPrefix(body, "jr2 custodian: evil.example:") {
		t.Errorf("Host evil.example: %d %q", st, body)
	}
	// An allowed host without a secret, over plain HTTP by Host: forwarded.
	st, body, _, _ = get(t, direct, "http://plain.example.com/p")
	if st != 200 || body != "auth=\npath=/p\n" {
		t.Errorf("plain.example.com: %d %q", st, body)
	}
	// The same host through the proxy with a stand-in in the query: refused.
	st, body, _, _ = get(t, proxy, "http://plain.example.com/p?t=jr2-held-EXAMPLE_TOKEN")
	if st != 403 || !strings.Contains(body, "the stand-in of EXAMPLE_TOKEN is in the query") {
		t.Errorf("stand-in toward an unbound host: %d %q", st, body)
	}
	// A bound host over plain HTTP: refused, values travel inside TLS only.
	st, body, _, _ = get(t, proxy, "http://api.example.com:443/", "Authorization", "Bearer jr2-held-EXAMPLE_TOKEN")
	if st != 403 || !strings.Contains(body, "only inside TLS") {
		t.Errorf("bound host over plain HTTP: %d %q", st, body)
	}
	// The engine's own rule on a bound host: no stand-in, no request; with
	// no credential header at all, rule 9's challenge (git waits for it).
	st, body, hdr, _ := get(t, proxy, "https://api.example.com/")
	if st != 401 || !strings.Contains(body, "needs the stand-in of EXAMPLE_TOKEN") || hdr.Get("Www-Authenticate") != `Basic realm="jr2 custodian"` {
		t.Errorf("no stand-in: %d %q %v", st, body, hdr)
	}
	// Domain fronting on an unbound host: SNI open.example.com, Host evil.
	st, body, _, _ = get(t, direct, "https://open.example.com/", "Host", "evil.example")
	if st != 421 {
		t.Errorf("Host evil.example on open.example.com: %d %q", st, body)
	}
	// Literal-IP dials: to another address, and an IP in the Host.
	c, err := net.Dial("tcp4", f.literal)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	answer, _ := io.ReadAll(c)
	c.Close()
	if !bytes.Contains(answer, []byte("403 Forbidden")) || !bytes.Contains(answer, []byte(literalReply)) {
		t.Errorf("literal dial: %q", answer)
	}
	st, _, _, _ = get(t, direct, "http://10.9.8.7/")
	if st != 403 {
		t.Errorf("Host 10.9.8.7: %d", st)
	}

	rs := f.records(t)
	for _, tc := range []struct {
		attempt  runtest.Rec
		decision runtest.Rec
	}{
		{runtest.Rec{"host": "evil.example", "port": 443, "via": "proxy"}, runtest.Rec{"decision": "deny", "rule": "default-deny"}},
		{runtest.Rec{"host": "evil.example", "port": 443, "via": "sni"}, runtest.Rec{"decision": "deny", "rule": "default-deny"}},
		{runtest.Rec{"host": "evil.example", "via": "host"}, runtest.Rec{"decision": "deny", "rule": "default-deny"}},
		{runtest.Rec{"host": "plain.example.com", "port": 80, "via": "host"}, runtest.Rec{"decision": "allow", "rule": "allow_hosts[2]"}},
		{runtest.Rec{"host": "", "via": "ip", "addr": "127.0.0.2"}, runtest.Rec{"decision": "deny", "rule": "default-deny"}},
		{runtest.Rec{"host": "", "via": "ip", "addr": "10.9.8.7"}, runtest.Rec{"decision": "deny", "rule": "default-deny"}},
		{runtest.Rec{"host": "plain.example.com", "port": 80, "via": "proxy"}, runtest.Rec{"decision": "deny", "rule": "engine", "reason": "stand-in", "status": 403}},
		{runtest.Rec{"host": "api.example.com", "port": 443, "via": "proxy"}, runtest.Rec{"decision": "deny", "rule": "engine", "reason": "no-stand-in", "status": 401}},
		{runtest.Rec{"host": "api.example.com", "port": 443, "via": "proxy"}, runtest.Rec{"decision": "deny", "rule": "engine", "reason": "plaintext", "status": 403}},
		{runtest.Rec{"host": "open.example.com", "via": "sni"}, runtest.Rec{"decision": "deny", "rule": "engine", "reason": "host", "status": 421}},
	} {
		found := false
		for _, a := range runtest.Find(rs, "egress-attempt", tc.attempt) {
			want := runtest.Rec{"attempt": a["seq"]}
			for k, v := range tc.decision {
				want[k] = v
			}
			if len(runtest.Find(rs, "egress-decision", want)) == 1 {
				found = true
			}
		}
		if !found {
			t.Errorf("no attempt %v with decision %v", tc.attempt, tc.decision)
		}
	}
	if got := f.tlsUp.received(); len(got) != 0 {
		t.Errorf("a refused request reached the upstream: %q", got)
	}
	for _, want := range []string{"action=refuse target=evil.example:443 reason=default-deny", "action=refuse target=127.0.0.2:", "reason=no-stand-in"} {
		if !bytes.Contains(f.logged(), []byte(want)) {
			t.Errorf("log lacks %q:\n%s", want, f.logged())
		}
	}
}

// TestDialGuard: an allowed name that resolves to a guarded address
// (here loopback) is not dialled, bound or not; the refusal is recorded
// and the upstream gets nothing.
func TestDialGuard(t *testing.T) {
	f := newFixture(t, false)
	for _, tc := range []struct{ url, auth string }{
		{"https://api.example.com/", "Bearer jr2-held-EXAMPLE_TOKEN"},
		{"https://open.example.com/", ""},
		{"http://plain.example.com/", ""},
	} {
		st, body, _, err := get(t, f.client(true), tc.url, "Authorization", tc.auth)
		if err != nil || st != 502 || !strings.Contains(body, "could not be reached: dial: the address it resolved to is guarded") {
			t.Errorf("%s: %d %q %v", tc.url, st, body, err)
		}
	}
	if got := append(f.tlsUp.received(), f.plainUp.received()...); len(got) != 0 {
		t.Errorf("a guarded upstream was reached: %q", got)
	}
	rs := f.records(t)
	if n := len(runtest.Find(rs, "http-response", runtest.Rec{"status": 502, "local": true})); n != 3 {
		t.Errorf("%d local 502 records, want 3", n)
	}
	if n := bytes.Count(f.logged(), []byte("reason=guard")); n != 3 {
		t.Errorf("%d guard lines in the log:\n%s", n, f.logged())
	}
}

func TestDNS(t *testing.T) {
	f := newFixture(t, true)
	query := func(name string, typ uint16) []byte {
		b := []byte{0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0}
		for _, l := range strings.Split(name, ".") {
			b = append(b, byte(len(l)))
			b = append(b, l...)
		}
		b = append(b, 0)
		b = binary.BigEndian.AppendUint16(b, typ)
		return binary.BigEndian.AppendUint16(b, 1)
	}
	udp, err := net.Dial("udp4", f.dns)
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	udp.SetDeadline(time.Now().Add(3 * time.Second))
	buf := make([]byte, 512)
	for _, tc := range []struct {
		name  string
		typ   uint16
		rcode byte
		an    byte
	}{{"Evil.Example", dnsmsg.TypeA, 0, 1}, {"evil.example", dnsmsg.TypeAAAA, 0, 0}, {"bad!name", dnsmsg.TypeA, 5, 0}} {
		udp.Write(query(tc.name, tc.typ))
		n, err := udp.Read(buf)
		if err != nil || n < 12 || buf[3]&0xf != tc.rcode || buf[7] != tc.an {
			t.Errorf("%s: %x %v", tc.name, buf[:n], err)
		}
		if tc.an == 1 && !bytes.HasSuffix(buf[:n], []byte{127, 0, 0, 1}) {
			t.Errorf("%s: the answer is not the mediator's address: %x", tc.name, buf[:n])
		}
	}
	// DNS over TCP: the same, behind a length.
	c, err := net.Dial("tcp4", f.dnsTCP)
	if err != nil {
		t.Fatal(err)
	}
	q := query("api.example.com", dnsmsg.TypeA)
	c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(q))), q...))
	c.SetDeadline(time.Now().Add(3 * time.Second))
	var size [2]byte
	io.ReadFull(c, size[:])
	reply := make([]byte, binary.BigEndian.Uint16(size[:]))
	_, err = io.ReadFull(c, reply)
	c.Close()
	if err != nil || !bytes.HasSuffix(reply, []byte{127, 0, 0, 1}) {
		t.Errorf("TCP: %x %v", reply, err)
	}
	rs := f.records(t)
	for _, tc := range []struct{ q, d runtest.Rec }{
		{runtest.Rec{"name": "evil.example", "type": "A", "transport": "udp"}, runtest.Rec{"rcode": "NOERROR", "answer": "127.0.0.1"}},
		{runtest.Rec{"name": "evil.example", "type": "AAAA"}, runtest.Rec{"rcode": "NOERROR", "answer": nil}},
		{runtest.Rec{"name": "", "error": "invalid-name"}, runtest.Rec{"rcode": "REFUSED"}},
		{runtest.Rec{"name": "api.example.com", "transport": "tcp"}, runtest.Rec{"answer": "127.0.0.1"}},
	} {
		qs := runtest.Find(rs, "dns-query", tc.q)
		if len(qs) != 1 {
			t.Errorf("dns-query %v: %v", tc.q, qs)
			continue
		}
		tc.d["query"] = qs[0]["seq"]
		if len(runtest.Find(rs, "dns-decision", tc.d)) != 1 {
			t.Errorf("dns-decision %v missing", tc.d)
		}
	}
}

func TestAuthority(t *testing.T) {
	for _, tc := range []struct {
		in   string
		def  uint16
		host string
		port uint16
		ok   bool
	}{
		{"API.Example.com", 443, "api.example.com", 443, true},
		{"api.example.com.:8443", 443, "api.example.com", 8443, true},
		{"api.example.com:80", 443, "api.example.com", 80, true},
		{"10.1.2.3:443", 80, "", 443, false},
		{"[::1]:443", 80, "", 443, false},
		{"[::1]", 80, "", 80, false},
		{"x.com:0", 80, "", 80, false},
		{"x.com:08", 80, "", 80, false},
		{"x.com:65536", 80, "", 80, false},
		{"x.com:", 80, "", 80, false},
		{"", 80, "", 80, false},
		{"a b.com", 80, "", 80, false},
		{"evil.com\r\nX: y", 80, "", 80, false},
	} {
		h, p, ok := Authority(tc.in, tc.def)
		if h != tc.host || p != tc.port || ok != tc.ok {
			t.Errorf("Authority(%q, %d) = %q %d %v; want %q %d %v", tc.in, tc.def, h, p, ok, tc.host, tc.port, tc.ok)
		}
	}
}

// FuzzAuthority: whatever the child writes in a Host, a CONNECT or a URL,
// a host Authority accepts is a checked host name, and it never panics.
func FuzzAuthority(f *testing.F) {
	for _, s := range []string{"api.example.com", "API.example.com.:8443", "[::1]:443", "10.0.0.1", "x:0", "x:65535", "a..b", "é.com", ":80", "host:+1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h, p, ok := Authority(s, 443)
		if !ok {
			if h != "" {
				t.Fatalf("refused %q but returned host %q", s, h)
			}
			return
		}
		if contract.CheckName(h) != nil || p == 0 {
			t.Fatalf("accepted %q as %q:%d", s, h, p)
		}
	})
}

// fieldsRecorder keeps the fields of every record, for the fuzz target.
type fieldsRecorder struct {
	mu     sync.Mutex
	fields []any
}

func (r *fieldsRecorder) Append(kind string, fields any) (uint64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fields = append(r.fields, fields)
	return uint64(len(r.fields)), nil
}

func (r *fieldsRecorder) Sync() error { return nil }

// FuzzAnswerDNS: whatever message the child sends, the mediator never
// panics, and a name it records passed contract.CheckName.
func FuzzAnswerDNS(f *testing.F) {
	for _, s := range [][]byte{
		{0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, 3, 'a', 'p', 'i', 7, 'e', 'x', 'a', 'm', 'p', 'l', 'e', 0, 0, 1, 0, 1},
		{0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 0x0c, 0, 1, 0, 1},
		{0, 0, 0x80, 0, 0, 1, 0, 0, 0, 0, 0, 0},
		{1, 2},
	} {
		f.Add(s)
	}
	pol, err := policy.Parse([]byte(`allow_hosts = ["api.example.com"]`))
	if err != nil {
		f.Fatal(err)
	}
	br, err := broker.New(pol, nil)
	if err != nil {
		f.Fatal(err)
	}
	ca, err := runca.New("fuzz")
	if err != nil {
		f.Fatal(err)
	}
	rec := &fieldsRecorder{}
	m, err := New(Options{Policy: pol, Broker: br, Record: rec, CA: ca, Addr: netip.MustParseAddr("10.231.0.1")})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		rec.mu.Lock()
		rec.fields = nil
		rec.mu.Unlock()
		m.answerDNS(msg, "udp")
		for _, fl := range rec.fields {
			var name string
			switch r := fl.(type) {
			case dnsQuery:
				name = r.Name
			case dnsDecision:
				name = r.Name
			}
			if name != "" && contract.CheckName(name) != nil {
				t.Fatalf("recorded the name %q", name)
			}
		}
	})
}

// logged is what the mediator has logged so far, the lines its buffered
// log holds included.
func (f *fixture) logged() []byte {
	f.m.log.Flush()
	return f.log.Bytes()
}
