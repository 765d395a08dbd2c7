//go:build linux

package e2e

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"jr2.dev/boundary/internal/contract"
	"jr2.dev/boundary/internal/testkit/testpki"
)

// TestCrossTarget: two bound targets named by DNS names, which Envoy
// serves from one intercept listener (the leaf picked by SNI, the route by
// the CONNECT's target). On a connection opened for A (CONNECT A, SNI A) a
// request whose Host names B gets the engine's Host refusal (421 naming
// A) and reaches neither upstream, whether it carries B's stand-in or A's;
// the same connection with Host A gets A's credential at A and nothing of
// B's. custodian serve, which keeps a listener per target, must answer the
// same.
func TestCrossTarget(t *testing.T) {
	for _, host := range hostsToRun(t) {
		t.Run(host.Name(), func(t *testing.T) { testCrossTarget(t, host) })
	}
}

// crossUpstream is a bound target that records the credential it got.
type crossUpstream struct {
	target string
	hits   chan string // x-api-key of each request
}

func (u *crossUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.hits <- r.Header.Get("x-api-key")
	io.WriteString(w, "ok")
}

func testCrossTarget(t *testing.T, host Host) {
	tmp := t.TempDir()
	ca := testpki.NewCA(t, "e2e cross-target upstream CA")
	names := []string{"cross-a.test", "cross-b.test"}
	keys := []string{"CROSS_A", "CROSS_B"}
	ups := make([]*crossUpstream, 2)
	values := map[string]string{contract.TokenName: sentinel(t, contract.TokenName)}
	m := manifest{Pod: podName, Orchestrator: serveLoopback(t, http.NotFoundHandler()), Sandbox: podName}
	for i, name := range names {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		u := &crossUpstream{target: fmt.Sprintf("%s:%d", name, l.Addr().(*net.TCPAddr).Port), hits: make(chan string, 16)}
		srv := &http.Server{Handler: u, ErrorLog: quietLog(), ReadHeaderTimeout: 10 * time.Second,
			TLSConfig: &tls.Config{Certificates: []tls.Certificate{ca.Leaf(t, name).TLS}, NextProtos: []string{"http/1.1"}}}
		go srv.ServeTLS(l, "", "")
		t.Cleanup(func() { srv.Close() })
		ups[i] = u
		values[keys[i]] = sentinel(t, keys[i])
		m.Secrets = append(m.Secrets, manifestSecret{Name: keys[i], Hosts: []string{u.target}, Headers: []string{"x-api-key"}, Paths: []string{keyPaths}})
	}
	dir, roots := renderLocalPod(t, tmp, host, m, ca, values)
	hosts := filepath.Join(tmp, "hosts")
	mustWrite(t, hosts, "127.0.0.1 localhost\n127.0.0.1 "+names[0]+"\n127.0.0.1 "+names[1]+"\n", 0o644)
	p := &hopPod{run: host.Start(t, dir, hosts)}
	a, b := ups[0], ups[1]

	// send writes one request on a connection opened for A with SNI A.
	send := func(t *testing.T, hostHeader, key string) (int, string) {
		tc := tls.Client(p.tlsThrough(t, a.target), &tls.Config{RootCAs: roots, ServerName: names[0]})
		defer tc.Close()
		fmt.Fprintf(tc, "GET /v1/x HTTP/1.1\r\nHost: %s\r\nx-api-key: %s\r\nConnection: close\r\n\r\n", hostHeader, standIn(key))
		resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	for _, key := range keys {
		run(t, "Host B, stand-in of "+key, func(t *testing.T) {
			code, body := send(t, b.target, key)
			if want := "jr2 custodian: the Host header must name " + a.target; code != 421 || !strings.HasPrefix(body, want) {
				t.Errorf("Host %s on a connection for %s: %d %q; want 421 %q", b.target, a.target, code, body, want)
			}
			if got := append(drain(a.hits), drain(b.hits)...); len(got) != 0 {
				t.Errorf("a Host mismatch reached an upstream %d times", len(got))
			}
		})
	}
	run(t, "Host A", func(t *testing.T) {
		code, body := send(t, a.target, keys[0])
		if code != 200 || body != "ok" {
			t.Errorf("Host %s: %d %q; want 200 ok", a.target, code, body)
		}
		if got := drain(a.hits); len(got) != 1 || got[0] != values[keys[0]] {
			t.Errorf("A got credentials %d (its own: %v); want its value once", len(got), len(got) == 1 && got[0] == values[keys[0]])
		}
		if got := drain(b.hits); len(got) != 0 {
			t.Errorf("B got %d requests", len(got))
		}
	})
	// SNI B on a connection opened for A: the connection stays A's. custodian
	// serve ends the handshake with A's leaf whatever the SNI; Envoy's one
	// intercept listener picks the leaf by SNI, so it shows B's
	// (envoy/README.md). Either way a Host naming B is refused (421), B's
	// stand-in is refused at A (403) and never swapped, A's stand-in gets
	// A's value at A, and nothing reaches B.
	run(t, "SNI B", func(t *testing.T) {
		for _, tc := range []struct {
			hostHeader, key string
			status          int
			aGets           string // what A's upstream gets, "" for no request
		}{
			{b.target, keys[1], 421, ""}, {a.target, keys[1], 403, ""}, {a.target, keys[0], 200, values[keys[0]]},
		} {
			conn := tls.Client(p.tlsThrough(t, a.target), &tls.Config{ServerName: names[1], InsecureSkipVerify: true})
			if err := conn.Handshake(); err != nil {
				t.Fatalf("SNI B on a connection for A: the handshake failed: %v", err)
			}
			leaf := conn.ConnectionState().PeerCertificates[0].DNSNames
			if host.Name() == "custodian serve" && (len(leaf) != 1 || leaf[0] != names[0]) {
				t.Errorf("custodian serve ended SNI B on A's connection with the leaf of %v, want A's", leaf)
			}
			fmt.Fprintf(conn, "GET /v1/x HTTP/1.1\r\nHost: %s\r\nx-api-key: %s\r\nConnection: close\r\n\r\n", tc.hostHeader, standIn(tc.key))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			conn.Close()
			if err != nil {
				t.Fatalf("SNI B, Host %s, stand-in of %s: no answer: %v", tc.hostHeader, tc.key, err)
			}
			if resp.StatusCode != tc.status {
				t.Errorf("SNI B, Host %s, stand-in of %s: %d, want %d", tc.hostHeader, tc.key, resp.StatusCode, tc.status)
			}
			got := drain(a.hits)
			if (tc.aGets == "" && len(got) != 0) || (tc.aGets != "" && (len(got) != 1 || got[0] != tc.aGets)) {
				t.Errorf("SNI B, Host %s, stand-in of %s: A got %d requests (its own value: %v)", tc.hostHeader, tc.key, len(got), len(got) == 1 && got[0] == values[keys[0]])
			}
			if got := drain(b.hits); len(got) != 0 {
				t.Errorf("SNI B on a connection for A reached B %d times", len(got))
			}
		}
	})
	run(t, "output", func(t *testing.T) {
		if err := p.run.Stop(); err != nil {
			t.Errorf("the host did not stop cleanly: %v", err)
		}
		for _, l := range p.run.out.Lines() {
			for _, v := range values {
				if strings.Contains(l, v) {
					t.Errorf("the output holds a value: %q", l)
				}
			}
		}
	})
}
