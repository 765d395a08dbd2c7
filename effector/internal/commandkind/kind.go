// Package commandkind is the Effector's credentialed `command` kind
// (ADR-0068): the author's argv, with the secrets it names in its env, run
// in a clean checkout of a pinned commit of the worktree, under a keeper of
// its own and confined with Landlock, its output scrubbed and bounded.
//
// Invariants:
//   - Prepare starts nothing: it checks a start and returns a plan, or the
//     400 reason (no Landlock, commands off, a malformed start).
//   - The Effector never executes argv itself. Every process an effect
//     starts goes through the Effector's one reap.Tracker, in a session of
//     its own; the program runs as `effector keep --report-fd 3 -- effector
//     confine … -- ARGV`, so nothing of it runs before
//     landlock_restrict_self; every path the Effector holds
//     (config.OwnPaths) is denied to it (Kind).
//   - An outcome exists only after the settle loop (reap.Tracker.Settle):
//     no process the effect started, and no descendant, outlives it. A
//     command holds classlock.Command from before its first process until
//     then: no command child is alive beside a GPG push.
//   - A secret value reaches the child only in its env (what the start
//     names, HOME, TMPDIR, a fixed PATH and LANG); never argv, a log line
//     or a file of the Effector's. git never takes config or hooks from the
//     agent's repository (the clean checkout, git_linux.go).
//
// Not covered: the network (egress is open); a secret the command names,
// which the child reads by design and may transform past the scrubber; a
// child that kills its own keeper on a kernel without Landlock's signal
// scope (ABI 6) — its daemon then belongs to the Effector, whose next
// settle ends it.
package commandkind

import (
	"context"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"jr2.dev/boundary/effector/internal/classlock"
	"jr2.dev/boundary/effector/internal/effect"
	"jr2.dev/boundary/effector/internal/gitrun"
	"jr2.dev/boundary/effector/internal/reap"
	"jr2.dev/boundary/effector/internal/wire"
	"jr2.dev/boundary/internal/landlock"
)

// FixedPath is the child's PATH unless its start names one: the one PATH
// the Effector's own programs are found in (gitrun.FixedPath).
const FixedPath = gitrun.FixedPath

// Defaults of the stop and the output.
const (
	// DefaultGrace is how long a stopped command has between SIGTERM and
	// SIGKILL.
	DefaultGrace = 5 * time.Second
	// DefaultOutputGrace is how long the output stays open after the top
	// process (the keeper) ended: a descendant that keeps it open does not
	// hold the outcome.
	DefaultOutputGrace = time.Second
)

// Options configure the kind. New reads them once; the kind never changes
// them.
type Options struct {
	// Commands is effector.json's commands.
	Commands bool
	// Node is NODE_NAME, named in the Landlock reason.
	Node string
	// Probe is what the Landlock probe at start returned; nil: it passed.
	Probe error

	// Values returns a held secret's value.
	Values func(name string) ([]byte, bool)
	// SecretsDir holds each secret as the file SecretsDir/NAME: what a
	// secretPath part names, and what the child may read.
	SecretsDir string
	// Work is the worktree (a git repository, read only); Scratch the
	// writable root under which each effect gets a directory.
	Work, Scratch string
	// Deny is every path of the Effector's own (config.OwnPaths), passed
	// to the confiner as --deny.
	Deny []string

	// Self is the effector binary, run as `keep` and `confine`.
	Self string
	// Tracker starts and settles every process of every effect; Lock is the
	// Effector's class lock. Both are shared with the other kinds.
	Tracker *reap.Tracker
	Lock    *classlock.Lock

	// Grace and OutputGrace: zero means DefaultGrace and
	// DefaultOutputGrace (tests shorten them).
	Grace, OutputGrace time.Duration
}

// Kind is the command kind. It is safe for concurrent use. What a child
// may reach is package confine's rules: the image's system paths, the
// devices, its own scratch (the checkout, HOME and TMPDIR — three
// directories, so the git dir the Effector made for the checkout is not
// among them), and the secret files its env names by secretPath. Every
// path the Effector holds (config.OwnPaths) is denied.
type Kind struct {
	o   Options
	git string // git's absolute path in FixedPath, or ""
	// gitErr is why no git was found.
	gitErr error
	seq    struct {
		sync.Mutex
		n uint64
	}
}

// New returns the kind.
func New(o Options) *Kind {
	if o.Grace <= 0 {
		o.Grace = DefaultGrace
	}
	if o.OutputGrace <= 0 {
		o.OutputGrace = DefaultOutputGrace
	}
	k := &Kind{o: o}
	k.git, k.gitErr = gitrun.LookFixed("git")
	return k
}

