// Package pushkind is the Effector's `push` kind (ADR-0068): the
// agent's pinned commit leaves the sandbox for its Repo Slot's remote, sent
// with the slot's git.credentials entry and, when the slot signs, rewritten
// as signed commits — with keys the agent's container never holds.
//
// Invariants:
//   - Prepare starts nothing: it checks the start and reads the pinned
//     commit from the worktree's files in Go (an os.Root of the worktree;
//     .git must be its own directory). The start answer names it, and a
//     later change of the worktree changes nothing: only that sha is
//     fetched.
//   - No git runs in the agent's repository. The push makes a bare
//     repository in its own scratch (`git init --template=`: no hook, no
//     config the agent chose, no alternates, no attributes), fetches the
//     pinned commit into it over git's transport (upload-pack reads the
//     worktree; it runs no hook and no program the repository names), and
//     pushes from there. Nothing in the worktree — .git/config, hooks,
//     .gitattributes filters, core.sshCommand, core.fsmonitor,
//     credential.helper, includeIf, a .gitmodules url — runs or is read
//     as the push's configuration.
//   - Every git, ssh, ssh-keygen, gpg and gpg-agent runs by its absolute
//     path in /usr/local/bin:/usr/bin:/bin, with gitrun's environment,
//     written whole (GIT_CONFIG_NOSYSTEM, a HOME and a global config of
//     its own, GIT_ALLOW_PROTOCOL naming the one transport a step uses,
//     no SSH_AUTH_SOCK, no PATH but the fixed one); every git gets
//     gitrun's command-line config, and runs confined (`effector confine`): it writes only the push's
//     scratch, reads the worktree only for the fetch, and is denied every
//     other path of the Effector's own (a worktree's alternates entry or
//     link reaches nothing).
//   - A push sends only objects that are the worktree's own or that the
//     cache of its own remote holds. A node cache (Options.Repos) is
//     bound to the remote it mirrors by its name, CacheName of the slot's
//     url; the worktree's objects/info/alternates may name that cache and
//     nothing else (read in Go before the answer; any other entry, or an
//     http-alternates file, is rejected at start). That cache is data,
//     never configuration: the clean repository's alternates name it,
//     every git of the push gets it alone as a read-only --read-tree
//     (Repos stays denied, so no alternates entry, chained or linked,
//     reaches another cache after the answer either), and
//     core.alternateRefsCommand=true keeps git from running for-each-ref
//     in it, so no git runs in a cache and its config, hooks and includes
//     are never read. Every object the push sends — commit, tree, blob or
//     tag — is read by name from the worktree's own objects or that cache
//     by a git that can open nothing else, before anything is sent.
//   - Every commit a push that reads a cache sends — the pinned commit and
//     its history no ref of the remote holds — is the worktree's own: read
//     from its .git/objects alone (GIT_OBJECT_DIRECTORY, in an empty
//     repository of its own; no cache and not the clean repository
//     readable) and hashed to its name; else the push is rejected at
//     start. A commit only a cache holds is never pushed. Trees, blobs and
//     tags may be the push's cache's.
//   - The credentials are the bytes config read at start, copied into the
//     push's scratch (mode 0600) where a program must read a file, and
//     removed with the scratch once the push settled. ssh runs with
//     IdentitiesOnly, StrictHostKeyChecking=yes against the entry's
//     known_hosts, no agent and no config file (-F /dev/null). A token
//     reaches git only through `effector credential`, git's credential
//     helper, which reads it from the scratch: never argv, never an env,
//     never a file git reads.
//   - A GPG push holds classlock.GPG from before its first process until
//     its gpg-agent is gone (SIGTERM to the agent's group, SIGKILL after
//     a while, then the settle loop): no credentialed command's child is
//     alive beside a gpg-agent.
//   - An outcome exists only after the settle loop (reap.Tracker.Settle)
//     of every process the push started, and after its scratch is gone.
//   - A reason names no value and no path of a secret: the push's scratch
//     is written as "<scratch>" in every line of git's or ssh's it quotes,
//     and the server scrubs every held value (the entry's files among
//     them) from the outcome.
package pushkind

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"jr2.dev/boundary/effector/internal/classlock"
	"jr2.dev/boundary/effector/internal/config"
	"jr2.dev/boundary/effector/internal/effect"
	"jr2.dev/boundary/effector/internal/gitrun"
	"jr2.dev/boundary/effector/internal/reap"
	"jr2.dev/boundary/effector/internal/wire"
	"jr2.dev/boundary/internal/landlock"
)

