package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"jr2.dev/boundary/effector/client"
	"jr2.dev/boundary/effector/internal/commandkind/commandtest"
	"jr2.dev/boundary/effector/internal/efftest"
	"jr2.dev/boundary/effector/internal/reap/reaptest"
	"jr2.dev/boundary/effector/internal/wire"
	"jr2.dev/boundary/internal/testkit/landlocktest"
)

// denyLandlockEnv makes the test binary a launcher that installs a
// seccomp filter failing every Landlock syscall with ENOSYS, as a kernel
// without Landlock answers, and then executes os.Args[1:] (the effector)
// under it. It runs before TestMain.
const denyLandlockEnv = "JR2_EFFECTOR_TEST_DENY_LANDLOCK"

func init() {
	if os.Getenv(denyLandlockEnv) == "" {
		return
	}
	if err := landlocktest.DenyLandlock(unix.ENOSYS); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, denyLandlockEnv+"=") {
			env = append(env, kv)
		}
	}
	err := unix.Exec(os.Args[1], os.Args[1:], env)
	fmt.Fprintln(os.Stderr, err)
	os.Exit(2)
}

// commandRig is a Sandbox Effector process with commands, over a
// fixture whose files lie where the confiner denies them.
type commandRig struct {
	f *commandtest.Fixture
	p *proc
	c *client.Client
}

func newCommandRig(t testing.TB, extra map[string]string) *commandRig {
	t.Helper()
	landlocktest.Require(t, 1)
	f := commandtest.New(t, placementKey, `{"placement":"sandbox-1","commands":true}`)
	s := &site{dir: f.RunDir, env: f.Env()}
	p := s.run(t, extra)
	return &commandRig{f: f, p: p, c: p.client()}
}

// start starts a command and fails the test unless it was taken (202).
func (r *commandRig) start(t testing.TB, id string, timeoutMs int64, c *wire.Command) {
	t.Helper()
	a, err := r.c.Start(context.Background(), id, &wire.Start{Kind: wire.KindCommand, TimeoutMs: timeoutMs, Command: c})
	if err != nil || a.Status != 202 {
		t.Fatalf("start %s: %v %+v", id, err, a)
	}
}

func (r *commandRig) settle(t testing.TB, id string) *wire.Outcome {
	return settle(t, r.c, id, r.p.addr)
}

func shell(script string, env map[string]wire.Value) *wire.Command {
	return &wire.Command{Argv: []string{"/bin/sh", "-c", script}, Env: env}
}

// marks is an env of markers: each process that must be found is given
// its marker through the env, so only that process's command line holds
// it (not the keeper's, the confiner's or the shell's).
func marks(kv ...string) map[string]wire.Value {
	env := map[string]wire.Value{}
	for i := 0; i+1 < len(kv); i += 2 {
		env[kv[i]] = wire.Value{wire.Text(kv[i+1])}
	}
	return env
}

func outCode(o *wire.Outcome) string {
	if o.Code == nil {
		return "-"
	}
	return strconv.Itoa(*o.Code)
}

func sha(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }

// waitAlive waits until a process with each marker in its command line is
// alive.
func waitAlive(t *testing.T, markers ...string) {
	t.Helper()
	waitFor(t, func() bool {
		for _, m := range markers {
			if len(reaptest.Marked(m)) == 0 {
				return false
			}
		}
		return true
	})
}

func alive(markers ...string) []string {
	var live []string
	for _, m := range markers {
		if pids := reaptest.Marked(m); len(pids) > 0 {
			live = append(live, fmt.Sprintf("%s: %v", m, pids))
		}
	}
	return live
}

