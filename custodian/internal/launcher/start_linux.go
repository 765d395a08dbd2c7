//go:build linux

package launcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Grace is how long Run waits, after forwarding a signal or after its
// context ends, before it kills the child.
var Grace = 10 * time.Second

// OutputGrace is how long the command's output is still read after it
// ended, while a descendant it left holds it open.
const OutputGrace = time.Second

// Child is a started, contained command.
type Child struct {
	cmd *exec.Cmd
}

// Pid is the child's process id.
func (c *Child) Pid() int { return c.cmd.Process.Pid }

// Signal sends sig to the child.
func (c *Child) Signal(sig os.Signal) error { return c.cmd.Process.Signal(sig) }

// Wait waits for the child and returns its exit code: its status, or 128
// plus the signal that ended it.
func (c *Child) Wait() (int, error) {
	err := c.cmd.Wait()
	if errors.Is(err, exec.ErrWaitDelay) {
		err = nil // a leftover held the output past OutputGrace: the command's own end is known
	}
	st, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok {
		return -1, fmt.Errorf("launcher: wait: %w", err)
	}
	if st.Signaled() {
		return 128 + int(st.Signal()), nil
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return st.ExitStatus(), fmt.Errorf("launcher: wait: %w", err)
	}
	return st.ExitStatus(), nil
}

// Start starts s's command contained in n. It returns once the command has
// been executed, or with a *ChildError naming the step that failed (the
// command did not run).
func (n *Network) Start(s Spec) (*Child, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	for _, l := range [][]string{s.ReadPaths, s.WritePaths} {
		for _, p := range l {
			if _, err := os.Stat(p); err != nil {
				return nil, fmt.Errorf("launcher: path %q: %w; remove it from the policy or create it", p, errors.Unwrap(err))
			}
		}
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("launcher: %w", err)
	}
	netns, err := os.Open(filepath.Join(netnsDir, n.Name))
	if err != nil {
		return nil, fmt.Errorf("launcher: open the child's namespace: %w", err)
	}
	defer netns.Close()
	cfgR, cfgW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("launcher: %w", err)
	}
	defer cfgR.Close()
	defer cfgW.Close()
	statR, statW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("launcher: %w", err)
	}
	defer statR.Close()
	defer statW.Close()

	cmd := exec.Command(self, ChildArg)
	cmd.Env = []string{} // the child's environment travels in the config
	cmd.Stdin, cmd.Stdout, cmd.Stderr = s.Stdin, s.Stdout, s.Stderr
	cmd.ExtraFiles = []*os.File{cfgR, statW, netns} // fdConfig, fdStatus, fdNetns
	// A session of its own: the runner's terminal is not the child's
	// controlling terminal, so it cannot type into it (TIOCSTI) a line
	// the runner's shell would run, uncontained, after the run. Signals
	// from that terminal reach the runner, which forwards them (Run).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setsid: true}
	// A descendant that keeps the output open does not hold the run: once
	// the command has ended, its output is read for OutputGrace more, then
	// closed, and Run kills what is left.
	cmd.WaitDelay = OutputGrace
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("launcher: start the child: %w", err)
	}
	cfgR.Close()
	statW.Close()
	cfg := childConfig{
		Argv: s.Argv, Env: s.Env, Dir: s.Dir,
		ReadPaths: s.ReadPaths, WritePaths: s.WritePaths, ResolvConf: n.ResolvConf,
	}
	werr := json.NewEncoder(cfgW).Encode(cfg)
	cfgW.Close()
	report, rerr := io.ReadAll(statR) // EOF: execve closed the descriptor
	c := &Child{cmd: cmd}
	if len(report) == 0 && werr == nil && rerr == nil {
		// No report: execve succeeded (or the child died before it could
		// write one; then Wait gives its code, and nothing was executed).
		return c, nil
	}
	code, _ := c.Wait()
	ce := &ChildError{Step: "config", Code: code}
	switch {
	case len(report) > 0:
		step, reason, _ := strings.Cut(string(report), "\x00")
		ce.Step, ce.Reason = step, strings.TrimSpace(reason)
	case werr != nil:
		ce.Reason = werr.Error()
	default:
		ce.Reason = rerr.Error()
	}
	return nil, ce
}

// forwarded are the signals Run passes to the child.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// Run starts s's command contained in n and waits for it. While it waits,
// the runner's SIGINT, SIGTERM, SIGHUP and SIGQUIT go to the child instead
// of ending the runner; a second signal, the context's end or Grace after
// the first signal kill it. It returns the child's exit code once the
// child is gone, and every process it left in its namespace killed
// (KillLeft), so the caller's cleanup always runs and nothing of the run
// outlives it.
//
// The caller's deferred Network.Close so runs on a signal as on a normal
// exit and a panic in the caller's goroutine. What the command left (a
// background job, a setsid daemon) is found in the child's network
// namespace, which the seccomp filter does not let it leave. A runner
// killed outright (SIGKILL, a panic in another goroutine) leaves its
// namespaces behind: Sweep, called at start, kills what runs in those
// whose runner is gone and removes them. The child is started with a
// parent-death signal (SIGKILL).
func (n *Network) Run(ctx context.Context, s Spec) (int, error) {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)
	c, err := n.Start(s)
	if err != nil {
		return -1, err
	}
	done := make(chan struct{})
	var code int
	var werr error
	go func() {
		code, werr = c.Wait()
		close(done)
	}()
	var deadline <-chan time.Time
	ctxDone := ctx.Done()
	for {
		select {
		case <-done:
			// What the command left (a background job, a daemon) ends
			// with it.
			return code, errors.Join(werr, n.KillLeft())
		case sig := <-sigs:
			if deadline != nil {
				c.Signal(syscall.SIGKILL)
				continue
			}
			c.Signal(sig)
			deadline = time.After(Grace)
		case <-ctxDone:
			ctxDone = nil
			c.Signal(syscall.SIGTERM)
			deadline = time.After(Grace)
		case <-deadline:
			c.Signal(syscall.SIGKILL)
		}
	}
}