// Unavailable is the pinned reason for a node whose Landlock probe failed:
// "landlock: unavailable on node NODE (ERRNO: what it means)".
func Unavailable(node string, probe error) string { return landlock.Unavailable(node, probe) }

// ErrCommandsOff is the reason of an Effector whose effector.json says
// commands false.
var ErrCommandsOff = errors.New("command: this Effector runs no command (effector.json has commands false); place the command on its Workspace's Sandbox Effector")

// Prepare checks a command start. The error is the 400 reason.
func (k *Kind) Prepare(id string, s *wire.Start) (*effect.Plan, error) {
	p, built, err := k.prepare(id, s)
	if err != nil {
		return nil, err
	}
	return &effect.Plan{
		Method:   "-",
		Host:     "-",
		Built:    built,
		KeptStop: effect.DidNotRun,
		Stop:     p.requestStop,
		Run: func(ctx context.Context, sc *effect.Scrubber) wire.Outcome {
			return k.run(ctx, sc, p)
		},
	}, nil
}

// prepare checks s and returns what a run needs, and the strings built
// from each secret.
func (k *Kind) prepare(id string, s *wire.Start) (*prepared, map[string][][]byte, error) {
	switch {
	case k.o.Probe != nil:
		return nil, nil, errors.New(Unavailable(k.o.Node, k.o.Probe))
	case !k.o.Commands:
		return nil, nil, ErrCommandsOff
	case k.gitErr != nil:
		return nil, nil, fmt.Errorf("command: this Effector cannot check out the worktree: %v; the image must hold git in %s", k.gitErr, FixedPath)
	case s.Command == nil:
		return nil, nil, errors.New("command: required with kind \"command\"")
	}
	c := s.Command
	p := &prepared{id: id, argv: c.Argv, max: wire.DefaultMaxOutputBytes, stop: make(chan struct{})}
	if c.MaxOutputBytes > 0 {
		p.max = int(c.MaxOutputBytes)
	}
	timeout := s.TimeoutMs
	if timeout == 0 {
		timeout = wire.DefaultTimeoutMs
	}
	p.timeout = time.Duration(timeout) * time.Millisecond
	var err error
	if p.dir, err = CheckDir(c.Dir); err != nil {
		return nil, nil, err
	}
	if p.pin, err = CheckPin(c.Pin); err != nil {
		return nil, nil, err
	}
	env, err := k.buildEnv(c.Env)
	if err != nil {
		return nil, nil, err
	}
	p.env, p.reads, p.held = env.vars, env.reads, env.held
	return p, env.built, nil
}

// prepared is one checked command start.
type prepared struct {
	id    string
	argv  []string
	env   []string // NAME=value, what the start names, sorted
	reads []string // the secret files the env names by secretPath
	// held is the value of each secret read by secretPath when the start
	// was prepared: its file must still hold it when the command runs.
	held    map[string][]byte
	dir     string // clean and relative; "." is the checkout's root
	pin     string // a commit sha, or "" for the worktree's HEAD
	max     int
	timeout time.Duration

	stopOnce sync.Once
	stop     chan struct{} // closed by the DELETE hook
}

func (p *prepared) requestStop() { p.stopOnce.Do(func() { close(p.stop) }) }

func (p *prepared) stopped() bool {
	select {
	case <-p.stop:
		return true
	default:
		return false
	}
}

// key is the Tracker's name for one run of p: an id may run again once its
// outcome was forgotten.
func (k *Kind) key(id string) string {
	k.seq.Lock()
	defer k.seq.Unlock()
	k.seq.n++
	return fmt.Sprintf("command/%s/%d", id, k.seq.n)
}

// CheckDir holds a start's dir to a clean relative path inside the
// checkout, and returns it ("." for none).
func CheckDir(dir string) (string, error) {
	const field = "command.dir"
	switch {
	case dir == "" || dir == ".":
		return ".", nil
	case strings.IndexByte(dir, 0) >= 0:
		return "", fmt.Errorf("%s: holds a NUL byte", field)
	case path.IsAbs(dir):
		return "", fmt.Errorf("%s: %q is absolute; give a directory relative to the checkout's root", field, dir)
	}
	clean := path.Clean(dir)
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("%s: %q leaves the checkout; give a directory inside it", field, dir)
	}
	if clean != dir {
		return "", fmt.Errorf("%s: %q is not clean; write it %q", field, dir, clean)
	}
	return clean, nil
}

// CheckPin holds a start's pin to a full commit sha: 40 lowercase hex
// characters, or absent (the worktree's HEAD).
func CheckPin(pin string) (string, error) {
	if pin == "" || wire.ValidSHA(pin) {
		return pin, nil
	}
	return "", fmt.Errorf("command.pin: %q is not a commit sha; give the full 40 lowercase hex characters, or leave it out for the worktree's HEAD", pin)
}

