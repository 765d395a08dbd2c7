package pushkind

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"jr2.dev/boundary/effector/internal/config"
	"jr2.dev/boundary/effector/internal/efftest"
	"jr2.dev/boundary/effector/internal/wire"
)

// hitListener counts the connections a program the agent named makes: the
// network is open to a confined process, so a hit is seen even where
// Landlock would stop a marker file.
func hitListener(t *testing.T) (port int, hits *atomic.Int64) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	hits = &atomic.Int64{}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			hits.Add(1)
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port, hits
}

// TestAgentCannotSteer: the worktree names a program in every place git
// would run one — hooks, core.sshCommand, core.fsmonitor, a filter, a
// credential.helper, an includeIf, core.alternateRefsCommand,
// uploadpack.packObjectsHook, a .gitmodules url — and none runs: the push
// succeeds and no program the agent named ever connects or writes.
func TestAgentCannotSteer(t *testing.T) {
	remote := newSSHRemote(t)
	r := newRig(t, "", []config.Push{{Slot: "app"}}, remote.Entry("deploy"))
	port, hits := hitListener(t)
	marker := filepath.Join(t.TempDir(), "marker")
	hit := filepath.Join(r.f.Work, "hit.sh")
	r.f.Write(t, "hit.sh", fmt.Sprintf("#!/bin/bash\necho \"$0 $*\" >>%s\nexec 3<>/dev/tcp/127.0.0.1/%d\n", marker, port))
	os.Chmod(hit, 0o755)
	r.f.Write(t, ".gitattributes", "* filter=x\n")
	r.f.Write(t, ".gitmodules", "[submodule \"m\"]\n\tpath = m\n\turl = ext::"+hit+"\n")
	r.f.Commit(t, nil, "steering")
	hooks := filepath.Join(r.f.Work, ".git", "hooks")
	os.MkdirAll(hooks, 0o755)
	for _, h := range []string{"pre-push", "post-checkout", "reference-transaction", "pre-receive", "post-update", "fsmonitor-watchman"} {
		os.WriteFile(filepath.Join(hooks, h), []byte("#!/bin/sh\nexec "+hit+" hook\n"), 0o755)
	}
	extra := filepath.Join(r.f.Work, "extra.config")
	os.WriteFile(extra, []byte("[core]\n\tsshCommand = "+hit+" included\n"), 0o644)
	cfg := fmt.Sprintf("[core]\n\tsshCommand = %[1]s ssh\n\tfsmonitor = %[1]s\n\thooksPath = %[2]s\n\talternateRefsCommand = %[1]s\n"+
		"[credential]\n\thelper = !%[1]s\n[uploadpack]\n\tpackObjectsHook = %[1]s\n[includeIf \"gitdir:/\"]\n\tpath = %[3]s\n"+
		"[filter \"x\"]\n\tclean = %[1]s\n\tsmudge = %[1]s\n\tprocess = %[1]s\n", hit, hooks, extra)
	appendFile(t, filepath.Join(r.f.Work, ".git", "config"), cfg)
	r.pushUnsteered(t, "steer", slotPush("app", remote.URL, "deploy", "refs/heads/main"), hits, marker, "the agent")
}

// appendFile appends s to the file at p.
func appendFile(t testing.TB, p, s string) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// pushUnsteered runs p, which must push the worktree's HEAD, and fails
// when a program who named connected (hits) or wrote its marker.
func (r *rig) pushUnsteered(t *testing.T, id string, p *wire.Push, hits *atomic.Int64, marker, who string) {
	t.Helper()
	head := strings.TrimSpace(r.f.RunGit(t, "-c", "core.hooksPath=/dev/null", "rev-parse", "HEAD"))
	_, out := r.push(t, id, p)
	if out.Kind != wire.OutcomePushed || out.Commit != head {
		t.Fatalf("outcome %+v", out)
	}
	time.Sleep(100 * time.Millisecond)
	if n := hits.Load(); n != 0 {
		t.Errorf("a program %s named ran %d times", who, n)
	}
	if b, err := os.ReadFile(marker); err == nil {
		t.Errorf("a program %s named ran: %s", who, b)
	}
}