// TestCommandConfined (ADR-0068, Consequences): a child that reads the
// key, an unnamed secret, the push credentials, the worktree or a repo
// cache, or writes the worktree, gets a permission error; /tmp refuses it;
// a child of the child is confined too; the secret the command names is
// read from env and from its file. No secret, no form of one and no key is
// in the answer; no value or path is in a log line.
func TestCommandConfined(t *testing.T) {
	r := newCommandRig(t, nil)
	f := r.f
	forbidden := []string{f.Key, filepath.Join(f.Secrets, commandtest.Unnamed), filepath.Join(f.Git, "origin", "password"),
		filepath.Join(f.Work, "secret.txt"), filepath.Join(f.Repos, "cache", "objects", "a")}
	script := `for p in $FORBIDDEN; do cat "$p"; echo "read=$?"; done
echo x > "$WORK/new"; echo "write-work=$?"
ls "$WORK" > /dev/null; echo "list-work=$?"
echo x > /tmp/jr2-command-test; echo "write-tmp=$?"
ls /tmp > /dev/null; echo "list-tmp=$?"
printf %s "$TOKEN" | sha256sum
sha256sum < "$TOKEN_FILE"
echo "env=$TOKEN"
echo "built=$AUTH"
/bin/sh -c 'cat "$1"; echo "grandchild-read=$?"; sha256sum < "$2"' - "$KEY" "$TOKEN_FILE"
echo "home=$HOME"`
	r.start(t, "confined", 30000, shell(script, map[string]wire.Value{
		"FORBIDDEN":  {wire.Text(strings.Join(forbidden, " "))},
		"KEY":        {wire.Text(f.Key)},
		"WORK":       {wire.Text(f.Work)},
		"TOKEN":      {wire.Secret(commandtest.Named)},
		"TOKEN_FILE": {wire.SecretPath(commandtest.Named)},
		"AUTH":       {wire.Text("Bearer "), wire.Secret(commandtest.Named)},
	}))
	a, err := r.c.Poll(context.Background(), "confined", r.p.addr)
	for err == nil && a.State.State != wire.StateSettled {
		a, err = r.c.Poll(context.Background(), "confined", r.p.addr)
	}
	if err != nil {
		t.Fatal(err)
	}
	o := a.State.Outcome
	named := sha(f.Values[commandtest.Named])
	lines := strings.Split(strings.TrimSuffix(o.Stdout, "\n"), "\n")
	want := []string{"read=1", "read=1", "read=1", "read=1", "read=1", "write-work=2", "list-work=2", "write-tmp=2", "list-tmp=2",
		named + "  -", named + "  -", "env=[secret:TOKEN]",
		// "Bearer " + the value: every form of it holds a form of the value,
		// so the value's label replaces it and the text around stays
		// (effect.Scrubber).
		"built=Bearer [secret:TOKEN]", "grandchild-read=1", named + "  -"}
	if o.Kind != wire.OutcomeExited || outCode(o) != "0" || len(lines) != len(want)+1 {
		t.Fatalf("outcome %s code %s; stdout:\n%s\nstderr:\n%s", o.Kind, outCode(o), o.Stdout, o.Stderr)
	}
	for i, w := range want {
		if lines[i] != w {
			t.Errorf("line %d: %q, want %q", i, lines[i], w)
		}
	}
	if !strings.HasPrefix(lines[len(want)], "home="+f.Scratch+"/cmd-confined-") {
		t.Errorf("home %q", lines[len(want)])
	}
	if n := strings.Count(o.Stderr, "Permission denied"); n != 10 {
		t.Errorf("stderr has %d permission errors, want 10:\n%s", n, o.Stderr)
	}
	if _, err := os.Stat("/tmp/jr2-command-test"); err == nil {
		os.Remove("/tmp/jr2-command-test")
		t.Error("the child wrote /tmp")
	}
	whole, _ := wire.Marshal(a.State)
	values := []string{f.Values[commandtest.Named], "Bearer " + f.Values[commandtest.Named], string(placementKey)}
	for _, v := range f.Forbidden {
		values = append(values, v)
	}
	if leaks := efftest.Leaks(string(whole), values...); len(leaks) > 0 {
		t.Errorf("the answer holds %s", strings.Join(leaks, "; "))
	}
	logs := r.p.stdout.String() + r.p.stderr.String()
	if leaks := efftest.Leaks(logs, values...); len(leaks) > 0 || strings.Contains(logs, f.TopDir) || strings.Contains(logs, f.RunDir) {
		t.Errorf("the logs hold a value or a path: %v\n%s", leaks, logs)
	}
	// The child's stdout reaches r.p.stdout through a pipe another
	// goroutine copies: the settle line, written before the outcome could
	// be read, may still be in the pipe.
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(r.p.stdout.String(), "action=settle effect=confined ") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(r.p.stdout.String(), "jr2.effector action=start effect=confined kind=command method=- host=-\n") ||
		!strings.Contains(r.p.stdout.String(), "jr2.effector action=settle effect=confined outcome=exited\n") {
		t.Errorf("log lines:\n%s", r.p.stdout)
	}
	if left := f.Leftovers(); len(left) != 0 {
		t.Errorf("scratch left after the outcome: %v", left)
	}
}

