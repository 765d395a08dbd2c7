//go:build linux

package landlock_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"jr2.dev/boundary/internal/landlock"
	"jr2.dev/boundary/internal/testkit/landlocktest"
)

// childEnv names the function a re-executed test binary runs instead of
// the tests: what Landlock and seccomp do cannot be undone in a process.
const childEnv = "JR2_LANDLOCK_TEST_CHILD"

var children = map[string]func() int{
	"probe-enosys":     func() int { return probeDenied(unix.ENOSYS) },
	"probe-eopnotsupp": func() int { return probeDenied(unix.EOPNOTSUPP) },
	"restrict":         restrictChild,
}

func TestMain(m *testing.M) {
	if name := os.Getenv(childEnv); name != "" {
		f, ok := children[name]
		if !ok {
			fmt.Fprintf(os.Stderr, "no child %q\n", name)
			os.Exit(2)
		}
		os.Exit(f())
	}
	os.Exit(m.Run())
}

// runChild re-executes the test binary as the child name with env added.
func runChild(t *testing.T, name string, env ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), childEnv+"="+name), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("child %s: %v", name, err)
	}
	return out.String(), errb.String(), cmd.ProcessState.ExitCode()
}

func TestConstantsMatchKernel(t *testing.T) {
	pairs := []struct {
		ours   landlock.Access
		kernel uint64
	}{
		{landlock.Execute, unix.LANDLOCK_ACCESS_FS_EXECUTE},
		{landlock.WriteFile, unix.LANDLOCK_ACCESS_FS_WRITE_FILE},
		{landlock.ReadFile, unix.LANDLOCK_ACCESS_FS_READ_FILE},
		{landlock.ReadDir, unix.LANDLOCK_ACCESS_FS_READ_DIR},
		{landlock.RemoveDir, unix.LANDLOCK_ACCESS_FS_REMOVE_DIR},
		{landlock.RemoveFile, unix.LANDLOCK_ACCESS_FS_REMOVE_FILE},
		{landlock.MakeChar, unix.LANDLOCK_ACCESS_FS_MAKE_CHAR},
		{landlock.MakeDir, unix.LANDLOCK_ACCESS_FS_MAKE_DIR},
		{landlock.MakeReg, unix.LANDLOCK_ACCESS_FS_MAKE_REG},
		{landlock.MakeSock, unix.LANDLOCK_ACCESS_FS_MAKE_SOCK},
		{landlock.MakeFifo, unix.LANDLOCK_ACCESS_FS_MAKE_FIFO},
		{landlock.MakeBlock, unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK},
		{landlock.MakeSym, unix.LANDLOCK_ACCESS_FS_MAKE_SYM},
		{landlock.Refer, unix.LANDLOCK_ACCESS_FS_REFER},
		{landlock.Truncate, unix.LANDLOCK_ACCESS_FS_TRUNCATE},
		{landlock.IoctlDev, unix.LANDLOCK_ACCESS_FS_IOCTL_DEV},
		{landlock.ResolveUnix, unix.LANDLOCK_ACCESS_FS_RESOLVE_UNIX},
		{landlock.Access(landlock.ScopeAbstractUnix), unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET},
		{landlock.Access(landlock.ScopeSignal), unix.LANDLOCK_SCOPE_SIGNAL},
	}
	for _, p := range pairs {
		if uint64(p.ours) != p.kernel {
			t.Errorf("%v = %#x, kernel %#x", p.ours, uint64(p.ours), p.kernel)
		}
	}
}

func TestProbe(t *testing.T) {
	abi := landlocktest.Require(t, 1)
	t.Logf("kernel Landlock ABI %d (table knows up to %d)", abi, landlock.LastABI())
	rs, err := landlock.NewRuleset(abi, landlock.ScopeSignal)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	if rs.Handled() != landlock.FS(abi) {
		t.Errorf("Handled = %v, want FS(%d) = %v", rs.Handled(), abi, landlock.FS(abi))
	}
	if _, err := landlock.NewRuleset(0, 0); err == nil {
		t.Error("NewRuleset(0) made a ruleset")
	}
}

// A failing probe, made real by a seccomp filter in a subprocess, gives
// the pinned reason with the node's name.
func TestProbeFailureReason(t *testing.T) {
	tests := []struct {
		child, want string
	}{
		{"probe-enosys", "landlock: unavailable on node node-a7 (ENOSYS: not supported by kernel or not enabled at boot time)\n"},
		{"probe-eopnotsupp", "landlock: unavailable on node node-a7 (EOPNOTSUPP: disabled at boot time)\n"},
	}
	for _, tt := range tests {
		t.Run(tt.child, func(t *testing.T) {
			out, errOut, code := runChild(t, tt.child, "NODE_NAME=node-a7")
			if code != 3 || out != tt.want {
				t.Fatalf("exit %d, stdout %q (stderr %q), want exit 3 and %q", code, out, errOut, tt.want)
			}
		})
	}
}

func probeDenied(errno syscall.Errno) int {
	if err := landlocktest.DenyLandlock(errno); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	_, err := landlock.Probe()
	if !errors.Is(err, errno) {
		fmt.Fprintf(os.Stderr, "probe answered %v, want %v\n", err, errno)
		return 2
	}
	fmt.Println(landlock.Unavailable(os.Getenv("NODE_NAME"), err))
	return 3
}

const sentinel = "SENTINEL-ll-7f3a9c"

