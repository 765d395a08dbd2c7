package commandkind

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"jr2.dev/boundary/effector/internal/classlock"
	"jr2.dev/boundary/effector/internal/confine"
	"jr2.dev/boundary/effector/internal/effect"
	"jr2.dev/boundary/effector/internal/keep"
	"jr2.dev/boundary/effector/internal/oserr"
	"jr2.dev/boundary/effector/internal/reap"
	"jr2.dev/boundary/effector/internal/wire"
	"jr2.dev/boundary/internal/effectorkey"
)

// runner is one run of a prepared command.
type runner struct {
	k       *Kind
	p       *prepared
	sc      *effect.Scrubber
	key     string // the effect's name in the Tracker
	dir     string // the effect's scratch directory, once made
	settled bool
}

// run is Plan.Run: the class lock, the scratch, the checkout, the keeper,
// the stop and the timeout, the settle loop, and the outcome.
func (k *Kind) run(ctx context.Context, sc *effect.Scrubber, p *prepared) wire.Outcome {
	r := &runner{k: k, p: p, sc: sc, key: k.key(p.id)}
	deadline := time.Now().Add(p.timeout)
	// Before the program starts, a stop or the deadline ends the wait for
	// the lock and the checkout.
	pre, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	go func() {
		select {
		case <-p.stop:
			cancel()
		case <-pre.Done():
		}
	}()
	release, err := k.o.Lock.Acquire(pre, classlock.Command)
	if err != nil {
		return r.notStarted(ctx, "waiting for GPG pushes to end")
	}
	// Deferred calls run last first: the lock is released after the settle
	// loop, so no descendant of this command is alive when a push's
	// gpg-agent starts.
	defer release()
	defer r.settle()
	if err := r.makeScratch(); err != nil {
		return notRun(err.Error())
	}
	co, err := r.checkout(pre)
	if err != nil {
		if pre.Err() != nil {
			return r.notStarted(ctx, "checking out the worktree")
		}
		return notRun(err.Error())
	}
	wd, err := r.workdir(co.sha)
	if err != nil {
		return notRun(err.Error())
	}
	reads, err := r.heldFiles()
	if err != nil {
		return notRun(err.Error())
	}
	if pre.Err() != nil {
		return r.notStarted(ctx, "checking out the worktree")
	}
	return r.exec(ctx, deadline, co, wd, reads)
}

// heldFiles resolves each secret file the command reads by secretPath
// and checks that it still holds the value the effect started with (the
// Effector's value when the start was prepared): output is scrubbed for
// the values the Effector holds, so a file rewritten since (a rotation the
// Effector has not read yet, or a file changed in place) is given to no
// command. It returns the files with links resolved, which the confiner's
// rules bind to: a file swapped in after the check is a file the child
// cannot read.
func (r *runner) heldFiles() ([]string, error) {
	out := make([]string, 0, len(r.p.reads))
	for _, f := range r.p.reads {
		name := filepath.Base(f)
		held := r.p.held[name]
		real, err := filepath.EvalSymlinks(f)
		var b []byte
		if err == nil {
			b, err = readHead(real, len(held)+3)
		}
		if err != nil {
			return nil, fmt.Errorf("secret %s: its file cannot be read (%s)", name, oserr.Why(err))
		}
		if !bytes.Equal(effectorkey.TrimNewline(b), held) {
			return nil, fmt.Errorf("secret %s: its file no longer holds the value this effect started with (the secret rotated, or its file was changed), and an output is scrubbed only for what the Effector holds; start the effect again once the Effector logged action=reload", name)
		}
		out = append(out, real)
	}
	return out, nil
}

// notStarted is the outcome of a command that a stop, its deadline or the
// process's end caught before its program started: nothing was signalled.
func (r *runner) notStarted(ctx context.Context, doing string) wire.Outcome {
	switch {
	case r.p.stopped():
		return notRun("stopped before it started")
	case ctx.Err() != nil:
		return notRun("the Effector is stopping")
	}
	return wire.Outcome{Kind: wire.OutcomeTimeout,
		Reason: fmt.Sprintf("the command did not start within its %d ms (%s); it did not run", r.p.timeout.Milliseconds(), doing)}
}