// TestCommandTMPDIRIsPrivate: what one child writes in its TMPDIR another
// child, running beside it, can neither read nor list; each writes its own.
func TestCommandTMPDIRIsPrivate(t *testing.T) {
	r := newCommandRig(t, nil)
	marker := reaptest.Marker()
	reaptest.Cleanup(t, marker)
	r.start(t, "first", 30000, shell(`echo from-first > "$TMPDIR/note" && exec /bin/sleep "$M"`, marks("M", marker)))
	waitAlive(t, marker)
	notes, _ := filepath.Glob(filepath.Join(r.f.Scratch, "cmd-first-*", "tmp", "note"))
	if len(notes) != 1 {
		t.Fatalf("the first child's note: %v", notes)
	}
	firstTmp := filepath.Dir(notes[0])
	r.start(t, "second", 30000, &wire.Command{Argv: []string{"/bin/sh", "-c", `cat "$1"; echo "read=$?"; ls "$2" > /dev/null; echo "list=$?"
echo mine > "$TMPDIR/mine" && cat "$TMPDIR/mine"`, "-", notes[0], firstTmp}})
	o := r.settle(t, "second")
	if o.Kind != wire.OutcomeExited || o.Stdout != "read=1\nlist=2\nmine\n" {
		t.Errorf("second: %+v", o)
	}
	a, err := r.c.Stop(context.Background(), "first", r.p.addr)
	if err != nil || a.State.Outcome == nil || a.State.Outcome.Signal != "SIGTERM" {
		t.Fatalf("stop first: %v %+v", err, a)
	}
}

// TestCommandEscapees (rule 1): a setsid escapee of the command, and an
// escapee of that escapee, are dead once the command settled — when it
// ends (its keeper ends them) and when it times out (the keeper is killed
// and the Effector's settle loop ends what it held).
func TestCommandEscapees(t *testing.T) {
	r := newCommandRig(t, nil)
	for _, c := range []struct {
		name, tail string
		timeoutMs  int64
		kind       string
	}{
		{"the command ends", "sleep 0.5; echo done", 30000, wire.OutcomeExited},
		{"the command times out", "echo done; exec /bin/sleep 60", 1500, wire.OutcomeTimeout},
	} {
		t.Run(c.name, func(t *testing.T) {
			m1, m2 := reaptest.Marker(), reaptest.Marker()
			reaptest.Cleanup(t, m1)
			reaptest.Cleanup(t, m2)
			id := "esc-" + strconv.FormatInt(c.timeoutMs, 10)
			r.start(t, id, c.timeoutMs, shell(`setsid /bin/sh -c 'setsid /bin/sleep "$M2" & exec /bin/sleep "$M1"' > /dev/null 2>&1 &
`+c.tail, marks("M1", m1, "M2", m2)))
			waitAlive(t, m1, m2)
			o := r.settle(t, id)
			if o.Kind != c.kind || o.Stdout != "done\n" {
				t.Errorf("outcome %+v", o)
			}
			if live := alive(m1, m2); len(live) > 0 {
				t.Errorf("alive after the settle: %v", live)
			}
		})
	}
}

