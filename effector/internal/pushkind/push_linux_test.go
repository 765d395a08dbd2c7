package pushkind

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"jr2.dev/boundary/effector/internal/config"
	"jr2.dev/boundary/effector/internal/wire"
)

func slotPush(name, url, entry, ref string) *wire.Push {
	return &wire.Push{Slot: wire.Slot{Name: name, URL: url, Credentials: entry}, Ref: ref}
}

// treeOf is a commit's tree in a bare repository.
func treeOf(t testing.TB, repo, rev string) string {
	t.Helper()
	return strings.TrimSpace(run(t, filepath.Dir(repo), nil, "/usr/bin/git", "--git-dir="+repo, "rev-parse", rev+"^{tree}"))
}

// TestPushSSH: the worktree's HEAD reaches a real sshd's repository over
// ssh with the entry's key; the pinned commit is the start's, the remote's
// ref is it, and nothing is left in the scratch.
func TestPushSSH(t *testing.T) {
	remote := newSSHRemote(t)
	r := newRig(t, "", []config.Push{{Slot: "app"}}, remote.Entry("deploy"))
	head := strings.TrimSpace(r.f.RunGit(t, "rev-parse", "HEAD"))
	pinned, out := r.push(t, "p1", slotPush("app", remote.URL, "deploy", "refs/heads/jr2/fix"))
	if pinned != head {
		t.Fatalf("pinned %q, want the worktree's HEAD %s", pinned, head)
	}
	if out.Kind != wire.OutcomePushed || out.Commit != head || out.Ref != "refs/heads/jr2/fix" {
		t.Fatalf("outcome %+v", out)
	}
	if got := remoteRef(t, remote.Repo, "refs/heads/jr2/fix"); got != head {
		t.Fatalf("the remote's ref is %q, want %s", got, head)
	}
	if left := r.f.Leftovers(); len(left) != 0 {
		t.Errorf("scratch left behind: %v", left)
	}
}

// TestPushHTTPS: a token over https, through `effector credential`, to
// git http-backend behind a TLS server that checks it.
func TestPushHTTPS(t *testing.T) {
	remote := newHTTPSRemote(t, "SENTINEL-https-token-5f0c1d9e7a")
	r := newRig(t, remote.CAFile, []config.Push{{Slot: "docs"}}, remote.Entry("web"))
	head := strings.TrimSpace(r.f.RunGit(t, "rev-parse", "HEAD"))
	_, out := r.push(t, "h1", slotPush("docs", remote.URL, "web", "refs/heads/main"))
	if out.Kind != wire.OutcomePushed || out.Commit != head {
		t.Fatalf("outcome %+v", out)
	}
	if got := remoteRef(t, remote.Repo, "refs/heads/main"); got != head {
		t.Fatalf("the remote's ref is %q, want %s", got, head)
	}
	if left := r.f.Leftovers(); len(left) != 0 {
		t.Errorf("scratch left behind: %v", left)
	}
	_ = os.Getpid
}
