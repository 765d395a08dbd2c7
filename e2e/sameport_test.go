//go:build linux

package e2e

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"jr2.dev/boundary/internal/contract"
	"jr2.dev/boundary/internal/testkit/testpki"
)

// TestSamePort: two bound targets named by DNS names on one port, each
// bound by its own secret, as a pod whose targets are all on 443 has them.
// A client that used A's tunnel, whether it closed it or keeps it, gets
// B's value at B on B's tunnel and A's at A: no request is refused for
// naming the other target, and none crosses. New tunnels one after the
// other, one curl process fetching A then B then A, and a Go client with
// keep-alive, through both hosts.
func TestSamePort(t *testing.T) {
	for _, host := range hostsToRun(t) {
		t.Run(host.Name(), func(t *testing.T) { testSamePort(t, host) })
	}
}

// samePortUpstream serves both names on one listener (the leaf by SNI)
// and records, per request, the Host and the credential it got.
type samePortUpstream struct{ hits chan string } // Host, NUL, x-api-key

func (u *samePortUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.hits <- r.Host + "\x00" + r.Header.Get("x-api-key")
	io.WriteString(w, "ok "+r.Host)
}

func testSamePort(t *testing.T, host Host) {
	tmp := t.TempDir()
	ca := testpki.NewCA(t, "e2e same-port upstream CA")
	names := []string{"same-a.test", "same-b.test"}
	keys := []string{"SAME_A", "SAME_B"}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	u := &samePortUpstream{hits: make(chan string, 64)}
	srv := &http.Server{Handler: u, ErrorLog: quietLog(), ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{ca.Leaf(t, names[0]).TLS, ca.Leaf(t, names[1]).TLS}, NextProtos: []string{"http/1.1"}}}
	go srv.ServeTLS(l, "", "")
	t.Cleanup(func() { srv.Close() })
	values := map[string]string{contract.TokenName: sentinel(t, contract.TokenName)}
	m := manifest{Pod: podName, Orchestrator: serveLoopback(t, http.NotFoundHandler()), Sandbox: podName}
	targets := make([]string, 2)
	for i, name := range names {
		targets[i] = fmt.Sprintf("%s:%d", name, port)
		values[keys[i]] = sentinel(t, keys[i])
		m.Secrets = append(m.Secrets, manifestSecret{Name: keys[i], Hosts: []string{targets[i]}, Headers: []string{"x-api-key"}, Paths: []string{keyPaths}})
	}
	dir, roots := renderLocalPod(t, tmp, host, m, ca, values)
	hosts := filepath.Join(tmp, "hosts")
	mustWrite(t, hosts, "127.0.0.1 localhost\n127.0.0.1 "+names[0]+"\n127.0.0.1 "+names[1]+"\n", 0o644)
	p := &hopPod{run: host.Start(t, dir, hosts), roots: roots}

	// check: each answer in order is 200 from target i's upstream, which
	// got target i's value with Host target i, and nothing else arrived.
	check := func(t *testing.T, order []int, codes []int, bodies []string) {
		t.Helper()
		for n, i := range order {
			if codes[n] != 200 || bodies[n] != "ok "+targets[i] {
				t.Errorf("request %d, to %s: %d %q; want 200 %q", n, targets[i], codes[n], clipText(bodies[n]), "ok "+targets[i])
			}
		}
		got := drain(u.hits)
		if len(got) != len(order) {
			t.Errorf("the upstream got %d requests, want %d", len(got), len(order))
			return
		}
		for n, i := range order {
			h, v, _ := strings.Cut(got[n], "\x00")
			if h != targets[i] || v != values[keys[i]] {
				t.Errorf("request %d, to %s: the upstream got Host %s with its own value: %v", n, targets[i], h, v == values[keys[i]])
			}
		}
	}
	order := []int{0, 1, 0, 1}

	run(t, "new tunnels, each closed before the next", func(t *testing.T) {
		var codes []int
		var bodies []string
		for _, i := range order {
			tc := tls.Client(p.tlsThrough(t, targets[i]), &tls.Config{RootCAs: roots, ServerName: names[i]})
			fmt.Fprintf(tc, "GET /v1/x HTTP/1.1\r\nHost: %s\r\nx-api-key: %s\r\nConnection: close\r\n\r\n", targets[i], standIn(keys[i]))
			resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
			if err != nil {
				t.Fatalf("%s: no answer: %v", targets[i], err)
			}
			body, _ := io.ReadAll(resp.Body)
			tc.Close()
			codes, bodies = append(codes, resp.StatusCode), append(bodies, string(body))
		}
		check(t, order, codes, bodies)
	})

	run(t, "tunnels open side by side", func(t *testing.T) {
		var conns []*tls.Conn
		var codes []int
		var bodies []string
		for _, i := range order {
			tc := tls.Client(p.tlsThrough(t, targets[i]), &tls.Config{RootCAs: roots, ServerName: names[i]})
			defer tc.Close()
			conns = append(conns, tc)
			fmt.Fprintf(tc, "GET /v1/x HTTP/1.1\r\nHost: %s\r\nx-api-key: %s\r\n\r\n", targets[i], standIn(keys[i]))
			resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
			if err != nil {
				t.Fatalf("%s: no answer: %v", targets[i], err)
			}
			body, _ := io.ReadAll(resp.Body)
			codes, bodies = append(codes, resp.StatusCode), append(bodies, string(body))
		}
		check(t, order, codes, bodies)
	})

	run(t, "curl, one process", func(t *testing.T) {
		args := []string{"-sS", "--max-time", "30", "--proxy", "http://" + p.run.Egress, "--cacert", filepath.Join(dir, "ca", "extra.crt")}
		for n, i := range order {
			if n > 0 {
				args = append(args, "--next", "--proxy", "http://"+p.run.Egress, "--cacert", filepath.Join(dir, "ca", "extra.crt"))
			}
			args = append(args, "-H", "x-api-key: "+standIn(keys[i]), "-w", "\n", "https://"+targets[i]+"/v1/x")
		}
		out, err := exec.Command("curl", args...).Output()
		if err != nil {
			t.Fatalf("curl: %v (stdout %q)", err, clipText(string(out)))
		}
		bodies := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
		if len(bodies) != len(order) {
			t.Fatalf("curl printed %d answers, want %d: %q", len(bodies), len(order), clipText(string(out)))
		}
		codes := make([]int, len(order))
		for n := range codes {
			codes[n] = 200
			if !strings.HasPrefix(bodies[n], "ok ") {
				codes[n] = 0
			}
		}
		check(t, order, codes, bodies)
	})

	run(t, "Go client with keep-alive", func(t *testing.T) {
		pu, _ := url.Parse("http://" + p.run.Egress)
		tr := &http.Transport{Proxy: http.ProxyURL(pu), TLSClientConfig: &tls.Config{RootCAs: roots}}
		defer tr.CloseIdleConnections()
		c := &http.Client{Timeout: 10 * time.Second, Transport: tr}
		var codes []int
		var bodies []string
		for round := 0; round < 2; round++ {
			for _, i := range order {
				req, _ := http.NewRequest("GET", "https://"+targets[i]+"/v1/x", nil)
				req.Header.Set("x-api-key", standIn(keys[i]))
				resp, err := c.Do(req)
				if err != nil {
					t.Fatalf("%s: %v", targets[i], err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				codes, bodies = append(codes, resp.StatusCode), append(bodies, string(body))
			}
		}
		check(t, append(append([]int{}, order...), order...), codes, bodies)
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

// clipText keeps an answer short in a failure's line.
func clipText(s string) string {
	if len(s) > 120 {
		return s[:120] + "..."
	}
	return s
}