// TestCommandDaemonUnderItsKeeper (rule 1): a live command's daemon,
// under its keeper, lives through the settle of another command beside
// it; when its own command ends, its keeper ends the daemon and reports
// the command's own code.
func TestCommandDaemonUnderItsKeeper(t *testing.T) {
	r := newCommandRig(t, nil)
	ma, mb, gate := reaptest.Marker(), reaptest.Marker(), reaptest.Marker()
	for _, m := range []string{ma, mb, gate} {
		reaptest.Cleanup(t, m)
	}
	// A waits on a process of its own group the test ends (gate), so it
	// outlives B's settle by as long as the test needs.
	r.start(t, "a", 60000, shell(`setsid /bin/sleep "$MA" > /dev/null 2>&1 &
/bin/sleep "$GATE"; echo a-done; exit 7`, marks("MA", ma, "GATE", gate)))
	waitAlive(t, ma, gate)
	r.start(t, "b", 30000, shell(`setsid /bin/sleep "$MB" > /dev/null 2>&1 & echo b-done`, marks("MB", mb)))
	if o := r.settle(t, "b"); o.Kind != wire.OutcomeExited || outCode(o) != "0" || o.Stdout != "b-done\n" {
		t.Fatalf("b: %+v", o)
	}
	if live := alive(mb); len(live) > 0 {
		t.Errorf("b's daemon outlived b: %v", live)
	}
	if len(reaptest.Marked(ma)) != 1 {
		t.Fatalf("a's daemon did not live through b's settle")
	}
	for _, pid := range reaptest.Marked(gate) {
		unix.Kill(pid, unix.SIGKILL)
	}
	o := r.settle(t, "a")
	if o.Kind != wire.OutcomeExited || outCode(o) != "7" || o.Signal != "" || o.Stdout != "a-done\n" {
		t.Errorf("a: %+v (code %s)", o, outCode(o))
	}
	if live := alive(ma); len(live) > 0 {
		t.Errorf("a's daemon outlived a: %v", live)
	}
}

// TestCommandStop: a signed DELETE stops a command's group and answers
// like a poll; an unsigned one stops nothing; a DELETE that came before
// the start makes that start run nothing.
func TestCommandStop(t *testing.T) {
	r := newCommandRig(t, nil)
	cases := []struct {
		name, script string
		code, signal string
		stdout       string
	}{
		{"a program that catches SIGTERM", `trap 'echo caught; exit 3' TERM; /bin/sleep "$M" & wait`, "3", "SIGTERM", "caught\n"},
		{"a program SIGTERM ends", `exec /bin/sleep "$M"`, "-", "SIGTERM", ""},
		{"a program that ignores SIGTERM", `trap '' TERM; /bin/sleep "$M"; echo never`, "-", "SIGKILL", ""},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := reaptest.Marker()
			reaptest.Cleanup(t, m)
			id := "stop-" + strconv.Itoa(i)
			r.start(t, id, 60000, shell(c.script, marks("M", m)))
			waitAlive(t, m)
			a, err := r.c.Stop(context.Background(), id, r.p.addr)
			if err != nil || a.Status != 200 || a.State.State != wire.StateSettled {
				t.Fatalf("stop: %v %+v", err, a)
			}
			o := a.State.Outcome
			if o.Kind != wire.OutcomeExited || outCode(o) != c.code || o.Signal != c.signal || o.Stdout != c.stdout {
				t.Errorf("outcome %+v (code %s), want code %s signal %s stdout %q", o, outCode(o), c.code, c.signal, c.stdout)
			}
			if live := alive(m); len(live) > 0 {
				t.Errorf("alive after the stop: %v", live)
			}
			if r.p.logCount("jr2.effector action=stop effect="+id+"\n") != 1 {
				t.Errorf("no stop line:\n%s", r.p.stdout)
			}
		})
	}

	t.Run("an unsigned DELETE stops nothing", func(t *testing.T) {
		r.start(t, "unsigned", 30000, shell(`sleep 1; echo finished`, nil))
		req, _ := http.NewRequest("DELETE", "http://"+r.p.addr+"/effects/unsigned", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Fatalf("unsigned DELETE: %d", resp.StatusCode)
		}
		o := r.settle(t, "unsigned")
		if o.Kind != wire.OutcomeExited || outCode(o) != "0" || o.Signal != "" || o.Stdout != "finished\n" {
			t.Errorf("outcome %+v", o)
		}
		if r.p.logCount("action=stop effect=unsigned") != 0 {
			t.Errorf("a stop was logged")
		}
	})

	t.Run("a start after a DELETE of its id runs nothing", func(t *testing.T) {
		m := reaptest.Marker()
		reaptest.Cleanup(t, m)
		a, err := r.c.Stop(context.Background(), "early", r.p.addr)
		if err != nil || a.Status != 404 || a.State.State != wire.StateUnknown {
			t.Fatalf("early stop: %v %+v", err, a)
		}
		s, err := r.c.Start(context.Background(), "early", &wire.Start{Kind: wire.KindCommand, TimeoutMs: 30000,
			Command: &wire.Command{Argv: []string{"/bin/sleep", m}}})
		if err != nil || s.Status != 200 || s.State.State != wire.StateSettled || s.State.Outcome.Kind != wire.OutcomeUnknown ||
			!strings.HasPrefix(s.State.Outcome.Reason, "did not run: ") {
			t.Fatalf("start after the stop: %v %+v", err, s)
		}
		time.Sleep(200 * time.Millisecond)
		if live := alive(m); len(live) > 0 || len(r.f.Leftovers()) != 0 {
			t.Errorf("it ran: %v, scratch %v", live, r.f.Leftovers())
		}
	})
}