// TestRejections: each stage's rejection, with a reason in words.
func TestRejections(t *testing.T) {
	remote := newSSHRemote(t)
	good := remote.Entry("deploy")
	other := remote.Entry("other")
	other.URL = "ssh://root@127.0.0.1:1/elsewhere/"
	badHost := remote.Entry("badhost")
	_, wrongPub := sshKey(t, t.TempDir(), "wrong")
	port := strings.Split(strings.TrimPrefix(remote.URL, "ssh://root@127.0.0.1:"), "/")[0]
	badHost.Files[config.GitKnownHosts] = []byte("[127.0.0.1]:" + port + " " + string(wrongPub))
	r := newRig(t, "", []config.Push{{Slot: "app"}, {Slot: "signed", Sign: config.SignSSH}}, good, other, badHost)
	url := remote.URL
	for _, c := range []struct {
		name, stage, want string
		push              *wire.Push
		setup             func()
	}{
		{"unknown slot", StageStart, "not a Repo Slot this Effector pushes", slotPush("nope", url, "deploy", "refs/heads/a"), nil},
		{"no entry", StageStart, "holds no such entry", slotPush("app", url, "missing", "refs/heads/a"), nil},
		{"url outside the entry", StageStart, "is not under git.credentials entry", slotPush("app", url, "other", "refs/heads/a"), nil},
		{"pin not in the worktree", StageStart, "is not in the worktree", &wire.Push{Slot: wire.Slot{Name: "app", URL: url, Credentials: "deploy"},
			Ref: "refs/heads/a", Pin: "0123456789abcdef0123456789abcdef01234567"}, nil},
		{"no signing key", StageSign, "holds no signing key", slotPush("signed", url, "deploy", "refs/heads/a"), nil},
		{"host key mismatch", StagePush, "ssh: Host key verification failed.", slotPush("app", url, "badhost", "refs/heads/a"), nil},
		{"non-fast-forward", StagePush, "non-fast-forward", slotPush("app", url, "deploy", "refs/heads/b"), func() {
			r.push(t, "first", slotPush("app", url, "deploy", "refs/heads/b"))
			r.f.RunGit(t, "checkout", "-q", "--orphan", "other")
			r.f.Commit(t, map[string]string{"x": "x\n"}, "unrelated")
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.setup != nil {
				c.setup()
			}
			_, out := r.push(t, "rej", c.push)
			if out.Kind != wire.OutcomeRejected || out.Stage != c.stage || !strings.Contains(out.Reason, c.want) {
				t.Fatalf("outcome %+v, want rejected at %s saying %q", out, c.stage, c.want)
			}
			if strings.Contains(out.Reason, r.f.Scratch) {
				t.Errorf("reason names the scratch: %q", out.Reason)
			}
		})
	}
	if left := r.f.Leftovers(); len(left) != 0 {
		t.Errorf("scratch left behind: %v", left)
	}
}

// TestNotARepository: a .git that is a link or a file pointing elsewhere
// is rejected at start, and nothing runs.
func TestNotARepository(t *testing.T) {
	for _, form := range []string{"link", "gitdir-file"} {
		t.Run(form, func(t *testing.T) {
			remote := newSSHRemote(t)
			r := newRig(t, "", []config.Push{{Slot: "app"}}, remote.Entry("deploy"))
			dotgit := filepath.Join(r.f.Work, ".git")
			moved := filepath.Join(r.f.Work, "elsewhere.git")
			if err := os.Rename(dotgit, moved); err != nil {
				t.Fatal(err)
			}
			if form == "link" {
				os.Symlink(moved, dotgit)
			} else {
				os.WriteFile(dotgit, []byte("gitdir: "+moved+"\n"), 0o644)
			}
			pinned, out := r.push(t, "nr", slotPush("app", remote.URL, "deploy", "refs/heads/a"))
			if out.Kind != wire.OutcomeRejected || out.Stage != StageStart || !strings.Contains(out.Reason, "not a repository") || pinned != "" {
				t.Fatalf("pinned %q, outcome %+v", pinned, out)
			}
			if remoteRef(t, remote.Repo, "refs/heads/a") != "" {
				t.Error("the remote got the ref")
			}
		})
	}
}

