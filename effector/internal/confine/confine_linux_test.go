//go:build linux

package confine_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"jr2.dev/boundary/effector/internal/confine"
	"jr2.dev/boundary/internal/landlock"
	"jr2.dev/boundary/internal/testkit/capstest"
	"jr2.dev/boundary/internal/testkit/landlocktest"
)

// modeEnv makes the re-executed test binary play a part: "confine" is
// `effector confine`; "deny-then-confine" is the same on a node whose
// Landlock fails (a seccomp filter); "ops" is the confined program, which
// tries each operation it is given and prints the errno.
const modeEnv = "JR2_CONFINE_TEST_MODE"

func TestMain(m *testing.M) {
	switch os.Getenv(modeEnv) {
	case "confine":
		os.Exit(confine.Main(os.Args[1:]))
	case "deny-then-confine":
		if err := landlocktest.DenyLandlock(unix.ENOSYS); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		os.Exit(confine.Main(os.Args[1:]))
	case "ops":
		os.Exit(ops(os.Args[1:]))
	case "exec":
		// The benchmark's baseline: the same binary's start and execve,
		// without confinement.
		err := unix.Exec(os.Args[1], os.Args[1:], os.Environ())
		fmt.Fprintln(os.Stderr, err)
		os.Exit(126)
	}
	os.Exit(m.Run())
}

// ops runs "op:arg" words: read, write, list, open (read+write), signal
// (kill with signal 0), connect, bpf (load a program). It prints
// "op arg: ok[ content]" or the errno's name, with the fixture's root
// written F. Three words print lines of their own: attempts:DIR (the
// nodes capstest.Attempt makes in DIR), euid (the effective uid) and
// hold ("held", then it waits for the end of stdin, for the parent to
// read its /proc status).
func ops(words []string) int {
	root := os.Getenv("F")
	for _, w := range words {
		op, arg, _ := strings.Cut(w, ":")
		var content []byte
		var err error
		switch op {
		case "attempts":
			for _, l := range capstest.Attempt(arg) {
				fmt.Println(strings.ReplaceAll(l, root, "F"))
			}
			continue
		case "euid":
			fmt.Printf("euid %d\n", os.Geteuid())
			continue
		case "hold":
			fmt.Println("held")
			_, _ = io.Copy(io.Discard, os.Stdin)
			continue
		case "bpf":
			err = capstest.LoadBPF()
		case "read":
			content, err = os.ReadFile(arg)
			if !strings.HasPrefix(arg, root) {
				content = nil // a system file's bytes vary; whether it opens is the point
			}
		case "write":
			err = os.WriteFile(arg, []byte("written by "+os.Getenv("EFFECT")), 0o644)
		case "list":
			_, err = os.ReadDir(arg)
		case "open":
			var f *os.File
			if f, err = os.OpenFile(arg, os.O_RDWR, 0); err == nil {
				f.Close()
			}
		case "signal":
			pid, _ := strconv.Atoi(arg)
			err = unix.Kill(pid, 0)
		case "connect":
			var c net.Conn
			if c, err = net.Dial("unix", arg); err == nil {
				c.Close()
			}
		}
		result := "ok"
		var errno syscall.Errno
		switch {
		case errors.As(err, &errno):
			result = unix.ErrnoName(errno)
		case err != nil:
			result = err.Error()
		case len(content) > 0:
			result += " " + string(content)
		}
		fmt.Printf("%s: %s\n", strings.TrimSpace(op+" "+strings.ReplaceAll(arg, root, "F")), result)
	}
	return 0
}

