package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"jr2.dev/boundary/effector/internal/pushkind/pushtest"
	"jr2.dev/boundary/effector/internal/wire"
)

// BenchmarkPush measures a push effect's start-to-settle time against a
// plain `git push` of the same commit to the same remote (a real sshd on
// loopback, the same key), each op to a ref of its own: plain is git run
// by the test in the worktree; effect is the signed start through the
// built effector, its clean repository, the fetch of the pinned commit,
// the confined push, the settle loop and the polls until the outcome.
// Each row reports push-ms; effect also x-plain (its time over plain's,
// measured in the same run).
func BenchmarkPush(b *testing.B) {
	ssh := pushtest.NewSSHRemote(b, pushtest.Plain)
	r := newPushRig(b, `{"placement":"sandbox-1","pushes":[{"slot":"app"}]}`,
		map[string]string{"JR2_EFFECTOR_TEST_POLL_MS": "50", "JR2_EFFECTOR_TEST_EXPIRE_MS": "500"}, ssh.Entry("deploy"))
	dir := b.TempDir()
	key, known := filepath.Join(dir, "id"), filepath.Join(dir, "known_hosts")
	os.WriteFile(key, ssh.Identity, 0o600)
	os.WriteFile(known, ssh.KnownHosts, 0o600)
	sshCmd := fmt.Sprintf("/usr/bin/ssh -F /dev/null -o IdentitiesOnly=yes -o IdentityFile=%s -o StrictHostKeyChecking=yes -o UserKnownHostsFile=%s -o BatchMode=yes", key, known)
	n := 0
	plain := func(b testing.TB) {
		n++
		cmd := exec.Command("/usr/bin/git", "-c", "core.hooksPath=/dev/null", "push", "--quiet", "--porcelain", ssh.URL,
			fmt.Sprintf("HEAD:refs/heads/plain-%d", n))
		cmd.Dir = r.f.Work
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_SSH_COMMAND=" + sshCmd}
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("git push: %v\n%s", err, out)
		}
	}
	effect := func(b testing.TB) {
		n++
		id := fmt.Sprintf("bench-%d", n)
		r.startPush(b, id, 60000, slot("app", ssh.URL, "deploy", fmt.Sprintf("refs/heads/effect-%d", n)))
		if out, _ := r.settled(b, id); out.Kind != wire.OutcomePushed {
			b.Fatalf("outcome %+v", out)
		}
	}
	// The remote holds the commit before either row: each op then sends
	// only the ref, as a push of work the remote mostly has.
	plain(b)
	var plainNs float64
	for _, row := range []struct {
		name string
		op   func(testing.TB)
	}{{"plain", plain}, {"effect", effect}} {
		b.Run(row.name, func(b *testing.B) {
			t0, ops := time.Now(), 0
			for b.Loop() {
				row.op(b)
				ops++
			}
			per := float64(time.Since(t0).Nanoseconds()) / float64(ops)
			b.ReportMetric(per/1e6, "push-ms")
			if row.name == "plain" {
				plainNs = per
			} else if plainNs > 0 {
				b.ReportMetric(per/plainNs, "x-plain")
			}
		})
	}
	if left := r.f.Leftovers(); len(left) != 0 {
		b.Errorf("scratch left behind: %v", left)
	}
}
