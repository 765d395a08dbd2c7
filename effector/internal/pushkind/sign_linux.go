package pushkind

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"jr2.dev/boundary/effector/internal/config"
	"jr2.dev/boundary/effector/internal/gitrun"
	"jr2.dev/boundary/effector/internal/oserr"
	"jr2.dev/boundary/effector/internal/reap"
	"jr2.dev/boundary/effector/internal/wire"
)

// signed rewrites the commits between the remote's ref and the pinned
// commit as signed commits and returns the signed tip; or the rejection.
// release ends a GPG push's class once its agent is gone.
func (r *runner) signed(ctx context.Context, release func()) (string, *wire.Outcome) {
	reject := func(stage, reason string) (string, *wire.Outcome) {
		o := rejected(stage, reason)
		return "", &o
	}
	keyFile := config.GitSignIdentity
	if r.p.sign == config.SignGPG {
		keyFile = config.GitSignGPG
	}
	if _, ok := r.p.entry.Files[keyFile]; !ok {
		return reject(StageSign, fmt.Sprintf("git.credentials entry %q holds no signing key (%s); the slot signs with %s", r.p.entry.Name, keyFile, r.p.sign))
	}
	key := r.phase("list")
	todo, signedBefore, out := r.toSign(ctx, key)
	r.settle(key)
	if out != nil {
		return "", out
	}
	sign := r.phase("sign")
	var signer func([]byte) ([]byte, error)
	stop := func() {}
	switch r.p.sign {
	case config.SignSSH:
		signer = func(payload []byte) ([]byte, error) { return r.sshSign(ctx, sign, payload) }
	case config.SignGPG:
		var err error
		if stop, err = r.startAgent(ctx, sign); err != nil {
			r.settle(sign)
			if ctx.Err() != nil {
				return reject(StageSign, fmt.Sprintf("the push ran past its %d ms while signing; nothing was pushed", r.p.timeout.Milliseconds()))
			}
			return reject(StageSign, r.clean("the signing key could not be loaded: "+err.Error()))
		}
		signer = func(payload []byte) ([]byte, error) { return r.gpgSign(ctx, sign, payload) }
	}
	tip, err := r.rewrite(ctx, sign, todo, signedBefore, signer)
	stop()
	r.settle(sign)
	if r.p.sign == config.SignGPG {
		// The agent is gone and its group settled: the class may go
		// before the push reaches the network.
		release()
	}
	if err != nil {
		if ctx.Err() != nil {
			return reject(StageSign, fmt.Sprintf("the push ran past its %d ms while signing; nothing was pushed", r.p.timeout.Milliseconds()))
		}
		return reject(StageSign, r.clean(err.Error()))
	}
	return tip, nil
}

// toSign lists the commits to sign, parents first: those of the pinned
// commit the remote does not hold. With the ref on the remote, its tip
// must be an ancestor of the pinned commit (else the push is a
// non-fast-forward and nothing is signed); without, every commit the
// remote advertises and the repository holds is left out.
func (r *runner) toSign(ctx context.Context, key string) ([]string, map[string]string, *wire.Outcome) {
	args, env := r.remote()
	out, stderr, err := r.git(ctx, gitCall{key: key, cred: true, env: env, args: append(args, "ls-remote", "--", r.p.push.Slot.URL)})
	if err != nil {
		o := r.fail(ctx, StagePush, "listing the remote's refs", errors.New(r.unreachable(stderr)))
		return nil, nil, &o
	}
	tip, advertised := "", []string{}
	for _, line := range strings.Split(string(out), "\n") {
		sha, ref, ok := strings.Cut(line, "\t")
		if !ok || !wire.ValidSHA(sha) {
			continue
		}
		if ref == r.p.push.Ref {
			tip = sha
		}
		advertised = append(advertised, sha)
	}
	exclude := advertised
	if tip != "" {
		exclude = []string{tip}
	}
	// Which of them this repository holds (the others are not ancestors).
	var q bytes.Buffer
	for _, s := range exclude {
		q.WriteString(s + "\n")
	}
	out, stderr, err = r.git(ctx, gitCall{key: key, stdin: q.Bytes(), args: []string{"cat-file", "--batch-check=%(objectname) %(objecttype)"}})
	if err != nil {
		o := r.fail(ctx, StageSign, "listing the commits to sign", gitrun.Err("cat-file", stderr, err))
		return nil, nil, &o
	}
	held := []string{}
	for _, line := range strings.Split(string(out), "\n") {
		if sha, typ, _ := strings.Cut(line, " "); typ == "commit" {
			held = append(held, sha)
		}
	}
	var before map[string]string
	if tip != "" {
		_, _, err := r.git(ctx, gitCall{key: key, args: []string{"merge-base", "--is-ancestor", tip, r.p.pinned}})
		if len(held) == 0 || err != nil {
			// The remote's tip may be an earlier push's signed rewrite of
			// an ancestor of the pinned commit: then only what follows
			// that ancestor is signed, on top of the tip.
			a, ferr := r.rewriteOf(ctx, key, tip)
			if ferr != nil || a == "" {
				o := rejected(StagePush, fmt.Sprintf("the remote refused a non-fast-forward update of %s; the pinned commit does not hold the remote's tip", r.p.push.Ref))
				if ctx.Err() != nil {
					o = r.fail(ctx, StageSign, "listing the commits to sign", ctx.Err())
				}
				return nil, nil, &o
			}
			held, before = []string{a}, map[string]string{a: tip}
		}
	}
	q.Reset()
	q.WriteString(r.p.pinned + "\n")
	for _, s := range held {
		q.WriteString("^" + s + "\n")
	}
	out, stderr, err = r.git(ctx, gitCall{key: key, stdin: q.Bytes(), args: []string{"rev-list", "--topo-order", "--reverse", "--stdin"}})
	if err != nil {
		o := r.fail(ctx, StageSign, "listing the commits to sign", gitrun.Err("rev-list", stderr, err))
		return nil, nil, &o
	}
	return strings.Fields(string(out)), before, nil
}