// TestCommandFailClosed (ADR-0068, fail-closed at the pod): on a node
// whose Landlock probe fails, an Effector that holds commands ends before
// it is ready, naming the node on stderr and in its termination message;
// one without commands serves and answers a command start 400 with the
// same reason.
func TestCommandFailClosed(t *testing.T) {
	const reason = "landlock: unavailable on node node-a (ENOSYS: not supported by kernel or not enabled at boot time)"
	f := commandtest.New(t, placementKey, `{"placement":"sandbox-1","commands":true}`)
	termination := filepath.Join(f.RunDir, "termination-log")
	if err := os.WriteFile(termination, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	launch := func(env map[string]string) *exec.Cmd {
		cmd := exec.Command(self, binary)
		cmd.Env = []string{denyLandlockEnv + "=1", "JR2_EFFECTOR_PORT=" + strconv.Itoa(freePort(t)),
			"JR2_EFFECTOR_TEST_TERMINATION_LOG=" + termination}
		for k, v := range env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		return cmd
	}

	t.Run("with commands", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		cmd := launch(f.Env())
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		cmd.Run()
		if code := cmd.ProcessState.ExitCode(); code != 1 {
			t.Fatalf("exit %d; stderr %q", code, stderr.String())
		}
		if stdout.String() != "jr2.effector action=exit reason=landlock\n" {
			t.Errorf("stdout %q", stdout.String())
		}
		if stderr.String() != "effector: "+reason+"\n" {
			t.Errorf("stderr %q", stderr.String())
		}
		if b, _ := os.ReadFile(termination); string(b) != reason+"\n" {
			t.Errorf("termination message %q", b)
		}
	})

	t.Run("without commands", func(t *testing.T) {
		os.WriteFile(f.Config, []byte(`{"placement":"sandbox-1","commands":false}`), 0o600)
		os.WriteFile(termination, nil, 0o600)
		cmd := launch(f.Env())
		var stdout efftest.Buffer
		cmd.Stdout = &stdout
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { cmd.Process.Kill(); cmd.Wait() }()
		waitFor(t, func() bool { return strings.HasPrefix(stdout.String(), "jr2.effector ready ") })
		port := ""
		for _, kv := range cmd.Env {
			if v, ok := strings.CutPrefix(kv, "JR2_EFFECTOR_PORT="); ok {
				port = v
			}
		}
		c := &client.Client{Key: placementKey, Addresses: func(context.Context) ([]string, error) { return []string{"127.0.0.1:" + port}, nil }}
		a, err := c.Start(context.Background(), "cmd", &wire.Start{Kind: wire.KindCommand, Command: &wire.Command{Argv: []string{"true"}}})
		if err != nil || a.Status != 400 || a.Error.Error != reason {
			t.Fatalf("a command start: %v %+v", err, a)
		}
		if b, _ := os.ReadFile(termination); len(b) != 0 {
			t.Errorf("a serving Effector wrote a termination message: %q", b)
		}
	})
}