// makeScratch makes the effect's directory under the scratch root: the
// child's HOME and TMPDIR, and the Effector's git directory. The checkout
// is made by the clone.
func (r *runner) makeScratch() error {
	dir, err := os.MkdirTemp(r.k.o.Scratch, "cmd-"+r.p.id+"-")
	if err != nil {
		return fmt.Errorf("its scratch could not be made (%s)", oserr.Why(err))
	}
	r.dir = dir
	for _, d := range []string{"home", "tmp", "git"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			return fmt.Errorf("its scratch could not be made (%s)", oserr.Why(err))
		}
	}
	return nil
}

// workdir is the start's dir in the checkout, links resolved; it must be a
// directory inside it.
func (r *runner) workdir(sha string) (string, error) {
	root, err := filepath.EvalSymlinks(filepath.Join(r.dir, "checkout"))
	if err != nil {
		return "", fmt.Errorf("the checkout is missing (%s)", oserr.Why(err))
	}
	real, err := filepath.EvalSymlinks(filepath.Join(root, r.p.dir))
	if err == nil {
		var st os.FileInfo
		if st, err = os.Stat(real); err == nil && !st.IsDir() {
			err = errors.New("not a directory")
		}
	}
	if err == nil && real != root && !strings.HasPrefix(real, root+"/") {
		err = errors.New("it leaves the checkout")
	}
	if err != nil {
		return "", fmt.Errorf("dir %q is not a directory of commit %s (%s)", r.p.dir, sha, oserr.Why(err))
	}
	return real, nil
}

// readHead reads at most n bytes of the regular file at path, without
// following a link at its end or waiting on a FIFO.
func readHead(path string, n int) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	return io.ReadAll(io.LimitReader(f, int64(n)))
}

// keeperArgs is `keep --report-fd 3 -- CONFINE … -- ARGV` (CONFINE:
// confine.Argv, the small binary or `SELF confine`); reads
// are the secret files the child may read (heldFiles).
func (r *runner) keeperArgs(reads []string) []string {
	args := append([]string{"keep", "--report-fd", "3", "--"}, confine.Argv(r.k.o.Self)...)
	for _, d := range []string{"checkout", "home", "tmp"} {
		args = append(args, "--scratch", filepath.Join(r.dir, d))
	}
	for _, f := range reads {
		args = append(args, "--read", f)
	}
	for _, d := range r.k.o.Deny {
		args = append(args, "--deny", d)
	}
	args = append(args, "--node", r.k.o.Node, "--")
	return append(args, r.p.argv...)
}

