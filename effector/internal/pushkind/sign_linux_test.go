package pushkind

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"jr2.dev/boundary/effector/internal/config"
	"jr2.dev/boundary/effector/internal/wire"
)

// gpgKey makes a GPG key in a home of its own and returns its secret key
// (armored) and a home holding only its public half, for verification.
// Every gpg-agent either home started is stopped before it returns.
func gpgKey(t testing.TB) (secret []byte, verifyHome string) {
	t.Helper()
	home, verify := t.TempDir(), t.TempDir()
	for _, h := range []string{home, verify} {
		os.Chmod(h, 0o700)
	}
	gpg := func(h string, stdin []byte, args ...string) []byte {
		cmd := exec.Command("/usr/bin/gpg", append([]string{"--homedir", h, "--batch", "--no-tty"}, args...)...)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "GNUPGHOME=" + h}
		if stdin != nil {
			cmd.Stdin = strings.NewReader(string(stdin))
		}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("gpg %v: %v", args, err)
		}
		return out
	}
	t.Cleanup(func() {
		for _, h := range []string{home, verify} {
			c := exec.Command("/usr/bin/gpgconf", "--homedir", h, "--kill", "all")
			c.Env = []string{"PATH=/usr/bin:/bin", "GNUPGHOME=" + h}
			_ = c.Run()
		}
	})
	gpg(home, nil, "--passphrase", "", "--quick-gen-key", "jr2 push test <push@jr2.dev>", "ed25519", "sign", "never")
	secret = gpg(home, nil, "--armor", "--export-secret-keys")
	public := gpg(home, nil, "--armor", "--export")
	gpg(verify, public, "--import")
	return secret, verify
}

// verify runs git verify-commit in the remote with the signer's public key.
func verifyCommit(t testing.TB, repo, sha string, env []string, cfg ...string) error {
	args := append(cfg, "--git-dir="+repo, "verify-commit", sha)
	cmd := exec.Command("/usr/bin/git", args...)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME=" + filepath.Dir(repo)}, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Logf("verify-commit: %s", out)
	}
	return err
}

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

// agentsUnder lists the live gpg-agents whose command line names dir.
func agentsUnder(dir string) []string {
	names, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var out []string
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err == nil && strings.Contains(string(b), "gpg-agent") && strings.Contains(string(b), dir) {
			stat, _ := os.ReadFile(filepath.Join(filepath.Dir(n), "stat"))
			if i := strings.LastIndexByte(string(stat), ')'); i > 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
				continue
			}
			out = append(out, filepath.Base(filepath.Dir(n)))
		}
	}
	return out
}