// rewriteOf finds the ancestor of the pinned commit that the remote's tip
// is a signed rewrite of: the same tree, headers and message, its
// parents and signature aside. It fetches the tip to read it.
func (r *runner) rewriteOf(ctx context.Context, key, tip string) (string, error) {
	args, env := r.remote()
	if _, stderr, err := r.git(ctx, gitCall{key: key, cred: true, env: env, args: append(args,
		"fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--", r.p.push.Slot.URL, r.p.push.Ref)}); err != nil {
		return "", gitrun.Err("fetch", stderr, err)
	}
	body := func(sha string) ([]byte, error) {
		raw, stderr, err := r.git(ctx, gitCall{key: key, args: []string{"cat-file", "commit", sha}})
		if err != nil {
			return nil, gitrun.Err("cat-file", stderr, err)
		}
		c, err := parseCommit(raw)
		if err != nil {
			return nil, err
		}
		return c.payload(nil), nil
	}
	want, err := body(tip)
	if err != nil {
		return "", err
	}
	tree, _ := parseCommit(append([]byte(nil), want...))
	out, stderr, err := r.git(ctx, gitCall{key: key, args: []string{"log", "--format=%H %T", r.p.pinned}})
	if err != nil {
		return "", gitrun.Err("log", stderr, err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		sha, t, ok := strings.Cut(line, " ")
		if !ok || tree == nil || t != tree.tree {
			continue
		}
		if b, err := body(sha); err == nil && bytes.Equal(b, want) {
			return sha, nil
		}
	}
	return "", nil
}

// rewrite signs each commit, parents first, with its parents replaced by
// their signed rewrites; it returns the pinned commit's rewrite (the
// pinned commit itself when there is nothing to sign).
func (r *runner) rewrite(ctx context.Context, key string, todo []string, before map[string]string, sign func([]byte) ([]byte, error)) (string, error) {
	done := map[string]string{}
	for k, v := range before {
		done[k] = v
	}
	for _, sha := range todo {
		raw, stderr, err := r.git(ctx, gitCall{key: key, args: []string{"cat-file", "commit", sha}})
		if err != nil {
			return "", gitrun.Err("cat-file", stderr, err)
		}
		c, err := parseCommit(raw)
		if err != nil {
			return "", fmt.Errorf("commit %s cannot be signed: %v", sha, err)
		}
		parents := make([]string, len(c.parents))
		for i, p := range c.parents {
			parents[i] = p
			if n, ok := done[p]; ok {
				parents[i] = n
			}
		}
		payload := c.payload(parents)
		sig, err := sign(payload)
		if err != nil {
			return "", err
		}
		out, stderr, err := r.git(ctx, gitCall{key: key, stdin: withSignature(payload, sig), args: []string{"hash-object", "-t", "commit", "-w", "--stdin"}})
		if err != nil {
			return "", gitrun.Err("hash-object", stderr, err)
		}
		done[sha] = strings.TrimSpace(string(out))
	}
	if n, ok := done[r.p.pinned]; ok {
		return n, nil
	}
	return r.p.pinned, nil
}

// sshSign is `ssh-keygen -Y sign -n git` over the payload.
func (r *runner) sshSign(ctx context.Context, key string, payload []byte) ([]byte, error) {
	cmd := exec.Command(r.k.progs["ssh-keygen"], "-Y", "sign", "-n", "git", "-f", filepath.Join(r.cred, config.GitSignIdentity))
	cmd.Env = r.env()
	cmd.Dir = r.tmp
	out, stderr, err := r.exec(ctx, key, cmd, payload)
	if err != nil || !bytes.Contains(out, []byte("-----BEGIN SSH SIGNATURE-----")) {
		return nil, fmt.Errorf("ssh-keygen could not sign: %v (%s)", err, gitrun.LastLine(stderr))
	}
	return out, nil
}

func (r *runner) gpg(args ...string) *exec.Cmd {
	cmd := exec.Command(r.k.progs["gpg"], append([]string{"--homedir", r.gnupg, "--batch", "--no-tty", "--no-autostart",
		"--no-options", "--no-permission-warning"}, args...)...)
	cmd.Env = r.env("GNUPGHOME=" + r.gnupg)
	cmd.Dir = r.tmp
	return cmd
}

// gpgSign is `gpg --detach-sign --armor` over the payload, through the
// push's own agent.
func (r *runner) gpgSign(ctx context.Context, key string, payload []byte) ([]byte, error) {
	out, stderr, err := r.exec(ctx, key, r.gpg("--armor", "--detach-sign"), payload)
	if err != nil || !bytes.Contains(out, []byte("-----BEGIN PGP SIGNATURE-----")) {
		return nil, fmt.Errorf("gpg could not sign: %v (%s)", err, gitrun.LastLine(stderr))
	}
	return out, nil
}

// startAgent starts the push's gpg-agent in its GNUPGHOME — `--daemon
// --no-detach`: it forks once and keeps the launcher's process group, and
// is ready when the launcher exits 0 — and imports the signing key. The
// stop it returns sends SIGTERM to the agent's group, waits, and leaves
// the rest to the settle loop (SIGKILL).
func (r *runner) startAgent(ctx context.Context, key string) (stop func(), err error) {
	cmd := exec.Command(r.k.progs["gpg-agent"], "--homedir", r.gnupg, "--daemon", "--no-detach", "--batch", "--no-grab",
		"--disable-scdaemon", "--options", "/dev/null")
	cmd.Env = r.env("GNUPGHOME=" + r.gnupg)
	cmd.Dir = r.tmp
	// The agent keeps the launcher's output open: a file, not a pipe, so
	// the launcher's end is not waited past.
	logFile, ferr := os.OpenFile(filepath.Join(r.tmp, "gpg-agent.log"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if ferr != nil {
		return func() {}, fmt.Errorf("its log could not be made (%s)", oserr.Why(ferr))
	}
	defer logFile.Close()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	_, _, err = r.exec(ctx, key, cmd, nil)
	pgid := 0
	if cmd.Process != nil {
		pgid = cmd.Process.Pid
	}
	stop = func() { r.stopAgent(pgid) }
	if err != nil {
		b, _ := os.ReadFile(logFile.Name())
		stop()
		return func() {}, fmt.Errorf("gpg-agent did not start: %v (%s)", err, gitrun.LastLine(b))
	}
	if _, stderr, err := r.exec(ctx, key, r.gpg("--import", filepath.Join(r.cred, config.GitSignGPG)), nil); err != nil {
		stop()
		return func() {}, fmt.Errorf("gpg --import: %v (%s)", err, gitrun.LastLine(stderr))
	}
	return stop, nil
}

// stopAgent sends SIGTERM to the agent's group and waits, up to the grace,
// until no member of it is alive. A member is this process's child (the
// subreaper's) and stays unreaped until the settle loop, so the group's
// id is not another's while it is signalled.
func (r *runner) stopAgent(pgid int) {
	if pgid <= 0 {
		return
	}
	members := func() int {
		kids, _ := reap.Children(os.Getpid())
		n := 0
		for _, p := range kids {
			if p.PGID == pgid && p.State != 'Z' && p.State != 'X' {
				n++
			}
		}
		return n
	}
	if members() == 0 {
		return
	}
	_ = unix.Kill(-pgid, unix.SIGTERM)
	for deadline := time.Now().Add(r.k.o.AgentGrace); members() > 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	// What is left is killed (SIGKILL) and reaped by the phase's settle.
}
