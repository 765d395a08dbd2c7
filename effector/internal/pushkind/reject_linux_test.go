package pushkind

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"jr2.dev/boundary/effector/internal/classlock"
	"jr2.dev/boundary/effector/internal/config"
	"jr2.dev/boundary/effector/internal/pushkind/pushtest"
	"jr2.dev/boundary/effector/internal/wire"
)

// pushWithin is rig.push with the start's own timeout.
func (r *rig) pushWithin(t testing.TB, id string, timeoutMs int64, p *wire.Push) wire.Outcome {
	t.Helper()
	return r.pushBetween(t, id, timeoutMs, p, func() {})
}

// TestRejectionsOfTheRemoteAndTheSigner: the stages TestRejections leaves —
// a signing failure and the class lock's wait past the timeout (sign); the
// remote's hook refusing, the remote unreachable and the token refused
// (push) — each with a reason in words that names no scratch and no value,
// and the remote's ref untouched.
func TestRejectionsOfTheRemoteAndTheSigner(t *testing.T) {
	remote := newSSHRemote(t)
	good := remote.Entry("deploy")
	badKey := remote.Entry("badkey")
	badKey.Files[config.GitSignIdentity] = []byte("SENTINEL-not-an-ssh-key-6c1f0a\n")
	gpgEntry := remote.Entry("gpg")
	gpgEntry.Files[config.GitSignGPG] = []byte("SENTINEL-lock-case-key-never-loaded-2b7e\n")
	closed := pushtest.FreePort(t)
	down := remote.Entry("down")
	down.URL = fmt.Sprintf("ssh://root@127.0.0.1:%d/", closed)
	https := newHTTPSRemote(t, "SENTINEL-right-token-8d2a4f")
	wrong := https.Entry("wrongtoken")
	wrong.Files[config.GitPassword] = []byte("SENTINEL-wrong-token-93be17\n")
	r := newRig(t, https.CAFile, []config.Push{{Slot: "app"}, {Slot: "badsign", Sign: config.SignSSH},
		{Slot: "gpg", Sign: config.SignGPG}, {Slot: "web"}}, good, badKey, gpgEntry, down, wrong)
	hook := filepath.Join(remote.Repo, "hooks", "pre-receive")
	for _, c := range []struct {
		name, stage, want string
		timeoutMs         int64
		push              *wire.Push
		during            func() func()
		repo, ref         string
	}{
		{name: "signing failure", stage: StageSign, want: "ssh-keygen could not sign",
			push: slotPush("badsign", remote.URL, "badkey", "refs/heads/s")},
		{name: "class lock wait past the timeout", stage: StageSign, timeoutMs: 800,
			want: "the push did not start signing within its 800 ms (waiting for credentialed commands to end); nothing was pushed",
			push: slotPush("gpg", remote.URL, "gpg", "refs/heads/g"),
			during: func() func() {
				release, err := r.lock.Acquire(context.Background(), classlock.Command)
				if err != nil {
					t.Fatal(err)
				}
				return release
			}},
		{name: "the remote's hook refuses", stage: StagePush, want: "the remote refused the update of refs/heads/h: [remote rejected] (pre-receive hook declined)",
			push: slotPush("app", remote.URL, "deploy", "refs/heads/h"),
			during: func() func() {
				if err := os.WriteFile(hook, []byte("#!/bin/sh\necho no >&2\nexit 1\n"), 0o755); err != nil {
					t.Fatal(err)
				}
				return func() { os.Remove(hook) }
			}},
		{name: "unreachable", stage: StagePush, want: "the remote could not be reached: ssh: connect to host 127.0.0.1 port",
			push: slotPush("app", fmt.Sprintf("ssh://root@127.0.0.1:%d%s", closed, remote.Repo), "down", "refs/heads/u")},
		{name: "the token refused", stage: StagePush, want: "the remote refused the credential",
			push: slotPush("web", https.URL, "wrongtoken", "refs/heads/main"), repo: https.Repo, ref: "refs/heads/main"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.during != nil {
				defer c.during()()
			}
			timeout := c.timeoutMs
			if timeout == 0 {
				timeout = 60000
			}
			out := r.pushWithin(t, "rej2", timeout, c.push)
			if out.Kind != wire.OutcomeRejected || out.Stage != c.stage || !strings.Contains(out.Reason, c.want) {
				t.Fatalf("outcome %+v, want rejected at %s saying %q", out, c.stage, c.want)
			}
			if strings.Contains(out.Reason, r.f.Scratch) || strings.Contains(out.Reason, "SENTINEL") {
				t.Errorf("reason names the scratch or a value: %q", out.Reason)
			}
			repo, ref := c.repo, c.ref
			if repo == "" {
				repo, ref = remote.Repo, c.push.Ref
			}
			if got := remoteRef(t, repo, ref); got != "" {
				t.Errorf("the remote's %s is %s after a rejection", ref, got)
			}
		})
	}
	if left := r.f.Leftovers(); len(left) != 0 {
		t.Errorf("scratch left behind: %v", left)
	}
	if pids := agentsUnder(r.f.Scratch); len(pids) != 0 {
		t.Errorf("gpg-agent left running: %v", pids)
	}
}