// Stages of a rejection.
const (
	StageStart = "start"
	StageSign  = "sign"
	StagePush  = "push"
)

// Options configure the kind. New reads them once.
type Options struct {
	// Pushes are effector.json's slots; Entries the git.credentials
	// entries config read.
	Pushes  []config.Push
	Entries []config.GitEntry
	// Work is the worktree (read only); Scratch the root under which each
	// push gets a directory.
	Work, Scratch string
	// Repos is JR2_EFFECTOR_REPOS, the node's caches (read only), or "":
	// a cache the worktree's alternates names beneath it is an object
	// source of the push.
	Repos string
	// CAFile is JR2_CA_FILE: trusted by an https push beside the system's
	// roots.
	CAFile string
	// Deny is every path of the Effector's own (config.OwnPaths).
	Deny []string
	// Node and Probe: NODE_NAME, and what the Landlock probe returned.
	Node  string
	Probe error
	// Self is the effector binary (confine, credential).
	Self    string
	Tracker *reap.Tracker
	Lock    *classlock.Lock
	// AgentGrace is how long a gpg-agent has between SIGTERM and SIGKILL;
	// zero means DefaultAgentGrace.
	AgentGrace time.Duration
}

// DefaultAgentGrace is how long the push's gpg-agent has to end on SIGTERM.
const DefaultAgentGrace = 2 * time.Second

// Kind is the push kind. It is safe for concurrent use.
type Kind struct {
	o     Options
	progs map[string]string // program name → absolute path in FixedPath
	seq   struct {
		sync.Mutex
		n uint64
	}
}

// programs are the ones a push may run, found once in the fixed PATH.
var programs = []string{"git", "ssh", "ssh-keygen", "gpg", "gpg-agent"}

// New returns the kind.
func New(o Options) *Kind {
	if o.AgentGrace <= 0 {
		o.AgentGrace = DefaultAgentGrace
	}
	k := &Kind{o: o, progs: map[string]string{}}
	for _, p := range programs {
		if path, err := gitrun.LookFixed(p); err == nil {
			k.progs[p] = path
		}
	}
	return k
}

// prepared is one checked push start.
type prepared struct {
	id      string
	push    *wire.Push
	remote  wire.Remote
	entry   *config.GitEntry
	sign    string // "", config.SignSSH, config.SignGPG
	pinned  string
	timeout time.Duration
	// cache is the objects directory of the node cache of the push's
	// remote (cacheName beneath Options.Repos) when the worktree's
	// alternates names it, else ""; tips the commits its refs name. Both
	// are read from the worktree's files before the answer.
	cache, cacheName string
	tips             []string
	// rejected, when set, is the outcome: the start was read and cannot
	// run (stage start).
	rejected string
}

// Prepare checks a push start. A start that cannot run is not a 400: it
// settles rejected at stage start, with the reason (docs/effector-push.md:
// a start that cannot run is an outcome the caller reads, not a refusal).
func (k *Kind) Prepare(id string, s *wire.Start) (*effect.Plan, error) {
	if s.Push == nil {
		return nil, fmt.Errorf("push: required with kind %q", wire.KindPush)
	}
	p := k.prepare(id, s)
	return &effect.Plan{
		Method:   "-",
		Host:     "-",
		KeptStop: effect.DropStop,
		Pinned:   p.pinned,
		Run: func(ctx context.Context, _ *effect.Scrubber) wire.Outcome {
			if p.rejected != "" {
				return rejected(StageStart, p.rejected)
			}
			return k.run(ctx, p)
		},
	}, nil
}

func (k *Kind) prepare(id string, s *wire.Start) *prepared {
	timeout := s.TimeoutMs
	if timeout == 0 {
		timeout = wire.DefaultTimeoutMs
	}
	p := &prepared{id: id, push: s.Push, timeout: time.Duration(timeout) * time.Millisecond}
	p.remote, _ = wire.ParseRemote(s.Push.Slot.URL) // the decoder checked it
	p.rejected = k.check(p)
	if p.rejected != "" {
		return p
	}
	if p.pinned = s.Push.Pin; p.pinned == "" {
		sha, err := resolveHead(k.o.Work)
		if err != nil {
			p.rejected = err.Error()
			return p
		}
		p.pinned = sha
	} else if _, err := resolveHead(k.o.Work); err != nil {
		// A pin is fetched from the worktree too: it must be a repository.
		p.rejected = err.Error()
	}
	if p.rejected == "" {
		var objects string
		p.cacheName, objects = boundCache(k.o.Repos, s.Push.Slot.URL)
		if p.cache, p.rejected = alternatesRule(k.o.Work, p.cacheName, objects); p.cache != "" {
			p.tips = worktreeTips(k.o.Work)
		}
	}
	return p
}

