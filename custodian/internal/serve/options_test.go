package serve

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"jr2.dev/boundary/internal/contract"
)

// rawPlain sends req over plain TCP to addr and returns the answer's
// status and body.
func rawPlain(t *testing.T, addr, req string) (int, string) {
	c, err := net.Dial("tcp", addr)
	must(t, err)
	defer c.Close()
	io.WriteString(c, req)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	must(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(b)
}

// net/http answers "OPTIONS *" 200 itself unless told
// not to. Every request on every listener is decided by the engine (or,
// on the health listener, by its one route): on an intercepted connection
// "*" is not a path (400, rule 4's sibling), and it never goes upstream.
func TestOptionsStarIsDecided(t *testing.T) {
	f := newFixture(t, nil)
	tok := "Bearer " + contract.StandIn(contract.TokenName)
	raw := f.rawTLS(t, f.up.target, "OPTIONS * HTTP/1.1\r\nHost: "+f.up.target+"\r\nx-api-key: "+keySI+"\r\nConnection: close\r\n\r\n")
	if !strings.HasPrefix(raw, "HTTP/1.1 400 ") || !strings.HasSuffix(raw, "\r\n\r\njr2 custodian: the request target must be a path that starts with /") {
		t.Errorf("intercepted OPTIONS *: %q", raw)
	}
	raw = f.rawTLS(t, f.up.target, "OPTIONS * HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n")
	if !strings.HasPrefix(raw, "HTTP/1.1 421 ") {
		t.Errorf("intercepted OPTIONS * with another Host: %q", raw)
	}
	if n := f.up.hits.Load(); n != 0 {
		t.Errorf("OPTIONS * reached the upstream %d times", n)
	}
	waitLog(t, f.log, "jr2.custodian action=refuse target="+f.up.target+" reason=path\n")
	for _, c := range []struct {
		name, addr string
		status     int
		prefix     string
	}{
		{"control", f.control, 404, "jr2 custodian: not a route of the control listener"},
		{"egress", f.egress, 405, "jr2 custodian: this listener takes CONNECT only"},
		{"health", f.health, 404, "not found"},
	} {
		st, body := rawPlain(t, c.addr, "OPTIONS * HTTP/1.1\r\nHost: x\r\nAuthorization: "+tok+"\r\nConnection: close\r\n\r\n")
		if st != c.status || !strings.HasPrefix(body, c.prefix) {
			t.Errorf("%s: OPTIONS *: %d %q, want %d %q…", c.name, st, body, c.status, c.prefix)
		}
	}
	select {
	case r := <-f.orchSeen:
		t.Fatalf("OPTIONS * reached the orchestrator: %s", r.RequestURI)
	default:
	}
}

// TestAddressInUseNamesTheFix: a second Custodian on a running one's
// addresses is refused, per listener, with the listener, the flag that
// moves it and that another Custodian may be running (net/http's "address
// already in use" names no flag).
func TestAddressInUseNamesTheFix(t *testing.T) {
	f := newFixture(t, nil)
	const holder = "; something else listens there (another custodian serve, or an Envoy run from a rendered envoy.json, may be running): stop it, or move this listener with "
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{Control: f.control}, "control listener: listen tcp " + f.control + ": bind: address already in use" + holder + "--control ADDR"},
		{Options{Egress: f.egress}, "egress listener: listen tcp " + f.egress + ": bind: address already in use" + holder + "--egress ADDR (and the clients' HTTPS_PROXY with it)"},
		{Options{Health: f.health}, "health listener: listen tcp " + f.health + ": bind: address already in use" + holder + "--health ADDR"},
	} {
		tc.o.ConfigPath, tc.o.Log = f.config, io.Discard
		srv, err := New(tc.o)
		if err == nil {
			srv.control.Close()
			srv.egress.Close()
			srv.health.Close()
			t.Errorf("a second Custodian on %+v started", tc.o)
			continue
		}
		if err.Error() != tc.want {
			t.Errorf("got  %v\nwant %s", err, tc.want)
		}
	}
}

// TestMissingValueNamesTheDirectory: a start without a held secret's value
// file names the secret and the directory it was looked for in, made
// absolute against custodian.json's directory (a relative one names
// nothing a reader can find).
func TestMissingValueNamesTheDirectory(t *testing.T) {
	f := newFixture(t, nil)
	dir := t.TempDir()
	b, err := os.ReadFile(f.config)
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, "custodian.json"), b, 0o644))
	must(t, os.Mkdir(filepath.Join(dir, "values"), 0o700))
	_, err = New(Options{ConfigPath: filepath.Join(dir, "custodian.json"), Log: io.Discard})
	want := "held secret KEY: no value file KEY in the value directory; mount the secret's value there (the value directory: " + filepath.Join(dir, "values") + ", custodian.json's valuesDir)"
	if err == nil || err.Error() != want {
		t.Errorf("got  %v\nwant %s", err, want)
	}
}
