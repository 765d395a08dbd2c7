package envoyrun

import (
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestSumInFlight: the requests in flight are every connection manager's
// downstream_rq_active but the admin's and the health listener's.
func TestSumInFlight(t *testing.T) {
	stats := "http.admin.downstream_rq_active: 1\nhttp.control.downstream_rq_active: 2\nhttp.egress.downstream_rq_active: 3\n" +
		"http.health.downstream_rq_active: 4\nhttp.intercept.downstream_rq_active: 5\nlistener.admin.downstream_cx_active: 9\n"
	if n, err := SumInFlight(strings.NewReader(stats)); n != 10 || err != nil {
		t.Fatalf("%d, %v; want 10", n, err)
	}
	if _, err := SumInFlight(strings.NewReader("http.egress.downstream_rq_active: x\n")); err == nil {
		t.Fatal("a counter that is not a number was read")
	}
}

// TestArgs: the config is found in each spelling Envoy takes, and the
// drain flags are added only where the command does not set them.
func TestArgs(t *testing.T) {
	for _, args := range [][]string{{"-c", "e.json"}, {"--config-path", "e.json"}, {"--config-path=e.json", "--concurrency", "1"}} {
		if got := configPath(args); got != "e.json" {
			t.Errorf("%q: config %q", args, got)
		}
	}
	if got := withDrainFlags([]string{"-c", "e.json"}); !reflect.DeepEqual(got, []string{"-c", "e.json", "--drain-strategy", "immediate", "--drain-time-s", "10", "--disable-hot-restart"}) {
		t.Errorf("added %q", got)
	}
	for _, own := range [][]string{
		{"--drain-strategy", "gradual", "--drain-time-s=3", "--disable-hot-restart"},
		{"--drain-strategy", "gradual", "--drain-time-s=3", "--restart-epoch", "1"},
		{"--drain-strategy", "gradual", "--drain-time-s=3", "--base-id=7"},
	} {
		if got := withDrainFlags(own); !reflect.DeepEqual(got, own) {
			t.Errorf("overrode the command's own %q: %q", own, got)
		}
	}
}

// TestAdminSocketOf: the socket is read from envoy.json; one without it
// is refused, naming the file and the fix.
func TestAdminSocketOf(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if got, err := AdminSocketOf(write("ok.json", `{"admin":{"address":{"pipe":{"path":"/tmp/a.sock","mode":384}}}}`)); got != "/tmp/a.sock" || err != nil {
		t.Errorf("%q, %v", got, err)
	}
	old := write("old.json", `{"static_resources":{}}`)
	if _, err := AdminSocketOf(old); err == nil || !strings.Contains(err.Error(), old+" has no admin socket") || !strings.Contains(err.Error(), "render it again") {
		t.Errorf("envoy.json without admin: %v", err)
	}
	if _, err := AdminSocketOf(write("bad.json", "{")); err == nil || !strings.Contains(err.Error(), "is not JSON") {
		t.Errorf("not JSON: %v", err)
	}
}

// TestRemoveStale: a socket left behind is removed; a file that is not a
// socket is not touched.
func TestRemoveStale(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "a.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	if err := removeStale(sock); err == nil || !strings.Contains(err.Error(), "another running Envoy's") {
		t.Errorf("a live socket: %v", err)
	}
	l.Close()
	if err := removeStale(sock); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Errorf("the stale socket is still there: %v", err)
	}
	plain := filepath.Join(dir, "plain")
	os.WriteFile(plain, nil, 0o600)
	if err := removeStale(plain); err == nil || !strings.Contains(err.Error(), "is not a socket") {
		t.Errorf("a plain file: %v", err)
	}
	if err := removeStale(filepath.Join(dir, "none")); err != nil {
		t.Errorf("nothing there: %v", err)
	}
}
