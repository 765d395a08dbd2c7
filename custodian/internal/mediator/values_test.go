package mediator

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"jr2.dev/boundary/custodian/internal/broker"
	"jr2.dev/boundary/custodian/internal/dnsmsg"
	"jr2.dev/boundary/custodian/internal/policy"
	"jr2.dev/boundary/custodian/internal/runca"
	"jr2.dev/boundary/custodian/internal/runtest"
	"jr2.dev/boundary/filter/scrub"
	"jr2.dev/boundary/internal/bundle"
)

// strong is a held value of 30 random alphanumerics (upper, lower, digits)
// whose standard base64 is alphanumeric too: the value, its hex and its
// base64 each make one valid DNS label.
const strong = "Qm7Xw2Lp9Rt4Vz8Kc3Nb6Hs1Jd5Fg0"

// nameForms are the spellings of strong the tests put in a name, by the
// word that tells them apart.
var nameForms = []struct{ word, form string }{
	{"plain", strong},
	{"lower", strings.ToLower(strong)},
	{"hex", hex.EncodeToString([]byte(strong))},
	{"hexupper", strings.ToUpper(hex.EncodeToString([]byte(strong)))},
	{"b64", base64.StdEncoding.EncodeToString([]byte(strong))},
	{"b64url", base64.RawURLEncoding.EncodeToString([]byte(strong))},
}

