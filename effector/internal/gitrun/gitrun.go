package gitrun

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// FixedPath is the one PATH the Effector's own programs are found in
// (ADR-0068): an image that puts a directory of its own first does not
// choose which git runs.
const FixedPath = "/usr/local/bin:/usr/bin:/bin"

// LookFixed finds one of the Effector's own programs in FixedPath, never
// in the PATH the image set, and returns its absolute path.
func LookFixed(name string) (string, error) {
	for _, dir := range strings.Split(FixedPath, ":") {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("no %s in %s", name, FixedPath)
}

// hardening is command-line config: the scope that wins over the system,
// global and repository ones. A caller's own -c after it wins over it, so
// a credential helper is named by the caller, never by a repository.
var hardening = []string{
	// No hook runs: neither the repository's hooks/ nor a hooksPath.
	"-c", "core.hooksPath=/dev/null",
	// No file-system monitor, which is a program a config names.
	"-c", "core.fsmonitor=false",
	// No transport: GIT_ALLOW_PROTOCOL (Env) already decides, over every
	// config scope; this holds should it ever be unset.
	"-c", "protocol.allow=never",
	// An empty value empties the list of helpers: none but one the
	// caller names after it.
	"-c", "credential.helper=",
	// An empty value ends git's search for an askpass program
	// (GIT_ASKPASS, then core.askPass, then SSH_ASKPASS): none runs.
	"-c", "core.askPass=",
	// A redirect is an answer: git never follows one to another url.
	"-c", "http.followRedirects=false",
	// With an alternate, git would list its refs by running
	// `git for-each-ref` in it, with its config: `true` lists none, and
	// no git runs in an alternate.
	"-c", "core.alternateRefsCommand=true",
	// Nothing runs after the command or in the background.
	"-c", "gc.auto=0",
	"-c", "maintenance.auto=false",
	// git never asks gpg to sign a push by itself.
	"-c", "push.gpgSign=false",
	"-c", "advice.detachedHead=false",
}

// Hardening is the command-line config every git gets, "-c" and its
// value in turn.
func Hardening() []string { return append([]string(nil), hardening...) }

// Argv is the argv of one git, program first: prefix (the confinement,
// program first; nil for none), then git by its absolute path, the
// hardening, and args. A "-c" in args wins over the hardening. The
// hardening is command-line config, the scope that wins over the system,
// global and repository ones: no hook, no fsmonitor, no credential helper
// and no askpass but one the caller names after it, no redirect followed,
// no `git for-each-ref` run in an alternate, no gc or maintenance.
func Argv(prefix []string, git string, args ...string) []string {
	argv := append(append([]string(nil), prefix...), git)
	return append(append(argv, hardening...), args...)
}

// Home is where one effect's git keeps its own files, in the effect's
// scratch: HOME with the global config, TMPDIR, and the ceiling above
// which git looks for no repository.
type Home struct {
	Dir     string // HOME and XDG_CONFIG_HOME; the global config is Dir/gitconfig
	Tmp     string // TMPDIR: /tmp is denied to a confined git
	Ceiling string // GIT_CEILING_DIRECTORIES
}

// Config is the path of the global config.
func (h Home) Config() string { return filepath.Join(h.Dir, "gitconfig") }

// WriteConfig writes the global config, mode 0600: safe.directory for
// each of safe, and nothing else. git 2.39 honours safe.directory in the
// global config only, and the worktree is another uid's.
func (h Home) WriteConfig(safe ...string) error {
	var b strings.Builder
	b.WriteString("[safe]\n")
	for _, d := range safe {
		fmt.Fprintf(&b, "\tdirectory = %s\n", d)
	}
	return os.WriteFile(h.Config(), []byte(b.String()), 0o600)
}

// Env is the whole environment of git (and of a program beside it:
// ssh, gpg): nothing of the Effector's own. It allows no transport; an
// entry of extra replaces the one of the same name, so Allow in extra
// names the transports one git may use. Written whole: no system config,
// a global config of the Effector's own, GIT_ALLOW_PROTOCOL naming the one
// transport a call may use (none by default), which no config can widen
// (a repository's protocol.<name>.allow beats command-line
// protocol.allow, but not this), no terminal prompt, no replace refs, no
// optional lock taken in a repository it only reads.
func (h Home) Env(extra ...string) []string {
	env := []string{
		"PATH=" + FixedPath,
		"HOME=" + h.Dir,
		"XDG_CONFIG_HOME=" + h.Dir,
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=" + h.Config(),
		"GIT_ATTR_NOSYSTEM=1",
		"GIT_CEILING_DIRECTORIES=" + h.Ceiling,
		"GIT_TERMINAL_PROMPT=0",
		"GIT_NO_REPLACE_OBJECTS=1",
		// A git that only reads a repository (status) writes nothing
		// in it: no index refreshed, no lock taken.
		"GIT_OPTIONAL_LOCKS=0",
		// The transports git may use, whatever any config says
		// (protocol.<name>.allow in a repository's config included):
		// none unless extra names some.
		Allow(),
		// A transport whose policy is "user" is never allowed (should
		// GIT_ALLOW_PROTOCOL ever be unset).
		"GIT_PROTOCOL_FROM_USER=0",
		"LC_ALL=C",
		"TMPDIR=" + h.Tmp,
	}
	at := map[string]int{}
	for i, kv := range env {
		n, _, _ := strings.Cut(kv, "=")
		at[n] = i
	}
	for _, kv := range extra {
		n, _, _ := strings.Cut(kv, "=")
		if i, ok := at[n]; ok {
			env[i] = kv
			continue
		}
		at[n] = len(env)
		env = append(env, kv)
	}
	return env
}

// Allow is the environment entry that lets git use the transports named
// (file, ssh, https: git's names for them) and no other.
func Allow(transports ...string) string {
	return "GIT_ALLOW_PROTOCOL=" + strings.Join(transports, ":")
}

// Limits of what is kept of a program's output.
const (
	MaxStdout = 16 << 20
	MaxStderr = 64 << 10
)

// Capped keeps the first Limit bytes written to it and drops the rest;
// a Write never fails, so the program never blocks on a full pipe.
type Capped struct {
	B     []byte
	Limit int
}

func (c *Capped) Write(p []byte) (int, error) {
	if room := c.Limit - len(c.B); room > 0 {
		c.B = append(c.B, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// LastLine is the last line of a program's output that holds something,
// trimmed, or "no message".
func LastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			return l
		}
	}
	return "no message"
}

// Reason is git's reason in its stderr: the first "fatal:" or "error:"
// line (what follows it is often advice), else its last line.
func Reason(stderr []byte) string {
	for _, l := range strings.Split(string(stderr), "\n") {
		if strings.HasPrefix(l, "fatal: ") || strings.HasPrefix(l, "error: ") {
			return strings.TrimSpace(l)
		}
	}
	return LastLine(stderr)
}

// Err is the error of a git that failed: "git <what>: <err> (<reason>)".
func Err(what string, stderr []byte, err error) error {
	return fmt.Errorf("git %s: %v (%s)", what, err, Reason(stderr))
}
