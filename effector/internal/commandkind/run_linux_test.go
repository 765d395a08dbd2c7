package commandkind

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"jr2.dev/boundary/effector/internal/classlock"
	"jr2.dev/boundary/effector/internal/commandkind/commandtest"
	"jr2.dev/boundary/effector/internal/confine"
	"jr2.dev/boundary/effector/internal/effect"
	"jr2.dev/boundary/effector/internal/keep"
	"jr2.dev/boundary/effector/internal/reap"
	"jr2.dev/boundary/effector/internal/reap/reaptest"
	"jr2.dev/boundary/effector/internal/wire"
	"jr2.dev/boundary/filter/scrub"
	"jr2.dev/boundary/internal/testkit/landlocktest"
)

// TestMain makes the test binary the Effector's own binary: `keep` and
// `confine` as its first word run those sub-commands, as `effector` does;
// otherwise it is the Effector, the subreaper of its descendants.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "keep":
			os.Exit(keep.Main(os.Args[2:]))
		case "confine":
			os.Exit(confine.Main(os.Args[2:]))
		}
	}
	if err := reap.SetChildSubreaper(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

var testKey = []byte("0123456789abcdef0123456789abcdef")

// rig is a command kind over a fixture, as the Effector wires it.
type rig struct {
	f    *commandtest.Fixture
	k    *Kind
	lock *classlock.Lock
	tr   *reap.Tracker
}

func newRig(t *testing.T) *rig {
	t.Helper()
	landlocktest.Require(t, 1)
	f := commandtest.New(t, testKey, `{"placement":"sandbox-1","commands":true}`)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{f: f, lock: &classlock.Lock{}, tr: reap.NewTracker()}
	r.k = New(Options{
		Commands: true, Node: "node-a",
		Values:     func(n string) ([]byte, bool) { v, ok := f.Values[n]; return []byte(v), ok },
		SecretsDir: f.Secrets, Work: f.Work, Scratch: f.Scratch, Deny: f.OwnPaths(),
		Self: self, Tracker: r.tr, Lock: r.lock, Grace: 500 * time.Millisecond,
	})
	return r
}

// plan prepares a start.
func (r *rig) plan(t *testing.T, id string, timeoutMs int64, c *wire.Command) (run func() wire.Outcome, stop func()) {
	t.Helper()
	plan, err := r.k.Prepare(id, &wire.Start{Kind: wire.KindCommand, TimeoutMs: timeoutMs, Command: c})
	if err != nil {
		t.Fatalf("prepare %s: %v", id, err)
	}
	held := []scrub.Secret{{Name: "effector-key", Value: testKey}}
	for n, v := range r.f.Values {
		held = append(held, scrub.Secret{Name: n, Value: []byte(v)})
	}
	global, err := scrub.New(held)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := effect.ForEffect(global, plan.Built) // as the server makes it
	if err != nil {
		t.Fatal(err)
	}
	return func() wire.Outcome { return plan.Run(context.Background(), sc) }, plan.Stop
}

func sh(script string) *wire.Command { return &wire.Command{Argv: []string{"/bin/sh", "-c", script}} }

func code(o wire.Outcome) string {
	if o.Code == nil {
		return "-"
	}
	return fmt.Sprint(*o.Code)
}

// TestRunExited: the program's code and output, in a clean checkout of
// HEAD, with its scratch gone once the outcome exists.
func TestRunExited(t *testing.T) {
	r := newRig(t)
	run, _ := r.plan(t, "c1", 20000, sh(`cat README; pwd; echo to-stderr >&2; exit 3`))
	o := run()
	if o.Kind != wire.OutcomeExited || code(o) != "3" || o.Signal != "" || o.Dirty || o.Truncated {
		t.Fatalf("outcome %+v (code %s)", o, code(o))
	}
	lines := strings.Split(o.Stdout, "\n")
	if lines[0] != "committed one" || !strings.HasPrefix(lines[1], r.f.Scratch+"/cmd-c1-") || !strings.HasSuffix(lines[1], "/checkout") {
		t.Errorf("stdout %q", o.Stdout)
	}
	if o.Stderr != "to-stderr\n" {
		t.Errorf("stderr %q", o.Stderr)
	}
	if left := r.f.Leftovers(); len(left) != 0 {
		t.Errorf("scratch left: %v", left)
	}
}

// TestStopBeforeItStarted: a command waiting for the class lock that is
// stopped settles unknown, "did not run", and its program never starts.
func TestStopBeforeItStarted(t *testing.T) {
	r := newRig(t)
	release, err := r.lock.Acquire(context.Background(), classlock.GPG)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	marker := reaptest.Marker()
	reaptest.Cleanup(t, marker)
	run, stop := r.plan(t, "c1", 20000, &wire.Command{Argv: []string{"/bin/sleep", marker}})
	done := make(chan wire.Outcome, 1)
	go func() { done <- run() }()
	time.Sleep(100 * time.Millisecond) // it waits for the lock
	stop()
	o := <-done
	if o.Kind != wire.OutcomeUnknown || o.Reason != "did not run: stopped before it started" {
		t.Fatalf("outcome %+v", o)
	}
	if len(reaptest.Marked(marker)) != 0 || len(r.f.Leftovers()) != 0 {
		t.Error("it ran, or left a scratch")
	}
}

// TestWaiterPastItsTimeout: a command that waits for the class lock past
// its timeout settles timed out and never runs late.
func TestWaiterPastItsTimeout(t *testing.T) {
	r := newRig(t)
	release, err := r.lock.Acquire(context.Background(), classlock.GPG)
	if err != nil {
		t.Fatal(err)
	}
	marker := reaptest.Marker()
	reaptest.Cleanup(t, marker)
	run, _ := r.plan(t, "c1", 300, &wire.Command{Argv: []string{"/bin/sleep", marker}})
	o := run()
	release()
	if o.Kind != wire.OutcomeTimeout || o.Reason != "the command did not start within its 300 ms (waiting for GPG pushes to end); it did not run" {
		t.Fatalf("outcome %+v", o)
	}
	time.Sleep(100 * time.Millisecond)
	if len(reaptest.Marked(marker)) != 0 {
		t.Error("it ran late")
	}
}

// TestClassLockWitness: GPG pushes (a witness process standing in for
// gpg-agent, started and settled under classlock.GPG) and commands run
// together, and a sampler of /proc never sees a command's process (known
// by its HOME in the scratch) alive beside a witness. The control run
// gives the pushes a lock of their own: the sampler must then see both,
// or the test could not fail.
func TestClassLockWitness(t *testing.T) {
	for _, shared := range []bool{true, false} {
		t.Run(map[bool]string{true: "one lock", false: "control: two locks"}[shared], func(t *testing.T) {
			r := newRig(t)
			gpgLock := r.lock
			if !shared {
				gpgLock = &classlock.Lock{}
			}
			witness := reaptest.Marker()
			reaptest.Cleanup(t, witness)
			samples := sampler(t, "HOME="+r.f.Scratch+"/cmd-", witness)

			var wg sync.WaitGroup
			errs := make(chan error, 64)
			for i := range 3 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for j := range 3 {
						if err := gpgPush(gpgLock, r.tr, fmt.Sprintf("gpg-%d-%d", i, j), witness, 150*time.Millisecond); err != nil {
							errs <- err
						}
					}
				}()
			}
			for i := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					run, _ := r.plan(t, fmt.Sprintf("c%d", i), 30000, sh("sleep 0.3; echo done"))
					if o := run(); o.Kind != wire.OutcomeExited || o.Stdout != "done\n" {
						errs <- fmt.Errorf("command %d: %+v", i, o)
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			s := samples()
			t.Logf("%d samples: command seen in %d, witness in %d, both in %d", s.n, s.command, s.witness, s.both)
			if s.command == 0 || s.witness == 0 {
				t.Fatalf("the sampler never saw a command (%d) or a witness (%d): it proves nothing", s.command, s.witness)
			}
			if shared && s.both != 0 {
				t.Errorf("%d samples saw a command's process alive beside a GPG witness", s.both)
			}
			if !shared && s.both == 0 {
				t.Errorf("with two locks the sampler never saw both alive: it could not catch an overlap")
			}
		})
	}
}

