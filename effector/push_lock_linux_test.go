package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"jr2.dev/boundary/effector/internal/commandkind/commandtest"
	"jr2.dev/boundary/effector/internal/config"
	"jr2.dev/boundary/effector/internal/pushkind/pushtest"
	"jr2.dev/boundary/effector/internal/wire"
)

// holder is a loopback listener a credentialed command's child connects
// to and blocks on until the test lets it go: its connection is the proof
// that the child runs, and its end the test's.
type holder struct {
	ln    net.Listener
	conns chan net.Conn
}

func newHolder(t *testing.T) *holder {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &holder{ln: ln, conns: make(chan net.Conn, 4)}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			h.conns <- c
		}
	}()
	return h
}

// command is a credentialed command whose child (known by marker in its
// environment) connects to the holder and waits for the connection's end.
func (h *holder) command(marker string) *wire.Command {
	port := h.ln.Addr().(*net.TCPAddr).Port
	return &wire.Command{Argv: []string{"/bin/bash", "-c", fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%d; read -r -u 3 x; echo done", port)},
		Env: map[string]wire.Value{"JR2_TEST_MARK": {wire.Text(marker)}}}
}

// recv is what ch gives; a test that waits a minute for it fails rather
// than hangs (a guard, not a measure).
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(time.Minute):
		t.Fatalf("%s never came", what)
	}
	var zero T
	return zero
}

// sampler scans /proc until stopped: in each sample, whether the push's
// gpg-agent (named by the scratch in its command line) is alive, and
// whether a process of the command (its marker in the environment) is.
type sampler struct {
	stop            atomic.Bool
	done            chan struct{}
	mu              sync.Mutex
	n, both, agents int
	children        int
}

func sample(scratch, marker string) *sampler {
	s := &sampler{done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for !s.stop.Load() {
			agent := len(pushtest.AgentsUnder(scratch)) > 0
			child := len(commandtest.WithEnv(marker)) > 0
			s.mu.Lock()
			s.n++
			if agent {
				s.agents++
			}
			if child {
				s.children++
			}
			if agent && child {
				s.both++
			}
			s.mu.Unlock()
		}
	}()
	return s
}

func (s *sampler) end() *sampler { s.stop.Store(true); <-s.done; return s }

func (s *sampler) agentSeen() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.agents > 0 }

