//go:build linux

package keep_test

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"jr2.dev/boundary/effector/internal/confine"
	"jr2.dev/boundary/effector/internal/keep"
	"jr2.dev/boundary/effector/internal/reap/reaptest"
	"jr2.dev/boundary/internal/testkit/landlocktest"
)

// mainEnv makes the re-executed test binary run keep.Main, as `effector
// keep` does.
const mainEnv = "JR2_KEEP_TEST_MAIN"

// confineEnv makes it run confine.Main, as `effector confine` does.
const confineEnv = "JR2_KEEP_TEST_CONFINE"

func TestMain(m *testing.M) {
	if os.Getenv(mainEnv) == "1" {
		os.Exit(keep.Main(os.Args[1:]))
	}
	if os.Getenv(confineEnv) == "1" {
		os.Exit(confine.Main(os.Args[1:]))
	}
	os.Exit(m.Run())
}

type run struct {
	cmd    *exec.Cmd
	report chan string
	stderr bytes.Buffer
}

// startKeeper starts the keeper as the Effector does: in a session of its
// own, with the report pipe's write end as descriptor 3.
func startKeeper(t *testing.T, env []string, args ...string) *run {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	k := &run{cmd: exec.Command(os.Args[0], args...), report: make(chan string, 1)}
	k.cmd.Env = append(append(os.Environ(), mainEnv+"=1"), env...)
	k.cmd.ExtraFiles = []*os.File{w}
	k.cmd.Stderr = &k.stderr
	k.cmd.WaitDelay = 5 * time.Second // a leaked daemon holding stderr must not hang the test
	k.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := k.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	go func() {
		b, _ := io.ReadAll(r)
		r.Close()
		k.report <- string(b)
	}()
	return k
}

// wait returns the keeper's exit code and report.
func (k *run) wait(t *testing.T) (int, string) {
	t.Helper()
	_ = k.cmd.Wait()
	select {
	case rep := <-k.report:
		return k.cmd.ProcessState.ExitCode(), rep
	case <-time.After(10 * time.Second):
		t.Fatal("the report pipe was not closed: a process still holds it")
		return 0, ""
	}
}

func sh(script string) []string {
	return []string{"--report-fd", "3", "--", "/bin/sh", "-c", script}
}

// The child leaves a setsid daemon and a double-forked grandchild and
// tries to forge its report; the keeper ends both, reports the child's own
// code, and nothing with the marker is left.
func TestKeeperEndsWhatTheChildLeft(t *testing.T) {
	marker := reaptest.Marker()
	reaptest.Cleanup(t, marker)
	dir := t.TempDir()
	script := `
setsid sh -c 'echo > "$1/daemon"; exec sleep ` + marker + `' sh "$D" &
(sh -c 'echo > "$1/grandchild"; exec sleep ` + marker + `' sh "$D" &)
while [ ! -e "$D/daemon" ] || [ ! -e "$D/grandchild" ]; do sleep 0.01; done
echo 'exited code=0' >&3 2>/dev/null && echo forged
exit 7`
	k := startKeeper(t, []string{"D=" + dir}, sh(script)...)
	code, rep := k.wait(t)
	if code != 7 || rep != "exited code=7\n" {
		t.Fatalf("keeper exit %d, report %q (stderr %q); want 7 and %q", code, rep, k.stderr.String(), "exited code=7\n")
	}
	for _, f := range []string{"daemon", "grandchild"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("the %s never started, the test proves nothing: %v", f, err)
		}
	}
	if pids := reaptest.Marked(marker); len(pids) != 0 {
		t.Errorf("processes the child left still run after the keeper reported: %v", pids)
	}
}

// A child a signal ends is reported by the signal's name.
func TestKeeperReportsTheSignal(t *testing.T) {
	tests := []struct {
		script, report string
		code           int
	}{
		{`kill -KILL $$`, "exited signal=SIGKILL\n", 137},
		{`kill -SEGV $$`, "exited signal=SIGSEGV\n", 139},
		{`exit 0`, "exited code=0\n", 0},
		{`exit 255`, "exited code=255\n", 255},
	}
	for _, tt := range tests {
		k := startKeeper(t, nil, sh(tt.script)...)
		code, rep := k.wait(t)
		if code != tt.code || rep != tt.report {
			t.Errorf("%s: keeper exit %d, report %q; want %d, %q (stderr %q)", tt.script, code, rep, tt.code, tt.report, k.stderr.String())
		}
	}
}