// TestHundredCommands: 100 commands at once, each leaving a setsid daemon
// behind, all settle, and then no process of any of them is alive (a scan
// of /proc) and no scratch is left.
func TestHundredCommands(t *testing.T) {
	r := newCommandRig(t, nil)
	m := reaptest.Marker()
	reaptest.Cleanup(t, m)
	t0 := time.Now()
	runHundred(t, r, "h", m)
	t.Logf("100 concurrent commands settled in %v", time.Since(t0).Round(time.Millisecond))
	if live := alive(m); len(live) > 0 {
		t.Errorf("survivors: %v", live)
	}
	if pids := commandtest.WithEnv("HOME=" + r.f.Scratch + "/cmd-"); len(pids) > 0 {
		t.Errorf("processes of a command still alive: %v", pids)
	}
	if left := r.f.Leftovers(); len(left) != 0 {
		t.Errorf("%d scratch directories left", len(left))
	}
}

// runHundred starts 100 commands that each leave a daemon holding marker
// and waits for every outcome.
func runHundred(t testing.TB, r *commandRig, prefix, marker string) {
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := prefix + strconv.Itoa(i)
			a, err := r.c.Start(context.Background(), id, &wire.Start{Kind: wire.KindCommand, TimeoutMs: 120000,
				Command: &wire.Command{Argv: []string{"/bin/sh", "-c", `setsid /bin/sleep ` + marker + ` > /dev/null 2>&1 & echo ok`}}})
			if err != nil || a.Status != 202 {
				errs <- fmt.Errorf("start %s: %v %+v", id, err, a)
				return
			}
			for {
				a, err = r.c.Poll(context.Background(), id, r.p.addr)
				if err != nil {
					errs <- fmt.Errorf("poll %s: %v", id, err)
					return
				}
				if a.State.State == wire.StateSettled {
					if o := a.State.Outcome; o.Kind != wire.OutcomeExited || outCode(o) != "0" || o.Stdout != "ok\n" {
						errs <- fmt.Errorf("%s: %s code %s signal %q stdout %q stderr %q", id, o.Kind, outCode(o), o.Signal, o.Stdout, o.Stderr)
					}
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestCommandSecretChangedOnDisk: a secret's file rewritten after the
// Effector read it (a Secret rotated: the kubelet swaps the file, and
// the Effector holds the old value until its pod rolls) is not given to a
// command by secretPath: its output would not be scrubbed for the new
// value. The command does not run, says why, and the answer holds no
// form of the new value.
func TestCommandSecretChangedOnDisk(t *testing.T) {
	r := newCommandRig(t, nil)
	rotated := "SENTINEL-rotated-" + commandtest.Random() + "-value"
	file := filepath.Join(r.f.Secrets, commandtest.Named)
	if err := os.WriteFile(file+".new", []byte(rotated+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(file+".new", file); err != nil {
		t.Fatal(err)
	}
	r.start(t, "rotated", 30000, shell(`cat "$F"; echo; echo "env=$T"`, map[string]wire.Value{
		"F": {wire.SecretPath(commandtest.Named)}, "T": {wire.Secret(commandtest.Named)},
	}))
	o := r.settle(t, "rotated")
	whole, _ := wire.Marshal(o)
	if leaks := efftest.Leaks(string(whole), rotated); len(leaks) > 0 {
		t.Errorf("the answer holds the rotated value: %s\n%s", strings.Join(leaks, "; "), whole)
	}
	if o.Kind != wire.OutcomeUnknown || !strings.HasPrefix(o.Reason, "did not run: secret TOKEN: ") {
		t.Errorf("outcome %s %q; want unknown, did not run, naming the secret", o.Kind, o.Reason)
	}
	logs := r.p.stdout.String() + r.p.stderr.String()
	if leaks := efftest.Leaks(logs, rotated); len(leaks) > 0 {
		t.Errorf("the logs hold the rotated value: %v", leaks)
	}
}
