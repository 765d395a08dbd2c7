package envoyrun

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"jr2.dev/boundary/internal/testkit/envoybin"
)

// The test binary runs as `custodian envoy` when this names its argv.
const envWrapper = "JR2_ENVOYRUN_TEST_WRAPPER"

func TestMain(m *testing.M) {
	if os.Getenv(envWrapper) == "1" {
		os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// TestStopDrainsOnlyItsOwnEnvoy: two Envoys on one machine whose renders
// name the same admin socket path, started in either order. Stopping
// `custodian envoy` never drains the other Envoy: its listener still
// answers after the stop.
//
//   - custodian envoy first, then another Envoy: the later one binds over
//     the path (Envoy unlinks what is there), so a drain sent to the path
//     would reach it; the peer check refuses, says so, and stops only its
//     own Envoy.
//   - another Envoy first: custodian envoy refuses to start, naming it.
func TestStopDrainsOnlyItsOwnEnvoy(t *testing.T) {
	bin := findEnvoy(t)
	dir := t.TempDir()
	sock := filepath.Join(dir, "admin.sock")

	t.Run("custodian envoy first", func(t *testing.T) {
		ours, ourPort := envoyConfig(t, dir, "ours", sock)
		w := startWrapper(t, bin, ours)
		waitServed(t, sock, w.child(t), ourPort)
		other, otherPort := envoyConfig(t, dir, "other", sock)
		o := startEnvoy(t, bin, other)
		waitServed(t, sock, o.Process.Pid, otherPort)

		w.cmd.Process.Signal(syscall.SIGTERM)
		code, stderr := w.wait(t)
		if code != 0 && code != 143 && code != -1 {
			t.Errorf("custodian envoy exited %d", code)
		}
		if !strings.Contains(stderr, "no drain: "+sock+" is served by process "+fmt.Sprint(o.Process.Pid)) || !strings.Contains(stderr, "another Envoy bound the same admin socket path") {
			t.Errorf("custodian envoy did not say why it did not drain:\n%s", stderr)
		}
		if !answers(otherPort) {
			t.Errorf("the other Envoy's listener stopped answering: its Envoy was drained")
		}
		if s := stat(t, sock, "listener_manager.listener_stopped"); s != "0" {
			t.Errorf("the other Envoy's listener_manager.listener_stopped is %s, want 0", s)
		}
		if _, err := os.Lstat(sock); err != nil {
			t.Errorf("the other Envoy's socket was removed: %v", err)
		}
		stopEnvoy(t, o)
	})

	t.Run("another Envoy first", func(t *testing.T) {
		os.Remove(sock)
		other, otherPort := envoyConfig(t, dir, "other", sock)
		o := startEnvoy(t, bin, other)
		waitServed(t, sock, o.Process.Pid, otherPort)
		ours, _ := envoyConfig(t, dir, "ours", sock)
		w := startWrapper(t, bin, ours)
		code, stderr := w.wait(t)
		if code != 1 || !strings.Contains(stderr, "is another running Envoy's; stop that one first") {
			t.Errorf("custodian envoy beside a running Envoy on its path: exit %d\n%s", code, stderr)
		}
		if !answers(otherPort) {
			t.Errorf("the other Envoy's listener stopped answering")
		}
		stopEnvoy(t, o)
	})
}

func findEnvoy(t *testing.T) string {
	bin, err := envoybin.Find()
	switch {
	case err == nil:
		return bin
	case err == envoybin.ErrNone && os.Getenv("JR2_E2E_HOST") == "serve":
		t.Skip("NOT RUN: custodian envoy against a real Envoy — " + err.Error() + " (JR2_E2E_HOST=serve)")
	}
	t.Fatal(err)
	return ""
}

// envoyConfig writes an Envoy config with its admin on sock and one
// listener on a free loopback port that answers 200.
func envoyConfig(t *testing.T, dir, name, sock string) (string, int) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cfg := map[string]any{
		"admin": map[string]any{"address": map[string]any{"pipe": map[string]any{"path": sock, "mode": 0o600}}},
		"static_resources": map[string]any{"listeners": []any{map[string]any{
			"name":    name,
			"address": map[string]any{"socket_address": map[string]any{"address": "127.0.0.1", "port_value": port}},
			"filter_chains": []any{map[string]any{"filters": []any{map[string]any{
				"name": "envoy.filters.network.http_connection_manager",
				"typed_config": map[string]any{
					"@type":        "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
					"stat_prefix":  name,
					"http_filters": []any{map[string]any{"name": "envoy.filters.http.router", "typed_config": map[string]any{"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}},
					"route_config": map[string]any{"virtual_hosts": []any{map[string]any{
						"name": "all", "domains": []any{"*"},
						"routes": []any{map[string]any{"match": map[string]any{"prefix": "/"}, "direct_response": map[string]any{"status": 200}}},
					}}},
				},
			}}}},
		}}},
	}
	b, _ := json.Marshal(cfg)
	path := filepath.Join(dir, name+".json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, port
}

func envoyArgs(bin, cfg string) []string {
	return []string{bin, "-c", cfg, "--concurrency", "1", "--disable-hot-restart", "--log-level", "error"}
}

func startEnvoy(t *testing.T, bin, cfg string) *exec.Cmd {
	a := envoyArgs(bin, cfg)
	cmd := exec.Command(a[0], a[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

func stopEnvoy(t *testing.T, cmd *exec.Cmd) {
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
}

type wrapper struct {
	cmd    *exec.Cmd
	stderr bytes.Buffer
	done   chan struct{}
}

// startWrapper runs this test binary as `custodian envoy -- ENVOY -c cfg`.
func startWrapper(t *testing.T, bin, cfg string) *wrapper {
	w := &wrapper{done: make(chan struct{})}
	w.cmd = exec.Command(os.Args[0], append([]string{"--"}, envoyArgs(bin, cfg)...)...)
	w.cmd.Env = append(os.Environ(), envWrapper+"=1")
	w.cmd.Stdout, w.cmd.Stderr = io.Discard, &w.stderr
	w.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { w.cmd.Wait(); close(w.done) }()
	t.Cleanup(func() { w.cmd.Process.Kill(); <-w.done })
	return w
}

func (w *wrapper) wait(t *testing.T) (int, string) {
	select {
	case <-w.done:
	case <-time.After(20 * time.Second):
		t.Fatalf("custodian envoy did not exit; stderr:\n%s", w.stderr.String())
	}
	return w.cmd.ProcessState.ExitCode(), w.stderr.String()
}

// child is the pid of the wrapper's Envoy (its one child; a child of any
// of its threads, so read from each process's stat).
func (w *wrapper) child(t *testing.T) int {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
			if err != nil {
				continue
			}
			// pid (comm) state ppid …; comm may hold spaces, so read after ')'.
			_, rest, ok := strings.Cut(string(b), ") ")
			var state string
			var pid, ppid int
			if ok {
				fmt.Sscan(e.Name(), &pid)
				fmt.Sscan(rest, &state, &ppid)
			}
			if ppid == w.cmd.Process.Pid {
				return pid
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("custodian envoy started no Envoy")
	return 0
}

// waitServed waits until sock is served by pid and its listener answers.
func waitServed(t *testing.T, sock string, pid, port int) {
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.Dial("unix", sock); err == nil {
			got, _ := peerPID(c)
			c.Close()
			if got == pid && answers(port) {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s is not served by pid %d with its listener up", sock, pid)
}

func answers(port int) bool {
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/", port))
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == 200
}

// stat reads one counter from the Envoy serving sock.
func stat(t *testing.T, sock, name string) string {
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Dial: func(_, _ string) (net.Conn, error) { return net.Dial("unix", sock) }}}
	resp, err := c.Get("http://admin/stats?filter=^" + name + "$")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	_, v, _ := strings.Cut(strings.TrimSpace(string(b)), ": ")
	return v
}