// fixture is an image's top-level directory of the test's own, holding the
// Effector's paths (denied) beside public ones (allowed by the walk), and
// the test binary as the confined program.
type fixture struct {
	root     string
	secrets  map[string]string // path → sentinel value, each denied to every child
	named    string            // the value of the secret the command names
	probeBin string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	landlocktest.Require(t, 1)
	root, err := os.MkdirTemp("/", "jr2-confine-test-")
	if err != nil {
		t.Skipf("SKIPPED, NOT PROVEN: the test needs a top-level directory of its own (run as root): %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	f := &fixture{root: root, secrets: map[string]string{}, named: "named-secret-value-" + strconv.Itoa(os.Getpid())}
	write := func(rel, content string, mode os.FileMode) string {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for i, rel := range []string{"key", "secrets/unnamed", "git/entry/password", "work/file", "repos/objects", "scratch/e2/tmp/left"} {
		v := fmt.Sprintf("SENTINEL-%d-%d-confine", i, os.Getpid())
		f.secrets[write(rel, v, 0o644)] = v
	}
	write("secrets/named", f.named, 0o644)
	write("public/readme", "public", 0o644)
	write("work/tool.sh", "#!/bin/sh\necho ran > \"$F/ran\"\n", 0o755)
	for _, d := range []string{"scratch/e1/tmp", "scratch/e1/home", "scratch/e2/home"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f.probeBin = filepath.Join(root, "bin", "ops")
	copyFile(t, os.Args[0], f.probeBin)
	return f
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) p(rel string) string { return filepath.Join(f.root, rel) }

// flags are what the Effector passes for effect (e1 or e2).
func (f *fixture) flags(effect string) []string {
	args := []string{"--scratch", f.p("scratch/" + effect), "--read", f.p("secrets/named"), "--node", "test-node"}
	for _, d := range []string{"key", "secrets", "git", "work", "repos", "scratch"} {
		args = append(args, "--deny", f.p(d))
	}
	return args
}

type result struct {
	code           int
	stdout, stderr string
}

// confine runs `effector confine FLAGS -- ARGV` as effect, with the
// Effect's HOME and TMPDIR in its scratch.
func (f *fixture) confine(t *testing.T, mode, effect string, flags, argv []string) result {
	t.Helper()
	cmd := exec.Command(os.Args[0], append(append(flags, "--"), argv...)...)
	cmd.Env = append(os.Environ(), modeEnv+"="+mode, "F="+f.root, "EFFECT="+effect,
		"HOME="+f.p("scratch/"+effect+"/home"), "TMPDIR="+f.p("scratch/"+effect+"/tmp"))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	r := result{cmd.ProcessState.ExitCode(), out.String(), errb.String()}
	for path, v := range f.secrets {
		if strings.Contains(r.stdout+r.stderr, v) {
			t.Errorf("the value of %s reached the child's output", path)
		}
	}
	return r
}

// opsArgv runs the confined ops program.
func (f *fixture) opsArgv(words ...string) []string {
	return append([]string{"/usr/bin/env", modeEnv + "=ops", f.probeBin}, words...)
}

func lines(s ...string) string { return strings.Join(s, "\n") + "\n" }

// The ADR's list: the key, an unnamed secret, the push credentials, the
// worktree and the repo caches are refused to the child with EACCES; its
// named secret, the image and its own scratch are not; /tmp, the denied
// top-level trees, the rest of /dev and every /proc entry are refused; it
// cannot signal a process outside its domain (ABI 6).
func TestConfinedChild(t *testing.T) {
	f := newFixture(t)
	abi := landlocktest.Require(t, 1)
	me := strconv.Itoa(os.Getpid())
	words := []string{
		"read:" + f.p("key"),
		"read:" + f.p("secrets/unnamed"),
		"list:" + f.p("secrets"),
		"read:" + f.p("git/entry/password"),
		"read:" + f.p("work/file"),
		"write:" + f.p("work/new"),
		"list:" + f.p("work"),
		"read:" + f.p("repos/objects"),
		"read:" + f.p("scratch/e2/tmp/left"),
		"read:" + f.p("secrets/named"),
		"write:" + f.p("secrets/named"),
		"read:" + f.p("public/readme"),
		"write:" + f.p("public/new"),
		"write:" + f.p("scratch/e1/tmp/t"),
		"read:" + f.p("scratch/e1/tmp/t"),
		"write:" + f.p("scratch/e1/home/.config"),
		"read:/etc/passwd",
		"read:/usr/bin/env",
		"write:/tmp/jr2-confine-written",
		"list:/tmp",
		"read:/proc/1/environ",
		"read:/proc/" + me + "/environ",
		"read:/proc/self/status",
		"list:/dev",
		"open:/dev/null",
		"open:/dev/urandom",
		"list:/home", "list:/root", "list:/var", "list:/run", "list:/sys",
	}
	want := lines(
		"read F/key: EACCES",
		"read F/secrets/unnamed: EACCES",
		"list F/secrets: EACCES",
		"read F/git/entry/password: EACCES",
		"read F/work/file: EACCES",
		"write F/work/new: EACCES",
		"list F/work: EACCES",
		"read F/repos/objects: EACCES",
		"read F/scratch/e2/tmp/left: EACCES",
		"read F/secrets/named: ok "+f.named,
		"write F/secrets/named: EACCES",
		"read F/public/readme: ok public",
		"write F/public/new: EACCES",
		"write F/scratch/e1/tmp/t: ok",
		"read F/scratch/e1/tmp/t: ok written by e1",
		"write F/scratch/e1/home/.config: ok",
		"read /etc/passwd: ok",
		"read /usr/bin/env: ok",
		"write /tmp/jr2-confine-written: EACCES",
		"list /tmp: EACCES",
		"read /proc/1/environ: EACCES",
		"read /proc/"+me+"/environ: EACCES",
		"read /proc/self/status: EACCES",
		"list /dev: EACCES",
		"open /dev/null: ok",
		"open /dev/urandom: ok",
		"list /home: EACCES", "list /root: EACCES", "list /var: EACCES", "list /run: EACCES", "list /sys: EACCES",
	)
	if abi >= 6 {
		// Scoped: no signal, no abstract socket outside the domain.
		abstract := "@jr2-confine-test-" + me
		l, err := net.Listen("unix", abstract)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if c, err := net.Dial("unix", abstract); err != nil {
			t.Fatalf("unconfined, the abstract socket refuses too: the test proves nothing: %v", err)
		} else {
			c.Close()
		}
		words = append(words, "signal:"+me, "connect:"+abstract)
		want += lines("signal "+me+": EPERM", "connect "+abstract+": EPERM")
	}
	r := f.confine(t, "confine", "e1", f.flags("e1"), f.opsArgv(words...))
	if r.code != 0 || r.stdout != want {
		t.Errorf("exit %d, stderr %q; the child saw:\n%s\nwant:\n%s", r.code, r.stderr, r.stdout, want)
	}
	if _, err := os.Stat("/tmp/jr2-confine-written"); err == nil {
		os.Remove("/tmp/jr2-confine-written")
		t.Error("the child wrote /tmp")
	}
}

// A child of the child (sh runs cat) is in the same domain.
func TestGrandchildIsConfined(t *testing.T) {
	f := newFixture(t)
	script := `cat "$F/secrets/unnamed"; echo "unnamed=$?"; cat "$F/key"; echo "key=$?"; cat "$F/secrets/named"; echo; echo "named=$?"`
	r := f.confine(t, "confine", "e1", f.flags("e1"), []string{"/bin/sh", "-c", script})
	want := lines("unnamed=1", "key=1", f.named, "named=0")
	if r.code != 0 || r.stdout != want {
		t.Errorf("exit %d; stdout:\n%s\nwant:\n%s", r.code, r.stdout, want)
	}
	if strings.Count(r.stderr, "Permission denied") != 2 {
		t.Errorf("stderr %q, want two permission errors", r.stderr)
	}
}

// What one child writes in its TMPDIR the next child, confined to another
// scratch, cannot read; /tmp refuses both.
func TestTMPDIRIsPrivate(t *testing.T) {
	f := newFixture(t)
	first := f.confine(t, "confine", "e1", f.flags("e1"), []string{"/bin/sh", "-c",
		`echo from-e1 > "$TMPDIR/note" && cat "$TMPDIR/note"; echo x > /tmp/jr2-confine-e1 || echo tmp-refused`})
	if first.stdout != lines("from-e1", "tmp-refused") {
		t.Fatalf("first child: exit %d, stdout %q, stderr %q", first.code, first.stdout, first.stderr)
	}
	if err := os.MkdirAll(f.p("scratch/e2/tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	second := f.confine(t, "confine", "e2", f.flags("e2"), f.opsArgv(
		"read:"+f.p("scratch/e1/tmp/note"), "list:"+f.p("scratch/e1/tmp"), "write:"+f.p("scratch/e2/tmp/mine"),
		"write:/tmp/jr2-confine-e2"))
	want := lines("read F/scratch/e1/tmp/note: EACCES", "list F/scratch/e1/tmp: EACCES",
		"write F/scratch/e2/tmp/mine: ok", "write /tmp/jr2-confine-e2: EACCES")
	if second.stdout != want {
		t.Errorf("second child: exit %d, stderr %q, saw:\n%s\nwant:\n%s", second.code, second.stderr, second.stdout, want)
	}
}

// Any failure before execve: exit 126, the reason on stderr, and the
// program never ran.
func TestSetupFailureRunsNothing(t *testing.T) {
	f := newFixture(t)
	ran := []string{"/bin/sh", "-c", `echo ran > "$F/ran"`}
	tests := []struct {
		name  string
		mode  string
		flags []string
		argv  []string
		want  string
	}{
		{"landlock unavailable", "deny-then-confine", f.flags("e1"), ran,
			"effector confine: landlock: unavailable on node test-node (ENOSYS: not supported by kernel or not enabled at boot time)\n"},
		{"program not in PATH", "confine", f.flags("e1"), []string{"jr2-no-such-program"},
			"effector confine: exec: \"jr2-no-such-program\": executable file not found in $PATH\n"},
		{"program missing", "confine", f.flags("e1"), []string{"/nonexistent/prog"},
			"effector confine: exec /nonexistent/prog: no such file or directory\n"},
		{"program in a denied tree", "confine", f.flags("e1"), []string{f.p("work/tool.sh")},
			"effector confine: exec F/work/tool.sh: permission denied\n"},
		{"named secret missing", "confine", append(f.flags("e1"), "--read", f.p("secrets/missing")), ran,
			"effector confine: --read F/secrets/missing: lstat F/secrets/missing: no such file or directory\n"},
		{"scratch holds a denied path", "confine", append(f.flags("e1"), "--scratch", f.root), ran,
			"effector confine: --scratch F: the denied path F/key is in it; give a path that holds nothing denied\n"},
		{"relative path", "confine", []string{"--deny", "work", "--"}, ran,
			"effector confine: --deny \"work\": the path must be absolute\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := f.confine(t, tt.mode, "e1", tt.flags, tt.argv)
			if got := strings.ReplaceAll(r.stderr, f.root, "F"); r.code != 126 || got != tt.want || r.stdout != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want 126 and %q", r.code, r.stdout, got, tt.want)
			}
			if _, err := os.Stat(f.p("ran")); err == nil {
				os.Remove(f.p("ran"))
				t.Error("the program ran")
			}
		})
	}
}

// BenchmarkStart measures what confinement adds to starting a program:
// `effector confine -- /bin/true` (the test binary in confine mode, with
// the Effector's usual flags, and the static Effector binary make effector
// builds) against a bare exec of /bin/true,
// against the same Go binary starting and executing /bin/true unconfined
// (go-exec: confine minus go-exec is the Landlock work), against the
// smallest static Go program that executes /bin/true (go-floor), and against
// bubblewrap where /usr/bin/bwrap exists.
func BenchmarkStart(b *testing.B) {
	if _, err := landlock.Probe(); err != nil {
		b.Skipf("SKIPPED: no Landlock: %v", err)
	}
	scratch := b.TempDir()
	confineArgs := []string{"--scratch", scratch, "--deny", "/work", "--deny", "/repos", "--", "/bin/true"}
	// The Effector as make effector builds it: static (CGO_ENABLED=0), no
	// dynamic loader to run before its main.
	bin := b.TempDir()
	static, small := filepath.Join(bin, "effector"), filepath.Join(bin, confine.Binary)
	build := exec.Command("go", "build", "-o", bin+"/", "jr2.dev/boundary/effector", "jr2.dev/boundary/effector/cmd/effector-confine")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("go build the effector: %v\n%s", err, out)
	}
	// The floor of any Go program: a static binary whose main is one
	// execve of /bin/true. Its start over bare is the Go runtime's own
	// (schedinit's CPUID probes, trapped under a hypervisor, the cgroup
	// read for GOMAXPROCS, threads, page faults); effector-confine minus
	// go-floor is what confinement and its imports add.
	floorSrc := b.TempDir()
	floor := filepath.Join(bin, "go-floor")
	os.WriteFile(filepath.Join(floorSrc, "go.mod"), []byte("module floor\n\ngo 1.26\n"), 0o644)
	os.WriteFile(filepath.Join(floorSrc, "main.go"), []byte("package main\n\nimport (\n\t\"os\"\n\t\"syscall\"\n)\n\n"+
		"func main() { syscall.Exec(\"/bin/true\", []string{\"/bin/true\"}, os.Environ()) }\n"), 0o644)
	build = exec.Command("go", "build", "-o", floor, ".")
	build.Dir = floorSrc
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("go build the floor: %v\n%s", err, out)
	}
	rows := []struct {
		name string
		argv []string
		env  []string
	}{
		{"bare", []string{"/bin/true"}, nil},
		{"go-floor", []string{floor}, nil},
		{"go-exec", []string{os.Args[0], "/bin/true"}, []string{modeEnv + "=exec"}},
		{"confine", append([]string{os.Args[0]}, confineArgs...), []string{modeEnv + "=confine"}},
		{"effector-static", append([]string{static, "confine"}, confineArgs...), nil},
		{"effector-confine", append([]string{small}, confineArgs...), nil},
		{"bwrap", []string{"/usr/bin/bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
			"--unshare-pid", "--die-with-parent", "/bin/true"}, nil},
	}
	for _, row := range rows {
		b.Run(row.name, func(b *testing.B) {
			if _, err := os.Stat(row.argv[0]); err != nil {
				b.Logf("no %s here: row skipped", row.argv[0])
				fmt.Printf("BenchmarkStart/%s: skipped, %s is not installed\n", row.name, row.argv[0])
				b.SkipNow()
			}
			env := append(os.Environ(), row.env...)
			for b.Loop() {
				cmd := exec.Command(row.argv[0], row.argv[1:]...)
				cmd.Env = env
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("%s: %v: %s", row.name, err, out)
				}
			}
		})
	}
}

// TestDescriptorsAboveTwoAreClosed: descriptors the confine process
// inherits above 2 (a pipe and a file, as fds 3 and 4) are closed across
// its execve, so the command holds none of them.
func TestDescriptorsAboveTwoAreClosed(t *testing.T) {
	f := newFixture(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	file, err := os.Open(f.p("work"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	script := `for n in 3 4 5; do if { true >&$n; } 2>/dev/null; then echo "fd $n open"; fi; done; echo checked`
	cmd := exec.Command(os.Args[0], append(append(f.flags("e1"), "--", "/bin/sh", "-c"), script)...)
	cmd.Env = append(os.Environ(), modeEnv+"=confine")
	cmd.ExtraFiles = []*os.File{w, file}
	out, err := cmd.CombinedOutput()
	if err != nil || string(out) != "checked\n" {
		t.Fatalf("exit %v, output %q; want only %q", err, out, "checked\n")
	}
}