// exec runs the program under its keeper and confiner and waits for it,
// its stop or its deadline; then the output is closed, the effect settled,
// and the outcome built.
func (r *runner) exec(ctx context.Context, deadline time.Time, co checkout, wd string, reads []string) wire.Outcome {
	var pipes [3][2]*os.File // stdout, stderr, report: read, write
	for i := range pipes {
		rd, wr, err := os.Pipe()
		if err != nil {
			closeAll(pipes[:])
			return notRun("a pipe could not be made: " + err.Error())
		}
		pipes[i] = [2]*os.File{rd, wr}
	}
	cmd := exec.Command(r.k.o.Self, r.keeperArgs(reads)...)
	cmd.Env = baseEnv(r.p.env, filepath.Join(r.dir, "home"), filepath.Join(r.dir, "tmp"))
	cmd.Dir = wd
	cmd.Stdout, cmd.Stderr = pipes[0][1], pipes[1][1]
	cmd.ExtraFiles = []*os.File{pipes[2][1]} // fd 3
	keeper, err := r.k.o.Tracker.StartChild(r.key, cmd)
	for i := range pipes {
		pipes[i][1].Close()
	}
	if err != nil {
		closeAll(pipes[:])
		return notRun("the keeper could not start: " + err.Error())
	}
	stdout, stderr := newCapture(r.sc, r.p.max), newCapture(r.sc, r.p.max)
	drained := make(chan struct{}, 2)
	for i, c := range []*capture{stdout, stderr} {
		go func() { drain(pipes[i][0], c); drained <- struct{}{} }()
	}
	report := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(pipes[2][0], 4<<10))
		pipes[2][0].Close()
		report <- string(b)
	}()

	sent, timedOut := r.watch(ctx, keeper, deadline)
	_ = keeper.Wait()
	// A descendant that keeps the output open does not hold the outcome.
	closeAt := time.Now().Add(r.k.o.OutputGrace)
	for i := range pipes {
		_ = pipes[i][0].SetReadDeadline(closeAt)
	}
	line := <-report
	r.settle()
	<-drained
	<-drained

	so, cutOut := stdout.result()
	se, cutErr := stderr.result()
	if timedOut {
		return wire.Outcome{Kind: wire.OutcomeTimeout, Reason: fmt.Sprintf("the command ran past its %d ms", r.p.timeout.Milliseconds()),
			Stdout: so, Stderr: se}
	}
	out := wire.Outcome{Kind: wire.OutcomeExited, Stdout: so, Stderr: se, Truncated: cutOut || cutErr, Dirty: co.dirty}
	rep, err := keep.ParseReport(line)
	switch {
	case err == nil && rep.Failed != "":
		// The keeper failed (it says why on the command's stderr): before
		// its child started, or after, while it ended what the child left.
		// Which, the report does not say; the keeper's own code is what
		// there is (126).
		code := cmd.ProcessState.ExitCode()
		out.Code = &code
	case err == nil && rep.Signal != "":
		out.Signal = rep.Signal
	case err == nil:
		out.Code = &rep.Code
	default:
		// No report: the keeper was killed (a stop's SIGKILL, the
		// deadline's) before its child's end was known. Its own end is
		// what there is.
		ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
		if ws.Signaled() {
			out.Signal = unix.SignalName(ws.Signal())
		} else {
			code := ws.ExitStatus()
			out.Code = &code
		}
	}
	if sent != "" {
		// A stopped command names the last signal the stop sent; its code
		// stays when the program caught SIGTERM and exited with one.
		out.Signal = sent
	}
	return out
}

// watch waits for the keeper's end. A stop sends SIGTERM to the keeper's
// group (the keeper forwards it once to its child's), and SIGKILL when the
// grace is over; the deadline, and the process going away, send SIGKILL.
// It returns the last signal a stop sent, and whether the deadline
// passed first.
func (r *runner) watch(ctx context.Context, keeper *reap.Child, deadline time.Time) (sent string, timedOut bool) {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	stop, done := r.p.stop, ctx.Done()
	var grace <-chan time.Time
	for {
		select {
		case <-keeper.Ended():
			return sent, timedOut
		case <-stop:
			stop = nil
			keeper.Signal(unix.SIGTERM)
			sent = "SIGTERM"
			grace = time.After(r.k.o.Grace)
		case <-grace:
			grace = nil
			keeper.Signal(unix.SIGKILL)
			sent = "SIGKILL"
		case <-timer.C:
			keeper.Signal(unix.SIGKILL)
			if sent != "" {
				sent = "SIGKILL"
			} else {
				timedOut = true
			}
		case <-done:
			done = nil
			keeper.Signal(unix.SIGKILL)
			sent = "SIGKILL"
		}
	}
}

// settleRounds bounds the settle loop's retries (20 ms apart).
const settleRounds = 50

// settle runs the settle loop for the effect once, then removes its
// scratch: nothing reads it after the loop, so it goes before the outcome
// exists (earlier than ADR-0068's "when the outcome is read").
func (r *runner) settle() {
	if r.settled {
		return
	}
	r.settled = true
	// A scan of /proc fails only on a process caught mid-exit or a /proc
	// that cannot be read: the loop is run again until it completes, for a
	// while. The effect is no longer live after the first round.
	for i := 0; i < settleRounds && r.k.o.Tracker.Settle(r.key) != nil; i++ {
		time.Sleep(20 * time.Millisecond)
	}
	if r.dir != "" {
		removeTree(r.dir)
	}
}

// removeTree removes dir, making each directory in it writable first when
// the child left one that is not.
func removeTree(dir string) {
	if os.RemoveAll(dir) == nil {
		return
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	_ = os.RemoveAll(dir)
}

func closeAll(pipes [][2]*os.File) {
	for _, p := range pipes {
		for _, f := range p {
			if f != nil {
				f.Close()
			}
		}
	}
}
