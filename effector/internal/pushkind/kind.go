// Package pushkind is the Effector's `push` kind (ADR-0068): the agent's
// pinned commit leaves the sandbox for its Repo Slot's remote, sent with the
// slot's git.credentials entry and, when the slot signs, rewritten as signed
// commits — with keys the agent's container never holds.
// docs/effector-push.md is the contract and says how each step holds.
//
// Invariants:
//   - Prepare starts nothing: it reads the pinned commit from the worktree's
//     files in Go (an os.Root; .git its own directory); only that sha is
//     fetched, whatever the worktree does later.
//   - No git runs in the agent's repository, and nothing of it (config,
//     hooks, attributes, a .gitmodules url) is read as configuration: the
//     push fetches the commit over git's transport into a clean bare
//     repository of its own scratch and pushes from there. Every program
//     runs by absolute path with gitrun's environment, written whole, and
//     every git runs confined (`effector confine`): it writes only the
//     push's scratch, reads the worktree only for the fetch and the push's
//     own cache as data, and is denied every other path of the Effector's.
//   - A push sends only objects that are the worktree's own or that the
//     cache of its own remote (CacheName) holds, and every commit it sends
//     is the worktree's own, hashed to its name; else it is rejected at
//     start. No git runs in a cache.
//   - The credentials are the bytes config read at start, copied into the
//     push's scratch (mode 0600) where a program must read a file, and
//     removed with it once the push settled; a token reaches git only
//     through `effector credential`, never argv, an env or a file git
//     reads. A GPG push holds classlock.GPG until its gpg-agent is gone.
//   - An outcome exists only after every process the push started settled
//     (reap.Tracker.Settle) and its scratch is gone; a reason names no
//     value and no path of a secret ("<scratch>").
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
