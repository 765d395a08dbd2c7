//go:build linux

// Package commandtest lays out a Sandbox Effector's files where the real
// ones would be denied to a command's child, and finds the processes of a
// command, for the tests of package commandkind and of the effector
// binary. It is imported by tests only.
//
// Invariant: every file it makes lives under two directories of its own —
// /run/jr2-test-* (the key, effector.json, the secrets, the push
// credentials: /run is a name the confiner denies) and a top-level
// /jr2-effector-test-* (the worktree, the repo caches and the scratch root,
// each passed as --deny) — and both are removed when the test ends. It
// signals nothing.
//
// It needs root (a top-level directory) and Linux (/proc).
package commandtest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Secret names the fixture holds.
const (
	Named   = "TOKEN" // the secret a test's command names
	Unnamed = "OTHER" // held, never named: its child must not read it
)

// Fixture is one Sandbox Effector's files.
type Fixture struct {
	RunDir, TopDir string

	Key, Config, Secrets, Git, Work, Scratch, Repos string

	// Values are the held secrets' values (file content = value).
	Values map[string]string
	// Forbidden maps each file the child must not read to its content: the
	// key, the unnamed secret, the push credential, a worktree file, a repo
	// cache file.
	Forbidden map[string]string
	// KeyBytes is the placement key.
	KeyBytes []byte
}

// New writes the fixture: effectorJSON as effector.json, the key, two
// secrets, a push credential, a repo cache and a worktree with one commit.
// It skips the test, loudly, when it cannot make a top-level directory.
func New(t testing.TB, key []byte, effectorJSON string) *Fixture {
	t.Helper()
	runDir, err := os.MkdirTemp("/run", "jr2-test-")
	if err != nil {
		t.Skipf("SKIPPED, NOT PROVEN: the test needs directories of its own under /run and / (run as root): %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(runDir) })
	top, err := os.MkdirTemp("/", "jr2-effector-test-")
	if err != nil {
		t.Skipf("SKIPPED, NOT PROVEN: the test needs a top-level directory of its own (run as root): %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(top) })
	f := &Fixture{
		RunDir: runDir, TopDir: top,
		Key: filepath.Join(runDir, "key"), Config: filepath.Join(runDir, "effector.json"),
		Secrets: filepath.Join(runDir, "secrets"), Git: filepath.Join(runDir, "git"),
		Work: filepath.Join(top, "work"), Scratch: filepath.Join(top, "scratch"), Repos: filepath.Join(top, "repos"),
		Values: map[string]string{}, Forbidden: map[string]string{}, KeyBytes: key,
	}
	tag := Random()
	f.Values[Named] = "SENTINEL-named-" + tag + "-value"
	f.Values[Unnamed] = "SENTINEL-unnamed-" + tag + "-value"
	write(t, f.Key, hex.EncodeToString(key)+"\n")
	write(t, f.Config, effectorJSON)
	for name, v := range f.Values {
		write(t, filepath.Join(f.Secrets, name), v)
	}
	f.Forbidden[f.Key] = hex.EncodeToString(key)
	f.Forbidden[filepath.Join(f.Secrets, Unnamed)] = f.Values[Unnamed]
	for p, v := range map[string]string{
		filepath.Join(f.Git, "origin", "password"):      "SENTINEL-push-" + tag + "-credential",
		filepath.Join(f.Repos, "cache", "objects", "a"): "SENTINEL-repos-" + tag + "-object",
	} {
		write(t, p, v)
		f.Forbidden[p] = v
	}
	// What the operator projects beside a push credential (it holds no value).
	write(t, filepath.Join(f.Git, "origin", "entry.json"), `{"url":"https://git.example.com/"}`)
	for _, d := range []string{f.Work, f.Scratch} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f.gitRun(t, "init", "-q", "-b", "main")
	secretFile := filepath.Join(f.Work, "secret.txt")
	f.Commit(t, map[string]string{"README": "committed one\n", "sub/inner.txt": "inner\n", "secret.txt": "SENTINEL-work-" + tag + "-file"}, "one")
	f.Forbidden[secretFile] = "SENTINEL-work-" + tag + "-file"
	return f
}

// Random is a fresh word of 12 hex characters.
func Random() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func write(t testing.TB, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// Write writes a file of the worktree without committing it.
func (f *Fixture) Write(t testing.TB, rel, content string) {
	t.Helper()
	write(t, filepath.Join(f.Work, rel), content)
}

// Commit writes files into the worktree, commits everything and returns
// the commit's sha. The test's own git reads no config of the repository's
// hooks.
func (f *Fixture) Commit(t testing.TB, files map[string]string, msg string) string {
	t.Helper()
	for rel, content := range files {
		f.Write(t, rel, content)
	}
	f.gitRun(t, "add", "-A")
	f.gitRun(t, "commit", "-q", "-m", msg)
	return strings.TrimSpace(f.gitRun(t, "rev-parse", "HEAD"))
}

// RunGit runs git in the worktree, as the test (never as the Effector).
func (f *Fixture) RunGit(t testing.TB, args ...string) string {
	t.Helper()
	return f.gitRun(t, args...)
}

func (f *Fixture) gitRun(t testing.TB, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=jr2 test", "-c", "user.email=test@jr2.dev",
		"-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "commit.gpgSign=false"}, args...)...)
	cmd.Dir = f.Work
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + f.TopDir, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Env is the Effector's env for the fixture (beside the port).
func (f *Fixture) Env() map[string]string {
	return map[string]string{
		"JR2_EFFECTOR_KEY": f.Key, "JR2_EFFECTOR_CONFIG": f.Config, "JR2_EFFECTOR_SECRETS": f.Secrets,
		"JR2_EFFECTOR_GIT": f.Git, "JR2_EFFECTOR_WORK": f.Work, "JR2_EFFECTOR_SCRATCH": f.Scratch,
		"JR2_EFFECTOR_REPOS": f.Repos,
		"POD_NAME":           "effector-a", "POD_IP": "127.0.0.1", "NODE_NAME": "node-a",
	}
}

// OwnPaths is what config.OwnPaths gives for the fixture.
func (f *Fixture) OwnPaths() []string {
	return []string{f.Key, f.Config, f.Secrets, f.Git, f.Work, f.Repos, f.Scratch}
}

// Leftovers lists what is left under the scratch root.
func (f *Fixture) Leftovers() []string {
	entries, _ := os.ReadDir(f.Scratch)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// WithEnv lists the live (not zombie) processes whose environ holds s:
// a command's child is known by its HOME in its effect's scratch. (Package
// reaptest finds processes by their command line.)
func WithEnv(s string) []int {
	names, _ := filepath.Glob("/proc/[0-9]*")
	var pids []int
	for _, dir := range names {
		b, err := os.ReadFile(filepath.Join(dir, "environ"))
		if err != nil || !bytes.Contains(b, []byte(s)) {
			continue
		}
		if stat, err := os.ReadFile(filepath.Join(dir, "stat")); err == nil {
			if i := bytes.LastIndexByte(stat, ')'); i > 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
				continue
			}
		}
		pid, _ := strconv.Atoi(filepath.Base(dir))
		pids = append(pids, pid)
	}
	return pids
}