// SIGTERM to the keeper alone reaches the child's group; the keeper waits
// on, so a child that catches it gives its own code, and one that does not
// is reported as ended by SIGTERM.
func TestKeeperForwardsSIGTERM(t *testing.T) {
	tests := []struct {
		name, trap, report string
	}{
		{"caught", `trap 'exit 42' TERM`, "exited code=42\n"},
		{"default", ``, "exited signal=SIGTERM\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			script := tt.trap + `
echo > "$D/ready"
while :; do sleep 0.02; done`
			k := startKeeper(t, []string{"D=" + dir}, sh(script)...)
			waitFile(t, filepath.Join(dir, "ready"))
			if err := k.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			code, rep := k.wait(t)
			if rep != tt.report {
				t.Fatalf("report %q, want %q (keeper exit %d, stderr %q)", rep, tt.report, code, k.stderr.String())
			}
		})
	}
}

func waitFile(t *testing.T, path string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
	}
	t.Fatalf("%s never appeared", path)
}

// A keeper that cannot start the child says why, on the pipe and on
// stderr, and exits 126; wrong arguments name the fix and run nothing.
func TestKeeperRefuses(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		report string // "" when no report can be written
		stderr string
	}{
		{"no program", []string{"--report-fd", "3", "--"}, "", "no program after --"},
		{"no fd", []string{"--", "/bin/true"}, "", "--report-fd is required"},
		{"bad fd", []string{"--report-fd", "2", "--", "/bin/true"}, "", "want a descriptor number of 3 or more"},
		{"closed fd", []string{"--report-fd", "9", "--", "/bin/true"}, "", "--report-fd 9: bad file descriptor; pass an open pipe"},
		{"unknown flag", []string{"--report-fd", "3", "--x", "--", "/bin/true"}, "", `unknown argument "--x"`},
		{"no --", []string{"--report-fd", "3", "/bin/true"}, "", `unknown argument "/bin/true"`},
		{"missing program", []string{"--report-fd=3", "--", "/nonexistent/prog"}, "failed starting the child: fork/exec /nonexistent/prog: no such file or directory\n", "effector keep: starting the child"},
		{"not in PATH", []string{"--report-fd", "3", "--", "jr2-no-such-program"}, "failed exec: \"jr2-no-such-program\": executable file not found in $PATH\n", "executable file not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := startKeeper(t, nil, tt.args...)
			code, rep := k.wait(t)
			if code != 126 || rep != tt.report || !strings.Contains(k.stderr.String(), tt.stderr) {
				t.Errorf("exit %d, report %q, stderr %q; want 126, %q, stderr holding %q", code, rep, k.stderr.String(), tt.report, tt.stderr)
			}
		})
	}
}

// The chain the Effector runs: keep -- confine -- sh. The confined child
// cannot signal its keeper (Landlock's signal scope, ABI 6), the keeper
// still reaches the child with the SIGTERM it forwards, and the child's
// own code is reported.
func TestKeeperOverConfiner(t *testing.T) {
	abi := landlocktest.Require(t, 1)
	scratch := t.TempDir()
	script := `if kill -0 $PPID 2>/dev/null; then echo keeper-reached > "$S/reach"; else echo keeper-out-of-reach > "$S/reach"; fi
trap 'exit 9' TERM
echo > "$S/ready"
while :; do sleep 0.02; done`
	k := startKeeper(t, []string{"S=" + scratch}, "--report-fd", "3", "--",
		"/usr/bin/env", "-u", mainEnv, confineEnv+"=1", os.Args[0], "--scratch", scratch, "--", "/bin/sh", "-c", script)
	waitFile(t, filepath.Join(scratch, "ready"))
	if err := k.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code, rep := k.wait(t)
	if rep != "exited code=9\n" {
		t.Fatalf("report %q, want %q (keeper exit %d, stderr %q)", rep, "exited code=9\n", code, k.stderr.String())
	}
	reach, err := os.ReadFile(filepath.Join(scratch, "reach"))
	if err != nil {
		t.Fatal(err)
	}
	want := "keeper-reached\n"
	if abi >= 6 {
		want = "keeper-out-of-reach\n"
	}
	if string(reach) != want {
		t.Errorf("the confined child says %q, want %q (ABI %d)", reach, want, abi)
	}
}
