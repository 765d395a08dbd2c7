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
	"jr2.dev/boundary/internal/testkit/capstest"
)

// childEnv makes the re-executed test binary the child that drops its
// capabilities: what it drops cannot be taken back in a process.
const childEnv = "JR2_CAPS_TEST_CHILD"

// keepEnv names the capability the child keeps ("" none).
const keepEnv = "JR2_CAPS_TEST_KEEP"

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "drop":
		os.Exit(child())
	case "executed":
		os.Exit(printStatus())
	}
	os.Exit(m.Run())
}

// child prints its status, drops, and executes itself to print the status
// a program it executes holds: what matters is what survives execve.
func child() int {
	runtime.LockOSThread()
	if code := printStatus(); code != 0 {
		return code
	}
	var keep []int
	if os.Getenv(keepEnv) != "" {
		keep = append(keep, unix.CAP_DAC_READ_SEARCH)
	}
	if err := caps.Drop(keep...); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	os.Setenv(childEnv, "executed") // os.Environ keeps the first of two
	env := os.Environ()
	err := unix.Exec(os.Args[0], os.Args, env)
	fmt.Fprintln(os.Stderr, err)
	return 2
}

func printStatus() int {
	st, err := capstest.Status(0)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	json.NewEncoder(os.Stdout).Encode(st)
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
	hex := func(cs ...int) string {
		var v uint64
		for _, c := range cs {
			v |= 1 << c
		}
		return fmt.Sprintf("%016x", v)
	}
	asNobody := func(ambient ...uintptr) *syscall.SysProcAttr {
		return &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}, AmbientCaps: ambient}
	}
	tests := []struct {
		name       string
		attr       *syscall.SysProcAttr
		keep       bool // keep CAP_DAC_READ_SEARCH
		uid        int
		wantBefore string // CapEff before Drop: the child did hold what it drops
		want       string // every set but the bounding one, after execve
		bounding   string // CapBnd after execve
	}{
		{"root", nil, false, 0, own["CapEff"], capstest.None, capstest.None},
		{"non-root", asNobody(), false, nobody, capstest.None, capstest.None, own["CapBnd"]},
		{"non-root with ambient CAP_SETPCAP and CAP_MKNOD", asNobody(unix.CAP_SETPCAP, unix.CAP_MKNOD), false,
			nobody, hex(unix.CAP_SETPCAP, unix.CAP_MKNOD), capstest.None, capstest.None},
		{"non-root with ambient CAP_MKNOD", asNobody(unix.CAP_MKNOD), false,
			nobody, hex(unix.CAP_MKNOD), capstest.None, own["CapBnd"]},
		{"root keeping CAP_DAC_READ_SEARCH", nil, true, 0, own["CapEff"],
			hex(unix.CAP_DAC_READ_SEARCH), hex(unix.CAP_DAC_READ_SEARCH)},
		{"non-root keeping CAP_DAC_READ_SEARCH", asNobody(unix.CAP_SETPCAP, unix.CAP_DAC_READ_SEARCH), true,
			nobody, hex(unix.CAP_SETPCAP, unix.CAP_DAC_READ_SEARCH), hex(unix.CAP_DAC_READ_SEARCH), hex(unix.CAP_DAC_READ_SEARCH)},
		{"non-root keeping what it does not hold", asNobody(), true, nobody, capstest.None, capstest.None, own["CapBnd"]},
	}
	bin := executable(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(bin, "-test.run=^$")
			cmd.Env = append(os.Environ(), childEnv+"=drop")
			if tt.keep {
				cmd.Env = append(cmd.Env, keepEnv+"=1")
			}
			cmd.SysProcAttr = tt.attr
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			if err := cmd.Run(); err != nil {
				t.Fatalf("child: %v: %s", err, errb.String())
			}
			var got []map[string]string
			dec := json.NewDecoder(&out)
			for {
				var st map[string]string
				if dec.Decode(&st) != nil {
					break
				}
				got = append(got, st)
			}
			if len(got) != 2 {
				t.Fatalf("child printed %d statuses, want 2 (before, and after execve)", len(got))
			}
			if got[0]["CapEff"] != tt.wantBefore {
				t.Fatalf("before Drop the child held CapEff %s, want %s: the case proves nothing", got[0]["CapEff"], tt.wantBefore)
			}
			want := capstest.Want(tt.uid, tt.bounding)
			for _, f := range []string{"CapInh", "CapPrm", "CapEff", "CapAmb"} {
				want[f] = tt.want
			}
			if d := capstest.Diff(got[1], want); d != "" {
				t.Errorf("after Drop and execve: %s", d)
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