// check returns why a start cannot run, or "".
func (k *Kind) check(p *prepared) string {
	slot := p.push.Slot
	push, ok := findPush(k.o.Pushes, slot.Name)
	if !ok {
		return fmt.Sprintf("slot %q is not a Repo Slot this Effector pushes (effector.json pushes names none of that name)", slot.Name)
	}
	p.sign = push.Sign
	for i := range k.o.Entries {
		if k.o.Entries[i].Name == slot.Credentials {
			p.entry = &k.o.Entries[i]
		}
	}
	if p.entry == nil {
		return fmt.Sprintf("git.credentials entry %q: this Effector holds no such entry; the Sandbox's gitCredentials must name it", slot.Credentials)
	}
	if !underPrefix(slot.URL, p.entry.URL) {
		return fmt.Sprintf("slot %q: its url is not under git.credentials entry %q's url %s; its credential is spent on that url alone", slot.Name, p.entry.Name, p.entry.URL)
	}
	switch p.remote.Transport {
	case wire.TransportSSH:
		for _, f := range []string{config.GitIdentity, config.GitKnownHosts} {
			if _, ok := p.entry.Files[f]; !ok {
				return fmt.Sprintf("git.credentials entry %q holds no %s; an ssh push needs identity and known_hosts", p.entry.Name, f)
			}
		}
	case wire.TransportHTTPS:
		if _, ok := p.entry.Files[config.GitPassword]; !ok {
			return fmt.Sprintf("git.credentials entry %q holds no password; an https push needs its token", p.entry.Name)
		}
		if p.entry.Username == "" {
			return fmt.Sprintf("git.credentials entry %q: entry.json names no username; an https push sends the token with it", p.entry.Name)
		}
	}
	switch {
	case k.o.Work == "" || k.o.Scratch == "":
		return "this Effector has no worktree or scratch (JR2_EFFECTOR_WORK, JR2_EFFECTOR_SCRATCH): a push runs on a Sandbox Effector"
	case k.o.Probe != nil:
		return "a push reads the worktree only confined: " + landlock.Unavailable(k.o.Node, k.o.Probe)
	case k.o.Self == "":
		return "the Effector cannot find its own binary, which confines the push's git"
	}
	need := []string{"git"}
	if p.remote.Transport == wire.TransportSSH {
		need = append(need, "ssh")
	}
	switch p.sign {
	case config.SignSSH:
		need = append(need, "ssh-keygen")
	case config.SignGPG:
		need = append(need, "gpg", "gpg-agent")
	}
	for _, n := range need {
		if k.progs[n] == "" {
			return fmt.Sprintf("the Effector's image holds no %s in %s; this push needs it", n, gitrun.FixedPath)
		}
	}
	return ""
}

func findPush(pushes []config.Push, slot string) (config.Push, bool) {
	for _, p := range pushes {
		if p.Slot == slot {
			return p, true
		}
	}
	return config.Push{}, false
}

// underPrefix reports whether url is under an entry's url prefix: equal
// to it, or past it at a '/' or ':' (so "…/org" does not cover "…/org-x").
func underPrefix(url, prefix string) bool {
	if !strings.HasPrefix(url, prefix) {
		return false
	}
	if len(url) == len(prefix) || strings.HasSuffix(prefix, "/") || strings.HasSuffix(prefix, ":") {
		return true
	}
	return url[len(prefix)] == '/'
}

func rejected(stage, reason string) wire.Outcome {
	return wire.Outcome{Kind: wire.OutcomeRejected, Stage: stage, Reason: reason}
}

// key is the Tracker's name for one phase of one run of a push.
func (k *Kind) key(id, phase string) string {
	k.seq.Lock()
	defer k.seq.Unlock()
	k.seq.n++
	return fmt.Sprintf("push/%s/%d/%s", id, k.seq.n, phase)
}
