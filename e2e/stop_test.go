//go:build linux

package e2e

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"jr2.dev/boundary/internal/contract"
	"jr2.dev/boundary/internal/hostlimits"
	"jr2.dev/boundary/internal/testkit/testpki"
)

// TestStopAndLimits holds both hosts to one documented stop and one set
// of connection limits (docs/custodian.md "Limits and stop"; Envoy once
// cut every request in flight on SIGTERM and let a client hold a
// connection an hour), each on a pod of its own:
//
//   - connection limits: the egress listener holds EgressConnections and
//     closes the next one as it comes, the control listener its own
//     ControlConnections beside them (the agent's tunnels cannot shut the
//     Harness out of its Menu), and a closed connection frees its place;
//   - graceful stop: a POST whose body is half sent when SIGTERM comes is
//     answered whole, new connections are refused from then on, and the
//     process exits 0 within StopGrace (Envoy through custodian envoy, the
//     documented start command; Envoy alone exits at once and cuts it).
func TestStopAndLimits(t *testing.T) {
	for _, host := range hostsToRun(t) {
		t.Run(host.Name(), func(t *testing.T) {
			run(t, "connection limits", func(t *testing.T) { testConnectionLimits(t, host) })
			run(t, "graceful stop", func(t *testing.T) { testGracefulStop(t, host) })
		})
	}
}

// stopPod is a pod whose bound target reads a whole upload and answers
// its length; arrived gets a value when an upload's headers reach it.
type stopPod struct {
	hopPod
	arrived chan struct{}
	dir     string // the rendered directory
}

func newStopPod(t *testing.T, host Host) *stopPod {
	tmp := t.TempDir()
	p := &stopPod{arrived: make(chan struct{}, 4)}
	p.value, p.token = sentinel(t, hopName), sentinel(t, contract.TokenName)
	upCA := testpki.NewCA(t, "e2e stop upstream CA")
	p.target = serveTLS(t, upCA, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.arrived <- struct{}{}
		n, err := io.Copy(io.Discard, r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
		}
		fmt.Fprintf(w, "got %d bytes", n)
	}))
	orch := serveLoopback(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	m := manifest{Pod: podName, Orchestrator: orch, Sandbox: podName,
		Secrets: []manifestSecret{{Name: hopName, Hosts: []string{p.target}, Headers: []string{"x-api-key"}, Paths: []string{keyPaths}}}}
	dir, roots := renderLocalPod(t, tmp, host, m, upCA, map[string]string{hopName: p.value, contract.TokenName: p.token})
	p.roots, p.dir = roots, dir
	p.run = host.Start(t, dir, "")
	return p
}

// kept reports whether the host kept c (it answers a request on it) or
// closed it as it came (the read ends with no answer).
func kept(t *testing.T, c net.Conn) bool {
	t.Helper()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "GET /agents/a1/surface HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", standIn(contract.TokenName))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("the connection was neither answered nor closed: %v", err)
		}
		return false
	}
	resp.Body.Close()
	return true
}

func testConnectionLimits(t *testing.T, host Host) {
	p := newStopPod(t, host)
	dial := func(addr string) net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial %s: %v", addr, err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	egress := hostlimits.EgressConnections
	var held []net.Conn
	for range egress {
		held = append(held, dial(p.run.Egress))
	}
	// The one beyond the egress listener's own is closed as it comes (the
	// host accepts in the order the connections were made).
	if kept(t, dial(p.run.Egress)) {
		t.Fatalf("the egress listener kept connection %d; it holds %d", egress+1, egress)
	}
	// The control listener has its own beside them, and no more.
	for i := range hostlimits.ControlConnections {
		if !kept(t, dial(p.run.Control)) {
			t.Fatalf("the control listener closed connection %d of its %d", i+1, hostlimits.ControlConnections)
		}
	}
	if kept(t, dial(p.run.Control)) {
		t.Fatalf("the control listener kept connection %d; it holds %d", hostlimits.ControlConnections+1, hostlimits.ControlConnections)
	}
	// The egress listener's own were held all along: the last one made is
	// answered (its 405 for a GET).
	if !kept(t, held[egress-1]) {
		t.Fatalf("the egress listener closed one of its first %d connections", egress)
	}
	// A closed connection frees its place.
	held[0].Close()
	deadline := time.Now().Add(10 * time.Second)
	for !kept(t, dial(p.run.Egress)) {
		if time.Now().After(deadline) {
			t.Fatal("a closed egress connection did not free its place")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func testGracefulStop(t *testing.T, host Host) {
	p := newStopPod(t, host)
	const size = 1 << 20
	tc := tls.Client(p.tlsThrough(t, p.target), &tls.Config{RootCAs: p.roots, ServerName: "127.0.0.1"})
	defer tc.Close()
	tc.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(tc, "POST /v1/upload HTTP/1.1\r\nHost: %s\r\nx-api-key: %s\r\nContent-Length: %d\r\n\r\n", p.target, standIn(hopName), size)
	body := strings.Repeat("u", size)
	if _, err := io.WriteString(tc, body[:size/2]); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the upload never reached the upstream")
	}
	stopped := time.Now()
	p.run.cmd.Process.Signal(syscall.SIGTERM)
	// New connections are refused from the stop on, on every listener.
	for _, addr := range []string{p.run.Control, p.run.Egress} {
		for {
			c, err := net.DialTimeout("tcp", addr, 2*time.Second)
			if err != nil {
				break
			}
			c.Close()
			if time.Since(stopped) > hostlimits.StopGrace {
				t.Fatalf("%s still accepts connections %v after SIGTERM", addr, hostlimits.StopGrace)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// The upload in flight is finished and answered whole.
	if _, err := io.WriteString(tc, body[size/2:]); err != nil {
		t.Fatalf("the rest of the upload could not be sent after SIGTERM: %v", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		t.Fatalf("the upload in flight got no answer after SIGTERM: %v", err)
	}
	got, err := io.ReadAll(resp.Body)
	if want := fmt.Sprintf("got %d bytes", size); err != nil || resp.StatusCode != 200 || string(got) != want {
		t.Fatalf("the upload in flight: %d %q %v; want 200 %q", resp.StatusCode, got, err, want)
	}
	// The host exits 0 within the documented grace (and its own exit).
	select {
	case <-p.run.exited:
	case <-time.After(hostlimits.StopGrace + 5*time.Second):
		t.Fatalf("still running %v after SIGTERM", hostlimits.StopGrace+5*time.Second)
	}
	if p.run.exitErr != nil {
		t.Errorf("exit after SIGTERM: %v; want 0\n%s", p.run.exitErr, p.run.out.String())
	}
	// custodian envoy removes the admin socket Envoy leaves behind.
	if host.Name() == "envoy" {
		sock := adminSocketOf(t, p.dir)
		if _, err := os.Lstat(sock); !os.IsNotExist(err) {
			t.Errorf("the admin socket %s is left behind: %v", sock, err)
		}
	}
}

// adminSocketOf is the admin socket dir's envoy.json names (each render
// draws its own).
func adminSocketOf(t *testing.T, dir string) string {
	t.Helper()
	var js struct {
		Admin struct {
			Address struct {
				Pipe struct{ Path string }
			}
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "envoy.json"))
	if err == nil {
		err = json.Unmarshal(b, &js)
	}
	if err != nil || js.Admin.Address.Pipe.Path == "" {
		t.Fatalf("%s/envoy.json names no admin socket: %v", dir, err)
	}
	return js.Admin.Address.Pipe.Path
}