// reserved are the names the Effector sets itself: rule 3's private
// TMPDIR, and HOME in the effect's scratch.
var reserved = map[string]string{
	"HOME":   "the Effector sets it to the effect's own scratch",
	"TMPDIR": "the Effector sets it to the effect's own scratch, which no other child reads",
}

// loaderEnv are read by the dynamic loader and the C library of every
// dynamically linked program — among them the keeper and the confiner,
// which run before the confinement — glibc's list of variables it drops
// for a more privileged program (UNSECURE_ENVVARS), TMPDIR aside.
var loaderEnv = []string{
	"GCONV_PATH", "GETCONF_DIR", "GLIBC_TUNABLES", "HOSTALIASES", "LOCALDOMAIN", "LOCPATH",
	"MALLOC_TRACE", "NIS_PATH", "NLSPATH", "RESOLV_HOST_CONF", "RES_OPTIONS", "TZDIR",
}

// CheckEnvName refuses a name the child may not be given: one the Effector
// sets, or one the loader of the unconfined keeper and confiner would read.
func CheckEnvName(name string) error {
	field := "command.env." + name
	if why, ok := reserved[name]; ok {
		return fmt.Errorf("%s: %s; leave it out", field, why)
	}
	if strings.HasPrefix(name, "LD_") || slices.Contains(loaderEnv, name) {
		return fmt.Errorf("%s: read by the dynamic loader of the Effector's keeper and confiner, which run before the confinement; set it inside the command (sh -c '%s=… exec prog')", field, name)
	}
	return nil
}

// childEnv is what buildEnv makes of a start's env.
type childEnv struct {
	vars  []string
	reads []string
	held  map[string][]byte // secretPath name -> its value now
	built map[string][][]byte
}

// buildEnv fills the start's env: text as it is, a secret part with the
// held value, a secretPath part with the path of the secret's file. An env
// value a secret was joined into is a string the effect built from it,
// which answers are scrubbed for too.
func (k *Kind) buildEnv(env map[string]wire.Value) (childEnv, error) {
	var out childEnv
	names := make([]string, 0, len(env))
	for n := range env {
		names = append(names, n)
	}
	sort.Strings(names)
	reads := map[string]bool{}
	for _, name := range names {
		if err := CheckEnvName(name); err != nil {
			return out, err
		}
		var b strings.Builder
		var from []string
		for _, part := range env[name] {
			switch part.Kind {
			case wire.PartText:
				b.WriteString(part.Value)
			case wire.PartSecret:
				v, ok := k.o.Values(part.Value)
				if !ok {
					return out, fmt.Errorf("secret %q: this Effector holds no secret of that name; place it on this Effector or name one it holds", part.Value)
				}
				b.Write(v)
				from = append(from, part.Value)
			case wire.PartSecretPath:
				v, ok := k.o.Values(part.Value)
				if !ok {
					return out, fmt.Errorf("secret %q: this Effector holds no secret of that name; place it on this Effector or name one it holds", part.Value)
				}
				if out.held == nil {
					out.held = map[string][]byte{}
				}
				out.held[part.Value] = v
				f := filepath.Join(k.o.SecretsDir, part.Value)
				b.WriteString(f)
				if !reads[f] {
					reads[f] = true
					out.reads = append(out.reads, f)
				}
			}
		}
		v := b.String()
		if strings.IndexByte(v, 0) >= 0 {
			return out, fmt.Errorf("command.env.%s: holds a NUL byte, which no environment value can", name)
		}
		for _, s := range from {
			if held, _ := k.o.Values(s); string(held) == v {
				continue // the value itself: held already
			}
			if out.built == nil {
				out.built = map[string][][]byte{}
			}
			out.built[s] = append(out.built[s], []byte(v))
		}
		out.vars = append(out.vars, name+"="+v)
	}
	return out, nil
}

// notRun is the outcome of a command whose program never started.
func notRun(reason string) wire.Outcome {
	return wire.Outcome{Kind: wire.OutcomeUnknown, Reason: "did not run: " + reason}
}

// baseEnv is what every child gets beside what its start names; a start
// may name PATH and LANG itself.
func baseEnv(named []string, home, tmp string) []string {
	env := append([]string(nil), named...)
	has := map[string]bool{}
	for _, kv := range named {
		n, _, _ := strings.Cut(kv, "=")
		has[n] = true
	}
	env = append(env, "HOME="+home, "TMPDIR="+tmp)
	if !has["PATH"] {
		env = append(env, "PATH="+FixedPath)
	}
	if !has["LANG"] {
		env = append(env, "LANG=C.UTF-8")
	}
	return env
}