// gpgPush stands in for a GPG push: under classlock.GPG it starts a
// witness in place of gpg-agent, lets it live for d, ends it, settles, and
// only then releases the lock.
func gpgPush(l *classlock.Lock, tr *reap.Tracker, id, marker string, d time.Duration) error {
	release, err := l.Acquire(context.Background(), classlock.GPG)
	if err != nil {
		return err
	}
	defer release()
	cmd := exec.Command("/bin/sleep", marker)
	if err := tr.Start(id, cmd); err != nil {
		return err
	}
	time.Sleep(d)
	_ = cmd.Process.Kill()
	_ = tr.Wait(cmd)
	return tr.Settle(id)
}

type sampleCounts struct{ n, command, witness, both int }

// sampler samples /proc until the returned function is called, and then
// says how often it saw a process whose environ holds env, one whose
// command line holds marker, and both at once.
func sampler(t *testing.T, env, marker string) func() sampleCounts {
	var stop atomic.Bool
	done := make(chan sampleCounts)
	go func() {
		var s sampleCounts
		for !stop.Load() {
			c, w := len(commandtest.WithEnv(env)) > 0, len(reaptest.Marked(marker)) > 0
			s.n++
			if c {
				s.command++
			}
			if w {
				s.witness++
			}
			if c && w {
				s.both++
			}
			// Every process sampled here lives 150 ms or more.
			time.Sleep(time.Millisecond)
		}
		done <- s
	}()
	return func() sampleCounts { stop.Store(true); return <-done }
}