// strongOptions are the Options of a mediator holding strong under
// testPolicy, on addr, recording to rec.
func strongOptions(t testing.TB, addr string, rec func(*broker.Broker) bundle.Recorder) Options {
	t.Helper()
	pol, err := policy.Parse([]byte(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	br, err := broker.New(pol, []string{"EXAMPLE_TOKEN=" + strong})
	if err != nil {
		t.Fatal(err)
	}
	ca, err := runca.New("jr2 run mediator values test")
	if err != nil {
		t.Fatal(err)
	}
	return Options{Policy: pol, Broker: br, Record: rec(br), CA: ca, Addr: netip.MustParseAddr(addr), HandshakeTimeout: 3 * time.Second}
}

// valueMediator serves a mediator holding strong on loopback: tcp stands
// for 443, plain for 80, dns is UDP. The bundle and the log are returned.
func valueMediator(t *testing.T) (m *Mediator, tcp, plain, dns string, rec, log *syncBuffer) {
	t.Helper()
	rec, log = &syncBuffer{}, &syncBuffer{}
	o := strongOptions(t, "127.0.0.1", func(br *broker.Broker) bundle.Recorder {
		return bundle.New(rec, bundle.Options{ContainsSecret: br.Contains})
	})
	o.Log = log
	m, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	var lns []net.Listener
	for range 2 {
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
	}
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m.Serve(Listeners{DNS: pc, TCP: []Caught{{lns[0], 443}, {lns[1], 80}}})
	t.Cleanup(func() { m.Close() })
	return m, lns[0].Addr().String(), lns[1].Addr().String(), pc.LocalAddr().String(), rec, log
}

// assertNoStrong fails t when b holds any form of strong, in any case.
func assertNoStrong(t *testing.T, what string, b []byte) {
	t.Helper()
	sc, err := scrub.New([]scrub.Secret{{Name: "T", Value: []byte(strong)}})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sc.Folded().Bytes(b), b) {
		t.Errorf("%s holds a form of the value: %q", what, b)
	}
	for _, f := range nameForms {
		if bytes.Contains(bytes.ToLower(b), []byte(strings.ToLower(f.form))) {
			t.Errorf("%s holds the value as %s", what, f.word)
		}
	}
}

// exchange writes req on a new connection to addr and returns what comes
// back: the answer's status and body.
func exchange(t *testing.T, addr, req string) string {
	t.Helper()
	c, err := net.Dial("tcp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	io.WriteString(c, req)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return "no answer: " + err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return "HTTP/1.1 " + resp.Status + " " + string(b)
}

// TestNamesHoldingAValue: a DNS question, a TLS server name, a Host, a
// CONNECT and a proxy URL whose name holds a form of a held value (plain,
// lowercased, hex in both cases, base64 in both alphabets) are each
// recorded with the label in place of the form and "scrubbed": true, and
// denied by value-in-name; no record, log line or answer holds the value.
// Before, the bundle writer refused the records (the attempt was missing)
// or, for a lowercased form the guard did not see, wrote the value.
func TestNamesHoldingAValue(t *testing.T) {
	m, tcp, plain, dns, rec, log := valueMediator(t)
	udp, err := net.Dial("udp4", dns)
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	var answers bytes.Buffer
	for _, f := range nameForms {
		name := f.form + "." + f.word + ".example"
		// DNS: REFUSED, the question echoed.
		q := []byte{0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0}
		for _, l := range strings.Split(name, ".") {
			q = append(append(q, byte(len(l))), l...)
		}
		q = append(q, 0, 0, 1, 0, 1)
		udp.SetDeadline(time.Now().Add(3 * time.Second))
		udp.Write(q)
		buf := make([]byte, 512)
		n, err := udp.Read(buf)
		if err != nil || n < 12 || buf[3]&0xf != dnsmsg.RcodeRefused || binary.BigEndian.Uint16(buf[6:]) != 0 {
			t.Errorf("%s: DNS answered %x, %v; want REFUSED", f.word, buf[:n], err)
		}
		// TLS: the access_denied alert.
		c, err := net.Dial("tcp4", tcp)
		if err != nil {
			t.Fatal(err)
		}
		tc := tls.Client(c, &tls.Config{ServerName: name, InsecureSkipVerify: true})
		c.SetDeadline(time.Now().Add(3 * time.Second))
		if err := tc.Handshake(); err == nil || !strings.Contains(err.Error(), "access denied") {
			t.Errorf("%s: TLS: %v; want access denied", f.word, err)
		}
		c.Close()
		for _, h := range []struct{ addr, req string }{
			{plain, "GET / HTTP/1.1\r\nHost: " + name + "\r\nConnection: close\r\n\r\n"},
			{tcp, "CONNECT " + name + ":443 HTTP/1.1\r\nHost: " + name + ":443\r\n\r\n"},
			{plain, "GET http://" + name + "/p HTTP/1.1\r\nHost: " + name + "\r\nConnection: close\r\n\r\n"},
		} {
			got := exchange(t, h.addr, h.req)
			if !strings.HasPrefix(got, "HTTP/1.1 403 ") || !strings.Contains(got, "its name holds a form of a held value") {
				t.Errorf("%s: %q: %q; want the 403 of value-in-name", f.word, strings.Fields(h.req)[0], got)
			}
			answers.WriteString(got)
		}
	}
	m.Close()
	raw := rec.Bytes()
	if v, err := bundle.VerifyReader(bytes.NewReader(raw)); err != nil || v.Status != bundle.Truncated {
		t.Errorf("verify: %v %v", v, err)
	}
	rs := runtest.Parse(raw)
	for _, f := range nameForms {
		name := "[secret:EXAMPLE_TOKEN]." + f.word + ".example"
		qs := runtest.Find(rs, "dns-query", runtest.Rec{"name": name, "scrubbed": true})
		if len(qs) != 1 || len(runtest.Find(rs, "dns-decision", runtest.Rec{"query": qs[0]["seq"], "name": name, "rcode": "REFUSED",
			"reason": ruleValueInName, "scrubbed": true})) != 1 {
			t.Errorf("%s: dns records %v", f.word, qs)
		}
		for _, a := range []struct {
			via  string
			port int
			n    int
		}{{viaSNI, 443, 1}, {viaHost, 80, 1}, {viaProxy, 443, 1}, {viaProxy, 80, 1}} {
			as := runtest.Find(rs, "egress-attempt", runtest.Rec{"host": name, "port": a.port, "via": a.via, "scrubbed": true})
			if len(as) != a.n {
				t.Errorf("%s via %s:%d: %d scrubbed attempts, want %d", f.word, a.via, a.port, len(as), a.n)
				continue
			}
			if len(runtest.Find(rs, "egress-decision", runtest.Rec{"attempt": as[0]["seq"], "decision": "deny", "host": name,
				"rule": ruleValueInName, "scrubbed": true})) != 1 {
				t.Errorf("%s via %s:%d: no scrubbed denial", f.word, a.via, a.port)
			}
		}
	}
	assertNoStrong(t, "the bundle", raw)
	assertNoStrong(t, "the log", log.Bytes())
	assertNoStrong(t, "the answers", answers.Bytes())
	if !strings.Contains(string(log.Bytes()), "target=[secret:EXAMPLE_TOKEN].hex.example:443 reason=value-in-name") {
		t.Errorf("log: %s", log.Bytes())
	}
}

// FuzzNamesHoldingAValue: whatever DNS message the child sends and
// whatever host it names, no record holds a form of a held value in any
// case, and a name that held one is marked scrubbed and refused.
func FuzzNamesHoldingAValue(f *testing.F) {
	for _, nf := range nameForms {
		f.Add(nf.form+".x.example", uint16(443))
		f.Add("a"+nf.form+"b.example", uint16(80))
	}
	f.Add("api.example.com", uint16(443))
	rec := &fieldsRecorder{}
	o := strongOptions(f, "10.231.0.1", func(*broker.Broker) bundle.Recorder { return rec })
	m, err := New(o)
	if err != nil {
		f.Fatal(err)
	}
	folded := o.Broker.Engine().Scrubber().Folded()
	f.Fuzz(func(t *testing.T, name string, port uint16) {
		rec.mu.Lock()
		rec.fields = nil
		rec.mu.Unlock()
		held := folded.String(name) != name
		q := []byte{0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0}
		for _, l := range strings.Split(name, ".") {
			if len(l) > 63 {
				l = l[:63]
			}
			q = append(append(q, byte(len(l))), l...)
		}
		q = append(q, 0, 0, 1, 0, 1)
		reply := m.answerDNS(q, "udp")
		if host, p, ok := Authority(name, port); ok {
			if ci, _ := m.admit(host, p, viaHost, "", ""); ci != nil && held {
				t.Fatalf("admitted a name holding a value")
			}
		}
		for _, fl := range rec.fields {
			line, _ := json.Marshal(fl)
			if folded.String(string(line)) != string(line) {
				t.Fatalf("a record holds a form of the value: %s", line)
			}
			switch r := fl.(type) {
			case dnsDecision:
				if r.Scrubbed && (r.Rcode != "REFUSED" || reply == nil || reply[3]&0xf != dnsmsg.RcodeRefused) {
					t.Fatalf("a scrubbed question was answered: %+v", r)
				}
			case egressDecision:
				if r.Scrubbed && (r.Decision != "deny" || r.Rule != ruleValueInName) {
					t.Fatalf("a scrubbed attempt was not denied: %+v", r)
				}
			}
		}
	})
}

// TestRequestHoldingAValue: on an allowed connection, a request whose url
// or headers hold a form of a held value the agent wrote itself (toward a
// host with no secret, and toward the bound host beside its stand-in) is
// recorded as http-request with the label in place of the form and
// "scrubbed": true, denied by value-in-request, and never sent. Before, the
// guard refused its record: the request went unrecorded (answered 502).
func TestRequestHoldingAValue(t *testing.T) {
	m, tcp, plain, _, rec, log := valueMediator(t)
	hexv := hex.EncodeToString([]byte(strong))
	b64 := base64.StdEncoding.EncodeToString([]byte(strong))
	cases := []struct {
		word, host, addr, path, header string
		tls                            bool
	}{
		{"path", "open.example.com", tcp, "/x/" + hexv, "", true},
		{"query", "plain.example.com", plain, "/q?k=" + b64, "", false},
		{"header", "open.example.com", tcp, "/h", "X-Note: " + strong, true},
		{"header-name", "plain.example.com", plain, "/n", "X-" + hexv + ": 1", false},
		{"bound", "api.example.com", tcp, "/b", "Authorization: Bearer jr2-held-EXAMPLE_TOKEN\r\nX-Leak: " + b64, true},
	}
	var answers bytes.Buffer
	for _, c := range cases {
		req := "GET " + c.path + " HTTP/1.1\r\nHost: " + c.host + "\r\nConnection: close\r\n"
		if c.header != "" {
			req += c.header + "\r\n"
		}
		req += "\r\n"
		conn, err := net.Dial("tcp4", c.addr)
		if err != nil {
			t.Fatal(err)
		}
		var rw net.Conn = conn
		if c.tls {
			rw = tls.Client(conn, &tls.Config{ServerName: c.host, InsecureSkipVerify: true})
		}
		rw.SetDeadline(time.Now().Add(3 * time.Second))
		io.WriteString(rw, req)
		resp, err := http.ReadResponse(bufio.NewReader(rw), nil)
		if err != nil {
			t.Errorf("%s: %v", c.word, err)
			conn.Close()
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		conn.Close()
		answers.Write(body)
		if resp.StatusCode != 403 || !strings.Contains(string(body), "holds a form of a held value") {
			t.Errorf("%s: %d %q; want the 403 of value-in-request", c.word, resp.StatusCode, body)
		}
	}
	m.Close()
	raw := rec.Bytes()
	rs := runtest.Parse(raw)
	if n := len(runtest.Find(rs, "http-request", runtest.Rec{"scrubbed": true})); n != len(cases) {
		t.Errorf("%d scrubbed http-request records, want %d", n, len(cases))
	}
	if n := len(runtest.Find(rs, "egress-decision", runtest.Rec{"decision": "deny", "rule": ruleValueInRequest, "scrubbed": true})); n != len(cases) {
		t.Errorf("%d denials by value-in-request, want %d", n, len(cases))
	}
	if n := len(runtest.Find(rs, "secret-injected", nil)); n != 0 {
		t.Errorf("%d secret-injected records: a request holding a value was sent", n)
	}
	if !bytes.Contains(raw, []byte(`"url":"https://open.example.com/x/[secret:EXAMPLE_TOKEN]"`)) ||
		!bytes.Contains(raw, []byte(`["X-[secret:EXAMPLE_TOKEN]","1"]`)) {
		t.Errorf("the records do not show the label in place of the form:\n%s", raw)
	}
	assertNoStrong(t, "the bundle", raw)
	assertNoStrong(t, "the log", log.Bytes())
	assertNoStrong(t, "the answers", answers.Bytes())
}