// TestNoSecretInArgvOrEnv: while a token push and an ssh-key push run, no
// process's argv or environment holds any form of the token or the key
// (/proc sampled throughout), the outcome holds none, and no file is left.
func TestNoSecretInArgvOrEnv(t *testing.T) {
	token := "SENTINEL-tok-" + fmt.Sprint(time.Now().UnixNano()) + "-q7Zx"
	https := newHTTPSRemote(t, token)
	ssh := newSSHRemote(t)
	r := newRig(t, https.CAFile, []config.Push{{Slot: "docs"}, {Slot: "app"}}, https.Entry("web"), ssh.Entry("deploy"))
	keyLine := strings.Split(string(ssh.Identity), "\n")[2] // a line of the key's body
	var forms []string
	for _, v := range []string{token, keyLine} {
		for _, f := range efftest.Forms([]byte(v)) {
			if len(f.Core) >= 12 {
				forms = append(forms, f.Core)
			}
		}
	}
	var mu sync.Mutex
	var seen []string
	stop := sampleProcs(func(_ string, cmdline, env []byte) {
		for f, b := range map[string][]byte{"cmdline": cmdline, "environ": env} {
			for _, form := range forms {
				if bytes.Contains(b, []byte(form)) {
					mu.Lock()
					seen = append(seen, f+" of "+string(bytes.ReplaceAll(b, []byte{0}, []byte{' '})))
					mu.Unlock()
				}
			}
		}
	})
	_, o1 := r.push(t, "tok", slotPush("docs", https.URL, "web", "refs/heads/main"))
	_, o2 := r.push(t, "key", slotPush("app", ssh.URL, "deploy", "refs/heads/main"))
	samples := stop()
	if o1.Kind != wire.OutcomePushed || o2.Kind != wire.OutcomePushed {
		t.Fatalf("outcomes %+v %+v", o1, o2)
	}
	if samples < 2 {
		t.Fatalf("only %d samples of /proc", samples)
	}
	if len(seen) > 0 {
		t.Errorf("%d samples held a secret; the first: %s", len(seen), seen[0])
	}
	for _, o := range []wire.Outcome{o1, o2} {
		enc, _ := wire.Marshal(&o)
		for _, form := range forms {
			if strings.Contains(string(enc), form) {
				t.Errorf("outcome %s holds a form of a secret", enc)
			}
		}
	}
	if left := r.f.Leftovers(); len(left) != 0 {
		t.Errorf("scratch left behind: %v", left)
	}
	t.Logf("%d samples of every process's argv and environment", samples)
}

// sampleProcs calls see with every process's pid, argv and environment
// (each read once) until the stop it returns, which gives the number of
// full samples taken. The test's own https remote (git http-backend,
// which receives the token by design) is left out.
func sampleProcs(see func(pid string, cmdline, env []byte)) (stop func() int) {
	var done atomic.Bool
	ended := make(chan int)
	go func() {
		samples := 0
		for !done.Load() {
			paths, _ := filepath.Glob("/proc/[0-9]*")
			for _, p := range paths {
				// environ is read once and every check uses that read: a
				// second read could fail (the process gone) and let the
				// test's own remote pass as the Effector's.
				env, err := os.ReadFile(filepath.Join(p, "environ"))
				if err != nil || bytes.Contains(env, []byte("GATEWAY_INTERFACE=CGI/1.1")) {
					continue
				}
				cmdline, _ := os.ReadFile(filepath.Join(p, "cmdline"))
				see(p, cmdline, env)
			}
			samples++
		}
		ended <- samples
	}()
	return func() int {
		done.Store(true)
		return <-ended
	}
}
