package pushkind

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"jr2.dev/boundary/effector/internal/config"
	"jr2.dev/boundary/effector/internal/pushkind/pushtest"
	"jr2.dev/boundary/effector/internal/wire"
)

func gpgKey(t testing.TB) ([]byte, string) { t.Helper(); return pushtest.GPGKey(t) }

func verifyCommit(t testing.TB, repo, sha string, env []string, cfg ...string) error {
	return pushtest.VerifyCommit(t, repo, sha, env, cfg...)
}

func agentsUnder(dir string) []string { return pushtest.AgentsUnder(dir) }

// TestPushSigned: each signing form rewrites the commits the remote does
// not hold — two on a branch the remote lacks, then one on top of the ref
// it holds — as signed commits with the pinned trees, authors and
// messages; git verify-commit passes against the public key; the
// outcome's commit is the signed tip, and pinned the worktree's.
func TestPushSigned(t *testing.T) {
	for _, form := range []string{config.SignSSH, config.SignGPG} {
		t.Run(form, func(t *testing.T) {
			remote := newSSHRemote(t)
			entry := remote.Entry("deploy")
			var verifyEnv, verifyCfg []string
			dir := t.TempDir()
			if form == config.SignSSH {
				priv, pub := sshKey(t, dir, "signer")
				entry.Files[config.GitSignIdentity] = priv
				signers := filepath.Join(dir, "allowed")
				os.WriteFile(signers, []byte("push@jr2.dev "+string(pub)), 0o600)
				verifyCfg = []string{"-c", "gpg.format=ssh", "-c", "gpg.ssh.allowedSignersFile=" + signers}
			} else {
				secret, home := gpgKey(t)
				entry.Files[config.GitSignGPG] = secret
				verifyEnv = []string{"GNUPGHOME=" + home}
			}
			r := newRig(t, "", []config.Push{{Slot: "app", Sign: form}}, entry)
			r.f.Commit(t, map[string]string{"two.txt": "two\n"}, "two")
			pin := strings.TrimSpace(r.f.RunGit(t, "rev-parse", "HEAD"))
			pinned, out := r.push(t, "s1", slotPush("app", remote.URL, "deploy", "refs/heads/jr2/fix"))
			if out.Kind != wire.OutcomePushed || pinned != pin || out.Commit == pin || !wire.ValidSHA(out.Commit) {
				t.Fatalf("pinned %s, outcome %+v", pinned, out)
			}
			if got := remoteRef(t, remote.Repo, "refs/heads/jr2/fix"); got != out.Commit {
				t.Fatalf("the remote's ref is %q, want the signed tip %s", got, out.Commit)
			}
			first := strings.TrimSpace(run(t, dir, nil, "/usr/bin/git", "--git-dir="+remote.Repo, "rev-parse", out.Commit+"^"))
			for _, sha := range []string{out.Commit, first} {
				if err := verifyCommit(t, remote.Repo, sha, verifyEnv, verifyCfg...); err != nil {
					t.Errorf("commit %s does not verify: %v", sha, err)
				}
			}
			if treeOf(t, remote.Repo, out.Commit) != strings.TrimSpace(r.f.RunGit(t, "rev-parse", pin+"^{tree}")) {
				t.Errorf("the signed tip's tree is not the pinned tree")
			}
			for _, f := range []string{"%an <%ae> %ad", "%cn <%ce> %cd", "%B"} {
				got := run(t, dir, nil, "/usr/bin/git", "--git-dir="+remote.Repo, "log", "-2", "--format="+f, out.Commit)
				want := r.f.RunGit(t, "log", "-2", "--format="+f, pin)
				if got != want {
					t.Errorf("%s: remote %q, worktree %q", f, got, want)
				}
			}
			// One more commit: only it is signed; its parent is the remote's tip.
			r.f.Commit(t, map[string]string{"three.txt": "three\n"}, "three")
			_, out2 := r.push(t, "s2", slotPush("app", remote.URL, "deploy", "refs/heads/jr2/fix"))
			if out2.Kind != wire.OutcomePushed {
				t.Fatalf("second push %+v", out2)
			}
			parent := strings.TrimSpace(run(t, dir, nil, "/usr/bin/git", "--git-dir="+remote.Repo, "rev-parse", out2.Commit+"^"))
			if parent != out.Commit {
				t.Errorf("the second signed commit's parent is %s, want the remote's tip %s", parent, out.Commit)
			}
			if err := verifyCommit(t, remote.Repo, out2.Commit, verifyEnv, verifyCfg...); err != nil {
				t.Errorf("second commit does not verify: %v", err)
			}
			if left := r.f.Leftovers(); len(left) != 0 {
				t.Errorf("scratch left behind: %v", left)
			}
			if pids := agentsUnder(r.f.Scratch); len(pids) != 0 {
				t.Errorf("gpg-agent left running: %v", pids)
			}
		})
	}
}
