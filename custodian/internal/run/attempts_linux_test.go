//go:build linux

package run

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"jr2.dev/boundary/custodian/internal/runtest"
	"jr2.dev/boundary/filter/scrub"
)

// strongValue is a fresh held value: 30 random alphanumerics (upper, lower
// and digits each present) whose standard base64 is alphanumeric too, so
// that the value, its hex and its base64 each make a valid DNS label.
func strongValue(t *testing.T) string {
	t.Helper()
	const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	for {
		b := make([]byte, 30)
		for i := range b {
			n, err := rand.Int(rand.Reader, big.NewInt(int64(len(alnum))))
			if err != nil {
				t.Fatal(err)
			}
			b[i] = alnum[n.Int64()]
		}
		v := string(b)
		if strings.ContainsAny(base64.StdEncoding.EncodeToString(b), "+/=") ||
			!strings.ContainsAny(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") || !strings.ContainsAny(v, "abcdefghijklmnopqrstuvwxyz") ||
			!strings.ContainsAny(v, "0123456789") {
			continue
		}
		return v
	}
}

// valueRun skips loudly where a contained run cannot be made, and returns
// the test binary (the contained child) and a fresh strong value.
func valueRun(t *testing.T) (self, value string) {
	t.Helper()
	requireRun(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return self, strongValue(t)
}

// valueForms are the spellings of v the contained child puts in a name,
// by the word that tells them apart in the records.
func valueForms(v string) map[string]string {
	return map[string]string{
		"plain": v,
		"hex":   hex.EncodeToString([]byte(v)),
		"b64":   base64.StdEncoding.EncodeToString([]byte(v)),
	}
}

// assertNoForm fails t when b holds a form of value: those of runtest in
// any letter case (a name is lowercased on its way), and every form the
// engine's scrubber knows, in any case.
func assertNoForm(t *testing.T, what string, b []byte, value string) {
	t.Helper()
	runtest.AssertNoValue(t, what, b, value)
	low := bytes.ToLower(b)
	for _, f := range runtest.Forms(value) {
		if bytes.Contains(low, bytes.ToLower([]byte(f))) {
			t.Errorf("%s holds the value (as %q, in some letter case)", what, f)
		}
	}
	sc, err := scrub.New([]scrub.Secret{{Name: "T", Value: []byte(value)}})
	if err != nil {
		t.Fatal(err)
	}
	if out := sc.Folded().Bytes(b); !bytes.Equal(out, b) {
		t.Errorf("%s holds a form of the value the scrubber knows", what)
	}
}

// TestAttemptsHoldingAValueAreRecorded: a contained child that read a held
// value (left in a file it may read) asks DNS for names holding its plain,
// hex and base64 forms, opens TLS with such a server name, sends plain HTTP
// with such a Host and asks the proxy to CONNECT to one. Each attempt is in
// the bundle with the label in place of the value and "scrubbed": true, and
// is denied; the run goes on to its end, the bundle verifies, and no byte
// of the bundle or of the output holds any form of the value.
func TestAttemptsHoldingAValueAreRecorded(t *testing.T) {
	self, value := valueRun(t)
	leaked := t.TempDir()
	valueFile := filepath.Join(leaked, "leaked.env")
	if err := os.WriteFile(valueFile, []byte(value), 0o644); err != nil {
		t.Fatal(err)
	}
	pol := writePolicy(t, []string{"api.example.com"}, []string{filepath.Dir(self), leaked}, nil,
		`EXAMPLE_TOKEN = { env = "EXAMPLE_TOKEN", hosts = ["api.example.com"] }`+"\n")
	res := contained(t, pol, nil, []string{"PATH=/usr/bin:/bin", "EXAMPLE_TOKEN=" + value, modeEnv + "=attempts",
		"PROBE_VALUE_FILE=" + valueFile}, self, "-test.run=^$")
	if res.code != 0 || res.err != nil {
		t.Fatalf("exit %d, %v\nstdout: %s\nstderr: %s", res.code, res.err, res.stdout, res.stderr)
	}
	var got map[string]string
	if err := json.Unmarshal([]byte(res.stdout), &got); err != nil {
		t.Fatalf("the child's report %q: %v", res.stdout, err)
	}
	label := "[secret:EXAMPLE_TOKEN]"
	for form := range valueForms(value) {
		name := label + "." + form + ".example"
		for _, c := range []struct{ key, want string }{
			{"dns-" + form, "rcode=5"},
			{"tls-" + form, "access denied"},
			{"host-" + form, "403"},
			{"proxy-" + form, "403"},
		} {
			if !strings.Contains(got[c.key], c.want) {
				t.Errorf("%s: the child saw %q, want %q", c.key, got[c.key], c.want)
			}
		}
		qs := runtest.Find(res.records, "dns-query", runtest.Rec{"name": name, "type": "A", "scrubbed": true})
		if len(qs) != 1 {
			t.Errorf("%s: %d scrubbed dns-query records, want 1", form, len(qs))
		} else if len(runtest.Find(res.records, "dns-decision", runtest.Rec{"query": qs[0]["seq"], "name": name, "rcode": "REFUSED", "scrubbed": true})) != 1 {
			t.Errorf("%s: no scrubbed dns-decision REFUSED for query %v", form, qs[0]["seq"])
		}
		for _, a := range []struct {
			via  string
			port int
		}{{"sni", 443}, {"host", 80}, {"proxy", 443}} {
			as := runtest.Find(res.records, "egress-attempt", runtest.Rec{"host": name, "port": a.port, "via": a.via, "scrubbed": true})
			if len(as) != 1 {
				t.Errorf("%s via %s: %d scrubbed egress-attempt records, want 1", form, a.via, len(as))
				continue
			}
			if len(runtest.Find(res.records, "egress-decision", runtest.Rec{"attempt": as[0]["seq"], "decision": "deny", "host": name,
				"rule": "value-in-name", "scrubbed": true})) != 1 {
				t.Errorf("%s via %s: no scrubbed egress-decision deny by value-in-name", form, a.via)
			}
		}
		if !strings.Contains(res.stderr, "jr2.custodian action=refuse target="+name+":443 reason=value-in-name") {
			t.Errorf("%s: no refuse line for the scrubbed name in stderr:\n%s", form, res.stderr)
		}
	}
	if got["done"] != "yes" {
		t.Errorf("the child did not reach its end: %v", got)
	}
	if n := len(runtest.Find(res.records, "run-end", runtest.Rec{"exit": 0})); n != 1 {
		t.Errorf("run-end with exit 0: %d records", n)
	}
	assertNoForm(t, "the bundle", res.raw, value)
	assertNoForm(t, "the child's output", []byte(res.stdout), value)
	assertNoForm(t, "the runner's output", []byte(res.stderr), value)
}

// TestArgvHoldingAValue: a command started with the value in its argv (as
// itself, its hex and its base64, alone and inside a word) runs: the child
// gets the stand-in in place of each form, the run-start record shows the
// label with "scrubbed": true, the run ends and verifies, and no byte of
// the bundle or of the output holds the value. A variable whose name holds
// the value is withheld from the child, not the reason the run ends.
func TestArgvHoldingAValue(t *testing.T) {
	self, value := valueRun(t)
	f := valueForms(value)
	pol := writePolicy(t, []string{"api.example.com"}, []string{filepath.Dir(self)}, nil,
		`EXAMPLE_TOKEN = { env = "EXAMPLE_TOKEN", hosts = ["api.example.com"] }`+"\n")
	args := []string{f["plain"], f["hex"], f["b64"], "--token=" + value, "Bearer " + value, "clean"}
	res := contained(t, pol, nil, []string{"PATH=/usr/bin:/bin", "EXAMPLE_TOKEN=" + value, modeEnv + "=argv", "X_" + f["hex"] + "=1"},
		append([]string{self, "-test.run=^$"}, args...)...)
	if res.code != 0 || res.err != nil {
		t.Fatalf("exit %d, %v\nstdout: %s\nstderr: %s", res.code, res.err, res.stdout, res.stderr)
	}
	standIn, label := "jr2-held-EXAMPLE_TOKEN", "[secret:EXAMPLE_TOKEN]"
	wantChild := []string{standIn, standIn, standIn, "--token=" + standIn, "Bearer " + standIn, "clean"}
	var child struct{ Argv, Env []string }
	if err := json.Unmarshal([]byte(res.stdout), &child); err != nil || fmt.Sprint(child.Argv) != fmt.Sprint(wantChild) {
		t.Errorf("the child's argv: %q (%v), want %q", res.stdout, err, wantChild)
	}
	if !strings.Contains(strings.Join(child.Env, "\n"), "EXAMPLE_TOKEN="+standIn) {
		t.Errorf("the child's environment lacks the stand-in: %q", child.Env)
	}
	wantRec := []string{self, "-test.run=^$", label, label, label, "--token=" + label, "Bearer " + label, "clean"}
	if rs := runtest.Find(res.records, "run-start", runtest.Rec{"scrubbed": true}); len(rs) != 1 || fmt.Sprint(rs[0]["argv"]) != fmt.Sprint(wantRec) {
		t.Errorf("run-start: %v, want argv %q and scrubbed", runtest.Find(res.records, "run-start", nil), wantRec)
	}
	if n := len(runtest.Find(res.records, "run-end", runtest.Rec{"exit": 0})); n != 1 {
		t.Errorf("run-end with exit 0: %d records", n)
	}
	assertNoForm(t, "the bundle", res.raw, value)
	assertNoForm(t, "the child's output", []byte(res.stdout), value)
	assertNoForm(t, "the runner's output", []byte(res.stderr), value)
}

// argvChild is the contained child of TestArgvHoldingAValue: it prints
// the arguments and the environment it was given.
func argvChild() int {
	json.NewEncoder(os.Stdout).Encode(map[string][]string{"argv": os.Args[2:], "env": os.Environ()})
	return 0
}

// attemptsChild is the contained child of TestAttemptsHoldingAValueAreRecorded:
// it reads the value from its file and makes each attempt, reporting what
// it saw as one JSON object.
func attemptsChild() int {
	raw, err := os.ReadFile(os.Getenv("PROBE_VALUE_FILE"))
	if err != nil {
		fmt.Println(`{"error":"no value file"}`)
		return 1
	}
	mediator := nameserver()
	r := map[string]string{}
	for form, v := range valueForms(string(raw)) {
		name := v + "." + form + ".example"
		r["dns-"+form] = dnsA(mediator, name)
		r["tls-"+form] = tlsDial(mediator, name)
		r["host-"+form] = httpStatus(mediator+":80", "GET / HTTP/1.1\r\nHost: "+name+"\r\nConnection: close\r\n\r\n")
		r["proxy-"+form] = httpStatus(mediator+":8080", "CONNECT "+name+":443 HTTP/1.1\r\nHost: "+name+":443\r\n\r\n")
	}
	r["done"] = "yes"
	json.NewEncoder(os.Stdout).Encode(r)
	return 0
}

// nameserver is the first nameserver of /etc/resolv.conf: the mediator.
func nameserver() string {
	b, _ := os.ReadFile("/etc/resolv.conf")
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "nameserver" {
			return f[1]
		}
	}
	return "127.0.0.1"
}

// dnsA asks server for the A record of name over UDP and reports the
// reply's rcode, or why there was none.
func dnsA(server, name string) string {
	msg := []byte{0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0}
	for _, l := range strings.Split(name, ".") {
		msg = append(msg, byte(len(l)))
		msg = append(msg, l...)
	}
	msg = append(msg, 0, 0, 1, 0, 1)
	c, err := net.Dial("udp", net.JoinHostPort(server, "53"))
	if err != nil {
		return "dial: " + err.Error()
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := c.Write(msg); err != nil {
		return "write: " + err.Error()
	}
	buf := make([]byte, 512)
	n, err := c.Read(buf)
	if err != nil {
		return "no reply"
	}
	if n < 12 || binary.BigEndian.Uint16(buf) != 0x1234 {
		return "bad reply"
	}
	return fmt.Sprintf("rcode=%d answers=%d", buf[3]&0xF, binary.BigEndian.Uint16(buf[6:]))
}

// tlsDial opens TLS to server:443 naming name, and reports the outcome.
func tlsDial(server, name string) string {
	d := &net.Dialer{Timeout: 3 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", net.JoinHostPort(server, "443"), &tls.Config{ServerName: name, InsecureSkipVerify: true})
	if err != nil {
		return err.Error()
	}
	c.Close()
	return "handshake completed"
}

// httpStatus writes req to addr and reports the answer's status line and
// body.
func httpStatus(addr, req string) string {
	c, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		return "dial: " + err.Error()
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		return "write: " + err.Error()
	}
	br := bufio.NewReader(c)
	status, err := br.ReadString('\n')
	if err != nil {
		return "no answer"
	}
	rest, _ := io.ReadAll(io.LimitReader(br, 4096))
	return strings.TrimSpace(status) + " " + string(rest)
}

// TestArgvTheGuardStillRefusesIsWithheld: a value holding `","` is whole
// in the JSON of an argv that splits it into two words, though neither word
// holds it; the bundle writer's guard refuses that line, and the run-start
// record is written with "[withheld]" for the argv instead of going
// missing. The run goes on, and the bundle verifies.
func TestArgvTheGuardStillRefusesIsWithheld(t *testing.T) {
	self, strong := valueRun(t)
	value := `x","` + strong
	pol := writePolicy(t, []string{"api.example.com"}, []string{filepath.Dir(self)}, nil,
		`EXAMPLE_TOKEN = { env = "EXAMPLE_TOKEN", hosts = ["api.example.com"] }`+"\n")
	res := contained(t, pol, nil, []string{"PATH=/usr/bin:/bin", "EXAMPLE_TOKEN=" + value, modeEnv + "=argv"},
		self, "-test.run=^$", "x", strong)
	if res.code != 0 || res.err != nil {
		t.Fatalf("exit %d, %v\nstdout: %s\nstderr: %s", res.code, res.err, res.stdout, res.stderr)
	}
	if rs := runtest.Find(res.records, "run-start", runtest.Rec{"scrubbed": true, "argv": []string{"[withheld]"}, "dir": "[withheld]"}); len(rs) != 1 {
		t.Errorf("run-start: %v; want the argv withheld", runtest.Find(res.records, "run-start", nil))
	}
	if n := len(runtest.Find(res.records, "run-end", runtest.Rec{"exit": 0})); n != 1 {
		t.Errorf("run-end with exit 0: %d records", n)
	}
	runtest.AssertNoValue(t, "the bundle", res.raw, value)
}