// A restricted thread reads and executes what a ReadExec rule names,
// writes what a ReadWrite rule names, and nothing else; a program it
// executes inherits the domain.
func TestRestrictSelf(t *testing.T) {
	abi := landlocktest.Require(t, 1)
	root := t.TempDir()
	for _, d := range []string{"ro", "rw", "all", "denied"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite(t, filepath.Join(root, "ro", "f"), "ro-bytes")
	mustWrite(t, filepath.Join(root, "rw", "old"), "old-bytes")
	mustWrite(t, filepath.Join(root, "denied", "f"), sentinel)
	mustWrite(t, filepath.Join(root, "one-file"), "one-file-bytes")

	out, errOut, code := runChild(t, "restrict", "JR2_LL_ROOT="+root)
	if code != 0 {
		t.Fatalf("child exit %d: %s", code, errOut)
	}
	want := []string{
		"read ro/f: ok ro-bytes",
		"read one-file: ok one-file-bytes",
		"read denied/f: EACCES",
		"list denied: EACCES",
		"list ro: ok",
		"write ro/new: EACCES",
		"write rw/new: ok",
		"append one-file: EACCES",
		"remove rw/old: ok",
		"mkdir rw/d: ok",
		"mknod char rw/kmsg: EACCES",
		"mknod block rw/loop0: EACCES",
		"mknod char all/kmsg: EACCES",
		"mknod block all/loop0: EACCES",
		"mkfifo rw/fifo: ok",
		"exec cat denied/f: exit 1",
		"exec cat ro/f: exit 0 ro-bytes",
	}
	if abi >= 3 {
		want = append(want, "truncate ro/f: EACCES")
	}
	got := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("child saw:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if strings.Contains(out+errOut, sentinel) {
		t.Error("the denied file's bytes reached the child's output")
	}
}

func mustWrite(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func restrictChild() int {
	runtime.LockOSThread()
	root := os.Getenv("JR2_LL_ROOT")
	p := func(rel string) string { return filepath.Join(root, rel) }
	abi, err := landlock.Probe()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	rs, err := landlock.NewRuleset(abi, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	rules := []struct {
		path string
		a    landlock.Access
	}{
		{"/usr", landlock.ReadExec},
		{"/bin", landlock.ReadExec}, // a link to usr/bin on merged-/usr systems: followed
		{"/lib", landlock.ReadExec},
		{"/lib64", landlock.ReadExec},
		{"/etc", landlock.ReadExec},
		{"/dev/null", landlock.ReadWrite}, // os/exec opens it for a nil Stdin
		{p("ro"), landlock.ReadExec},
		{p("rw"), landlock.ReadWrite},
		{p("all"), landlock.FS(abi)},                              // every right asked: making a device is stripped
		{p("one-file"), landlock.ReadWrite &^ landlock.WriteFile}, // a file: masked to FileRights
	}
	for _, r := range rules {
		if _, err := os.Lstat(r.path); err != nil {
			continue
		}
		granted, err := rs.AddPath(r.path, r.a)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		if granted&landlock.MakeDevice != 0 {
			fmt.Fprintf(os.Stderr, "the rule on %s granted %v\n", r.path, granted&landlock.MakeDevice)
			return 2
		}
	}
	if err := rs.RestrictSelf(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	rs.Close()
	result := func(name string, err error, extra string) {
		if err != nil {
			var errno syscall.Errno
			if errors.As(err, &errno) {
				fmt.Printf("%s: %s\n", name, unix.ErrnoName(errno))
				return
			}
			fmt.Printf("%s: %v\n", name, err)
			return
		}
		fmt.Printf("%s: ok%s\n", name, extra)
	}
	b, err := os.ReadFile(p("ro/f"))
	result("read ro/f", err, " "+string(b))
	b, err = os.ReadFile(p("one-file"))
	result("read one-file", err, " "+string(b))
	b, err = os.ReadFile(p("denied/f"))
	result("read denied/f", err, string(b))
	_, err = os.ReadDir(p("denied"))
	result("list denied", err, "")
	_, err = os.ReadDir(p("ro"))
	result("list ro", err, "")
	result("write ro/new", os.WriteFile(p("ro/new"), []byte("x"), 0o644), "")
	result("write rw/new", os.WriteFile(p("rw/new"), []byte("x"), 0o644), "")
	f, err := os.OpenFile(p("one-file"), os.O_WRONLY|os.O_APPEND, 0)
	if err == nil {
		f.Close()
	}
	result("append one-file", err, "")
	result("remove rw/old", os.Remove(p("rw/old")), "")
	result("mkdir rw/d", os.Mkdir(p("rw/d"), 0o755), "")
	// As root with CAP_MKNOD: only Landlock can refuse (EACCES; the
	// missing capability would be EPERM).
	for _, dir := range []string{"rw", "all"} {
		result("mknod char "+dir+"/kmsg", unix.Mknod(p(dir+"/kmsg"), unix.S_IFCHR|0o600, int(unix.Mkdev(1, 11))), "")
		result("mknod block "+dir+"/loop0", unix.Mknod(p(dir+"/loop0"), unix.S_IFBLK|0o600, int(unix.Mkdev(7, 0))), "")
	}
	result("mkfifo rw/fifo", unix.Mkfifo(p("rw/fifo"), 0o600), "")
	for _, target := range []string{"denied/f", "ro/f"} {
		cmd := exec.Command("/bin/sh", "-c", "exec cat \"$1\"", "sh", p(target))
		out, err := cmd.Output()
		if cmd.ProcessState == nil {
			fmt.Printf("exec cat %s: %v\n", target, err)
			continue
		}
		extra := ""
		if len(out) > 0 {
			extra = " " + string(out)
		}
		fmt.Printf("exec cat %s: exit %d%s\n", target, cmd.ProcessState.ExitCode(), extra)
	}
	if abi >= 3 {
		result("truncate ro/f", os.Truncate(p("ro/f"), 0), "")
	}
	return 0
}