// TestClassLockThroughTheBinary (ADR-0068 rule 2): a GPG push
// and a credentialed command through the real effector. A command started
// while a GPG push holds the class (the push held at the remote, before
// its agent) runs only after the push's gpg-agent is gone; a GPG push
// started while a command's child runs starts no agent and reaches no
// remote until that child is gone. A sampler of /proc never sees a
// command's process alive beside a gpg-agent of the push.
func TestClassLockThroughTheBinary(t *testing.T) {
	if _, err := os.Stat("/usr/bin/gpg-agent"); err != nil {
		t.Skip("SKIPPED, NOT PROVEN: no /usr/bin/gpg-agent (apt-get install gnupg)")
	}
	var gateOn atomic.Bool
	gated, gateOpen := make(chan struct{}, 64), make(chan struct{})
	var requests atomic.Int64
	token := "SENTINEL-lock-token-" + commandtest.Random()
	remote := pushtest.NewHTTPSRemote(t, token, func() {
		requests.Add(1)
		if gateOn.Load() {
			gated <- struct{}{}
			<-gateOpen
		}
	})
	secret, verifyHome := pushtest.GPGKey(t)
	entry := remote.Entry("web")
	entry.Files[config.GitSignGPG] = secret
	r := newPushRig(t, `{"placement":"sandbox-1","commands":true,"pushes":[{"slot":"docs","sign":"gpgKey"}]}`,
		map[string]string{"JR2_CA_FILE": remote.CAFile, "JR2_EFFECTOR_TEST_POLL_MS": "300"}, entry)
	for i := 0; i < 4; i++ {
		r.f.Commit(t, map[string]string{fmt.Sprintf("c%d.txt", i): "c\n"}, fmt.Sprintf("commit %d", i))
	}
	h := newHolder(t)

	t.Run("command during the push", func(t *testing.T) {
		marker := "jr2-lock-a-" + commandtest.Random()
		s := sample(r.f.Scratch, marker)
		defer s.end()
		gateOn.Store(true)
		pin, _ := r.startPush(t, "gpg-a", 60000, slot("docs", remote.URL, "web", "refs/heads/a"))
		recv(t, gated, "the push at the remote") // the push holds the class and waits there
		a, err := r.c.Start(context.Background(), "cmd-a", &wire.Start{Kind: wire.KindCommand, TimeoutMs: 60000, Command: h.command(marker)})
		if err != nil || a.Status != 202 {
			t.Fatalf("command start: %v %+v", err, a)
		}
		// One poll's hold while the push is held: the command must not run.
		if p, err := r.c.Poll(context.Background(), "cmd-a", r.p.addr); err != nil || p.State.State != wire.StateRunning {
			t.Fatalf("poll: %v %+v", err, p)
		}
		if pids := commandtest.WithEnv(marker); len(pids) != 0 || len(h.conns) != 0 {
			t.Fatalf("the command runs while the GPG push holds the class: %v", pids)
		}
		gateOn.Store(false)
		close(gateOpen)
		conn := recv(t, h.conns, "the command's child") // it runs now
		if agents := pushtest.AgentsUnder(r.f.Scratch); len(agents) != 0 || !s.agentSeen() {
			t.Fatalf("the command's child runs with the agent alive (%v) or before it was ever seen (%v)", agents, s.agentSeen())
		}
		conn.Close()
		out, _ := r.settled(t, "gpg-a")
		if out.Kind != wire.OutcomePushed || out.Commit == pin {
			t.Fatalf("push outcome %+v", out)
		}
		if err := pushtest.VerifyCommit(t, remote.Repo, out.Commit, []string{"GNUPGHOME=" + verifyHome}); err != nil {
			t.Errorf("the signed tip does not verify: %v", err)
		}
		if o := settle(t, r.c, "cmd-a", r.p.addr); o.Kind != wire.OutcomeExited || o.Stdout != "done\n" {
			t.Errorf("command outcome %+v", o)
		}
		if s.end(); s.both != 0 {
			t.Errorf("%d of %d samples saw a command's process beside a gpg-agent", s.both, s.n)
		}
		t.Logf("%d samples, %d with the agent, %d with the command's process", s.n, s.agents, s.children)
	})

	t.Run("push during the command", func(t *testing.T) {
		marker := "jr2-lock-b-" + commandtest.Random()
		s := sample(r.f.Scratch, marker)
		defer s.end()
		a, err := r.c.Start(context.Background(), "cmd-b", &wire.Start{Kind: wire.KindCommand, TimeoutMs: 60000, Command: h.command(marker)})
		if err != nil || a.Status != 202 {
			t.Fatalf("command start: %v %+v", err, a)
		}
		conn := recv(t, h.conns, "the command's child")
		before := requests.Load()
		pin, _ := r.startPush(t, "gpg-b", 60000, slot("docs", remote.URL, "web", "refs/heads/b"))
		if p, err := r.c.Poll(context.Background(), "gpg-b", r.p.addr); err != nil || p.State.State != wire.StateRunning {
			t.Fatalf("poll: %v %+v", err, p)
		}
		if agents := pushtest.AgentsUnder(r.f.Scratch); len(agents) != 0 || requests.Load() != before || s.agentSeen() {
			t.Fatalf("the GPG push ran beside the command's child: agents %v, remote requests %d", agents, requests.Load()-before)
		}
		conn.Close()
		if o := settle(t, r.c, "cmd-b", r.p.addr); o.Kind != wire.OutcomeExited {
			t.Errorf("command outcome %+v", o)
		}
		out, _ := r.settled(t, "gpg-b")
		if out.Kind != wire.OutcomePushed || out.Commit == pin {
			t.Fatalf("push outcome %+v", out)
		}
		if s.end(); s.both != 0 || s.agents == 0 {
			t.Errorf("%d of %d samples saw a command's process beside a gpg-agent; %d saw the agent", s.both, s.n, s.agents)
		}
		t.Logf("%d samples, %d with the agent, %d with the command's process", s.n, s.agents, s.children)
	})
	if pids := pushtest.AgentsUnder(r.f.Scratch); len(pids) != 0 {
		t.Errorf("gpg-agent left running: %v", pids)
	}
	if left := r.f.Leftovers(); len(left) != 0 {
		t.Errorf("scratch left behind: %v", left)
	}
}
