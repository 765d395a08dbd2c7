package pushkind

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"jr2.dev/boundary/effector/internal/classlock"
	"jr2.dev/boundary/effector/internal/commandkind/commandtest"
	"jr2.dev/boundary/effector/internal/config"
	"jr2.dev/boundary/effector/internal/confine"
	"jr2.dev/boundary/effector/internal/effect"
	"jr2.dev/boundary/effector/internal/pushkind/pushtest"
	"jr2.dev/boundary/effector/internal/reap"
	"jr2.dev/boundary/effector/internal/wire"
	"jr2.dev/boundary/filter/scrub"
	"jr2.dev/boundary/internal/testkit/landlocktest"
)

// TestMain makes the test binary the Effector's own binary: `confine` and
// `credential` as its first word run those sub-commands, as `effector`
// does; otherwise it is the Effector, the subreaper of its descendants.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "confine":
			os.Exit(confine.Main(os.Args[2:]))
		case "credential":
			os.Exit(CredentialMain(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
		}
	}
	if err := reap.SetChildSubreaper(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	dir, err := copySelf()
	if err != nil {
		fmt.Fprintln(os.Stderr, "SKIPPED, NOT PROVEN: the test binary could not be copied where a confined git may run it:", err)
	}
	code := m.Run()
	if dir != "" {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

// self is the test binary's copy that the push runs as `effector`: the
// confined git runs `credential` from it, and the build's own directory
// (under /tmp) is denied to it. A top-level directory of its own is a
// system path to the confiner.
var self string

func copySelf() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("/", "jr2-pushkind-bin-")
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(exe)
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "effector"), b, 0o755)
	}
	if err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	self = filepath.Join(dir, "effector")
	return dir, nil
}

// tracker is every test's one Tracker, as the Effector has one: a remote's
// server runs as an effect of its own in it, so a push's settle loop (which
// ends every child of this process in no live effect's group) spares it.
var tracker = reap.NewTracker()

// serve starts a remote's server in the tracker until the test ends.
func serve(t testing.TB, name string, cmd *exec.Cmd) {
	t.Helper()
	key := "remote/" + name + "/" + commandtest.Random()
	if err := tracker.Start(key, cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = tracker.Wait(cmd)
		_ = tracker.Settle(key)
	})
}

var testKey = []byte("0123456789abcdef0123456789abcdef")

// The remotes and keys are package pushtest's; a remote's server runs in
// the tracker (serve), as an effect of its own.
func run(t testing.TB, dir string, env []string, prog string, args ...string) string {
	t.Helper()
	return pushtest.Run(t, dir, env, prog, args...)
}

func sshKey(t testing.TB, dir, name string) (priv, pub []byte) {
	t.Helper()
	return pushtest.SSHKey(t, dir, name)
}

func remoteRef(t testing.TB, repo, ref string) string {
	t.Helper()
	return pushtest.RemoteRef(t, repo, ref)
}

func newSSHRemote(t testing.TB) *pushtest.SSHRemote {
	t.Helper()
	return pushtest.NewSSHRemote(t, serve)
}

func newHTTPSRemote(t testing.TB, token string) *pushtest.HTTPSRemote {
	t.Helper()
	return pushtest.NewHTTPSRemote(t, token, nil)
}

// rig is a push kind over a commandtest fixture, as the Effector wires it.
type rig struct {
	f    *commandtest.Fixture
	k    *Kind
	tr   *reap.Tracker
	lock *classlock.Lock
	held []scrub.Secret
}

func newRig(t testing.TB, caFile string, pushes []config.Push, entries ...config.GitEntry) *rig {
	t.Helper()
	landlocktest.Require(t, 1)
	f := commandtest.New(t, testKey, `{"placement":"sandbox-1"}`)
	if self == "" {
		t.Skip("SKIPPED, NOT PROVEN: no copy of the test binary a confined git may run")
	}
	r := &rig{f: f, tr: tracker, lock: &classlock.Lock{}}
	r.k = New(Options{Pushes: pushes, Entries: entries, Work: f.Work, Scratch: f.Scratch, Repos: f.Repos, CAFile: caFile,
		Deny: f.OwnPaths(), Node: "node-a", Self: self, Tracker: r.tr, Lock: r.lock, AgentGrace: time.Second})
	r.held = []scrub.Secret{{Name: "effector-key", Value: testKey}}
	for _, e := range entries {
		for _, s := range e.Held() {
			r.held = append(r.held, scrub.Secret{Name: s.Name, Value: s.Value})
		}
	}
	return r
}

// push prepares and runs a push, as the server does: the outcome is
// scrubbed for every held value.
func (r *rig) push(t testing.TB, id string, p *wire.Push) (pinned string, out wire.Outcome) {
	t.Helper()
	plan, err := r.k.Prepare(id, &wire.Start{Kind: wire.KindPush, TimeoutMs: 60000, Push: p})
	if err != nil {
		t.Fatalf("prepare %s: %v", id, err)
	}
	if plan.Stop != nil || plan.Method != "-" || plan.Host != "-" || plan.KeptStop != effect.DropStop {
		t.Fatalf("plan %+v: a push cannot be stopped, logs method=- host=-, and drops a kept stop", plan)
	}
	sc, err := scrub.New(r.held)
	if err != nil {
		t.Fatal(err)
	}
	out = plan.Run(context.Background(), effect.Held(sc))
	out.MapStrings(sc.String)
	return plan.Pinned, out
}