// TestRepoConfigNeverRuns: the worktree's config names programs for every
// hook git has — fsmonitor, a hooks directory with post-checkout, a clean
// and smudge filter its .gitattributes applies to every file, an ssh
// command — and none runs when a command is checked out and the worktree's
// dirtiness is read; the checkout holds the committed bytes, unsmudged.
func TestRepoConfigNeverRuns(t *testing.T) {
	r := newRig(t)
	pwn := filepath.Join(r.f.TopDir, "pwned")
	hooks := filepath.Join(r.f.TopDir, "hooks")
	if err := os.MkdirAll(hooks, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(hooks, "post-checkout"), []byte("#!/bin/sh\ntouch "+pwn+"-hook\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r.f.Commit(t, map[string]string{".gitattributes": "* filter=evil\n", "data.txt": "committed bytes\n"}, "attributes")
	cfg, err := os.OpenFile(filepath.Join(r.f.Work, ".git", "config"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(cfg, "[core]\n\tfsmonitor = \"touch %[1]s-fsmonitor; false\"\n\thooksPath = %[2]s\n\tsshCommand = \"touch %[1]s-ssh\"\n"+
		"[filter \"evil\"]\n\tclean = \"touch %[1]s-clean; cat\"\n\tsmudge = \"touch %[1]s-smudge; sed s/committed/SMUDGED/\"\n\trequired = true\n", pwn, hooks)
	cfg.Close()
	// A stale stat makes status read the file: a clean filter would run.
	now := time.Now().Add(time.Minute)
	os.Chtimes(filepath.Join(r.f.Work, "data.txt"), now, now)

	run, _ := r.plan(t, "c1", 20000, sh("cat data.txt"))
	o := run()
	if o.Kind != wire.OutcomeExited || code(o) != "0" || o.Stdout != "committed bytes\n" {
		t.Errorf("outcome %+v", o)
	}
	matches, _ := filepath.Glob(pwn + "*")
	if len(matches) != 0 {
		t.Errorf("a program the repository named ran: %v", matches)
	}
}

// TestCheckoutReadsOnlyTheWorktree: the agent owns its worktree's .git,
// so it can name another object store there — an alternates entry, or
// its objects directory a link — and point its branch at a commit of a
// repository the Effector holds and the child may not read (a repo
// cache), or link a ref file to a file of the Effector's. The Effector's
// git reads the worktree with no more than the worktree: the command
// does not run, and no byte of those files reaches the outcome.
func TestCheckoutReadsOnlyTheWorktree(t *testing.T) {
	for _, c := range []string{"alternates", "objects linked", "packed-refs linked"} {
		t.Run(c, func(t *testing.T) {
			r := newRig(t)
			cache := filepath.Join(r.f.Repos, "private")
			private := "SENTINEL-private-" + commandtest.Random()
			if err := os.MkdirAll(cache, 0o755); err != nil {
				t.Fatal(err)
			}
			git := func(args ...string) string {
				cmd := exec.Command("git", append([]string{"-c", "user.name=jr2 test", "-c", "user.email=test@jr2.dev", "-c", "core.hooksPath=/dev/null"}, args...)...)
				cmd.Dir = cache
				cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + r.f.TopDir, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null"}
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("git %v: %v\n%s", args, err, out)
				}
				return strings.TrimSpace(string(out))
			}
			git("init", "-q")
			os.WriteFile(filepath.Join(cache, "private.txt"), []byte(private+"\n"), 0o644)
			git("add", "-A")
			git("commit", "-q", "-m", "private")
			sha := git("rev-parse", "HEAD")
			dotgit := filepath.Join(r.f.Work, ".git")
			switch c {
			case "alternates":
				os.WriteFile(filepath.Join(dotgit, "objects", "info", "alternates"), []byte(filepath.Join(cache, ".git", "objects")+"\n"), 0o644)
				os.WriteFile(filepath.Join(dotgit, "refs", "heads", "main"), []byte(sha+"\n"), 0o644)
			case "objects linked":
				os.RemoveAll(filepath.Join(dotgit, "objects"))
				os.Symlink(filepath.Join(cache, ".git", "objects"), filepath.Join(dotgit, "objects"))
				os.WriteFile(filepath.Join(dotgit, "refs", "heads", "main"), []byte(sha+"\n"), 0o644)
			case "packed-refs linked":
				os.WriteFile(filepath.Join(cache, "packed"), []byte(private+"\n"), 0o644)
				os.Symlink(filepath.Join(cache, "packed"), filepath.Join(dotgit, "packed-refs"))
			}
			run, _ := r.plan(t, "c1", 20000, sh("cat private.txt"))
			o := run()
			whole, _ := wire.Marshal(&o)
			if strings.Contains(string(whole), "SENTINEL-private") {
				t.Errorf("the outcome holds the repo cache's file: %s", whole)
			}
			if o.Kind != wire.OutcomeUnknown || !strings.HasPrefix(o.Reason, "did not run: ") {
				t.Errorf("outcome %+v; want unknown, did not run", o)
			}
		})
	}
}

// TestWorktreeOfAnotherUser: the worktree belongs to the agent's uid, not
// the Effector's; git refuses such a repository unless it is named a
// safe.directory, which the Effector's own global config does.
func TestWorktreeOfAnotherUser(t *testing.T) {
	r := newRig(t)
	err := filepath.WalkDir(r.f.Work, func(p string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, 4242, 4242)
	})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("git", "ls-remote", r.f.Work, "HEAD").CombinedOutput(); err == nil {
		t.Fatalf("git takes a worktree of another uid without safe.directory: the test proves nothing (%s)", out)
	}
	run, _ := r.plan(t, "c1", 20000, sh("cat README"))
	if o := run(); o.Kind != wire.OutcomeExited || code(o) != "0" || o.Stdout != "committed one\n" || o.Dirty {
		t.Errorf("outcome %+v", o)
	}
}

// TestDirty: dirty is what git status says of the worktree: an edit, a
// new file; a file its exclude lists is not one.
func TestDirty(t *testing.T) {
	r := newRig(t)
	os.WriteFile(filepath.Join(r.f.Work, ".git", "info", "exclude"), []byte("ignored.log\n"), 0o644)
	cases := []struct {
		name  string
		edit  func()
		dirty bool
	}{
		{"clean", func() {}, false},
		{"an excluded file", func() { r.f.Write(t, "ignored.log", "x") }, false},
		{"a new file", func() { r.f.Write(t, "new.txt", "x") }, true},
		{"an edit", func() { os.Remove(filepath.Join(r.f.Work, "new.txt")); r.f.Write(t, "README", "edited\n") }, true},
	}
	for i, c := range cases {
		c.edit()
		run, _ := r.plan(t, fmt.Sprintf("d%d", i), 20000, sh("cat README"))
		o := run()
		if o.Kind != wire.OutcomeExited || o.Dirty != c.dirty || o.Stdout != "committed one\n" {
			t.Errorf("%s: outcome %+v, want dirty %v and HEAD's README", c.name, o, c.dirty)
		}
	}
}

// TestPinAndDir: a pin checks out that commit, on a branch or not; a pin
// the worktree does not hold, and a dir that is not a directory of the
// checkout, run nothing.
func TestPinAndDir(t *testing.T) {
	r := newRig(t)
	first := strings.TrimSpace(r.f.RunGit(t, "rev-parse", "HEAD"))
	second := r.f.Commit(t, map[string]string{"README": "committed two\n", "sub/link": "x"}, "two")
	os.Remove(filepath.Join(r.f.Work, "sub", "link"))
	os.Symlink(r.f.Work, filepath.Join(r.f.Work, "sub", "link"))
	third := r.f.Commit(t, nil, "link")
	// An unreachable commit: made on a branch that is then deleted.
	r.f.RunGit(t, "checkout", "-q", "-b", "gone")
	gone := r.f.Commit(t, map[string]string{"README": "unreachable\n"}, "gone")
	r.f.RunGit(t, "checkout", "-q", "main")
	r.f.RunGit(t, "branch", "-q", "-D", "gone")
	marker := reaptest.Marker()
	reaptest.Cleanup(t, marker)
	cases := []struct {
		name, pin, dir string
		argv           []string
		kind, out      string
	}{
		{"HEAD", "", "", []string{"cat", "README"}, wire.OutcomeExited, "committed two\n"},
		{"an older commit", first, "", []string{"cat", "README"}, wire.OutcomeExited, "committed one\n"},
		{"a commit on no branch", gone, "", []string{"cat", "README"}, wire.OutcomeExited, "unreachable\n"},
		{"a dir", second, "sub", []string{"cat", "inner.txt"}, wire.OutcomeExited, "inner\n"},
		{"a pin the worktree lacks", strings.Repeat("0", 40), "", []string{"/bin/sleep", marker}, wire.OutcomeUnknown,
			"did not run: commit 0000000000000000000000000000000000000000 is not in the worktree"},
		{"a dir that is missing", "", "nope", []string{"/bin/sleep", marker}, wire.OutcomeUnknown, `did not run: dir "nope" is not a directory of commit`},
		{"a dir that is a file", "", "README", []string{"/bin/sleep", marker}, wire.OutcomeUnknown, `did not run: dir "README" is not a directory`},
		{"a dir linked outside", third, "sub/link", []string{"/bin/sleep", marker}, wire.OutcomeUnknown, `did not run: dir "sub/link" is not a directory of commit ` + third + " (it leaves the checkout)"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			run, _ := r.plan(t, fmt.Sprintf("p%d", i), 20000, &wire.Command{Argv: c.argv, Pin: c.pin, Dir: c.dir})
			o := run()
			got := o.Stdout
			if o.Kind == wire.OutcomeUnknown {
				got = o.Reason
			}
			if o.Kind != c.kind || !strings.HasPrefix(got, c.out) {
				t.Errorf("outcome %+v, want %s %q", o, c.kind, c.out)
			}
		})
	}
	if len(reaptest.Marked(marker)) != 0 || len(r.f.Leftovers()) != 0 {
		t.Error("a refused command ran, or left its scratch")
	}
}

// TestOutputClosedAfterTheTopEnds: a descendant that keeps the output open
// past its top process's end does not hold the capture: drain ends at the
// read deadline set when the top ended, while the holder still lives.
func TestOutputClosedAfterTheTopEnds(t *testing.T) {
	marker := reaptest.Marker()
	reaptest.Cleanup(t, marker)
	rd, wr, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", "-c", "echo top; /bin/sleep "+marker+" &")
	cmd.Stdout = wr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	wr.Close()
	c := newCapture(testScrubber(t), 1<<10)
	drained := make(chan struct{})
	go func() { drain(rd, c); close(drained) }()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	rd.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	<-drained
	if len(reaptest.Marked(marker)) != 1 {
		t.Fatal("the holder is gone: the test proves nothing")
	}
	if got, _ := c.result(); got != "top\n" {
		t.Errorf("output %q", got)
	}
}
