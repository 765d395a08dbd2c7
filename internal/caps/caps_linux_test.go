//go:build linux

package caps_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"jr2.dev/boundary/internal/caps"
	"jr2.dev/boundary/internal/caps/capstest"
)

// childEnv makes the re-executed test binary the child that drops its
// capabilities: what it drops cannot be taken back in a process.
const childEnv = "JR2_CAPS_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(child())
	}
	os.Exit(m.Run())
}

// child prints its status before and after Drop, as JSON.
func child() int {
	runtime.LockOSThread()
	before, err := capstest.Status(0)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	dropErr := caps.Drop()
	after, err := capstest.Status(0)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if dropErr != nil {
		fmt.Fprintln(os.Stderr, dropErr)
		return 3
	}
	json.NewEncoder(os.Stdout).Encode([]map[string]string{before, after})
	return 0
}

// Drop, as root and as a non-root uid (with and without capabilities of
// its own in the ambient set), leaves every set empty and NO_NEW_PRIVS
// set; the bounding set is emptied whenever CAP_SETPCAP was permitted and
// kept, unusable, when it was not.
func TestDrop(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("SKIPPED, NOT PROVEN: the test starts children as other uids with capabilities (run as root)")
	}
	own, err := capstest.Status(0)
	if err != nil {
		t.Fatal(err)
	}
	const nobody = 65534
	tests := []struct {
		name       string
		attr       *syscall.SysProcAttr
		uid        int
		wantBefore string // CapEff before Drop: the child did hold what it drops
		bounding   string // CapBnd after
	}{
		{"root", nil, 0, own["CapEff"], capstest.None},
		{"non-root", &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}},
			nobody, capstest.None, own["CapBnd"]},
		{"non-root with ambient CAP_SETPCAP and CAP_MKNOD", &syscall.SysProcAttr{
			Credential:  &syscall.Credential{Uid: nobody, Gid: nobody},
			AmbientCaps: []uintptr{unix.CAP_SETPCAP, unix.CAP_MKNOD},
		}, nobody, fmt.Sprintf("%016x", 1<<unix.CAP_SETPCAP|1<<unix.CAP_MKNOD), capstest.None},
		{"non-root with ambient CAP_MKNOD", &syscall.SysProcAttr{
			Credential:  &syscall.Credential{Uid: nobody, Gid: nobody},
			AmbientCaps: []uintptr{unix.CAP_MKNOD},
		}, nobody, fmt.Sprintf("%016x", 1<<unix.CAP_MKNOD), own["CapBnd"]},
	}
	bin := executable(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(bin, "-test.run=^$")
			cmd.Env = append(os.Environ(), childEnv+"=1")
			cmd.SysProcAttr = tt.attr
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			if err := cmd.Run(); err != nil {
				t.Fatalf("child: %v: %s", err, errb.String())
			}
			var got []map[string]string
			if err := json.Unmarshal(out.Bytes(), &got); err != nil || len(got) != 2 {
				t.Fatalf("child printed %q: %v", out.String(), err)
			}
			if got[0]["CapEff"] != tt.wantBefore {
				t.Fatalf("before Drop the child held CapEff %s, want %s: the case proves nothing", got[0]["CapEff"], tt.wantBefore)
			}
			if d := capstest.Diff(got[1], capstest.Want(tt.uid, tt.bounding)); d != "" {
				t.Errorf("after Drop: %s", d)
			}
		})
	}
}

// executable is a copy of the test binary that any uid may execute (go
// test's own directory is root's alone); it goes when the test ends.
func executable(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "jr2-caps-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "caps.test")
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}
