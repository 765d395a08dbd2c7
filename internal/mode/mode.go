// Package mode is the one layer between an engine's decision and the
// egress, shared by the contained run's mediator and the Effector's http
// kind, so a mode means the same in both: live (send), read-only (only
// reads pass), replay (answer from a verified recording, send nothing),
// faults (send, and inject seeded faults) and preflight (send nothing,
// record the plan).
//
// A host computes each effect's canonical form (Canon: the request as the
// agent asked for it, a held value only as its label), asks the Layer
// before anything leaves (Before), acts on a Refuse verdict with its own
// refusal answer, and otherwise sends through the verdict (Verdict.RoundTrip),
// which sends live, answers from the record, or injects the drawn fault.
//
// Invariant: in replay and preflight no byte of any request leaves the
// machine: Verdict.RoundTrip never calls the next RoundTripper; in
// read-only only a read (GET, HEAD, OPTIONS, no body) reaches it. The
// records this package writes (effect-planned, fault-injected,
// replay-divergence) carry canonical forms only, which hold labels, never
// values. A fault draw depends only on the seed, the effect's canonical
// form and its index among equal forms, so one seed against one run
// injects the same faults.
package mode

import (
	"errors"
	"net/http"
	"time"

	"jr2.dev/boundary/internal/bundle"
)

// The modes.
const (
	Live      = "live"
	ReadOnly  = "read-only"
	Replay    = "replay"
	Faults    = "faults"
	Preflight = "preflight"
)

// Names are what a host calls each setting, so an error names the flag or
// the environment variable the user sets (for example "--faults" or
// "JR2_EFFECTOR_FAULTS").
type Names struct {
	Mode, From, Seed, Faults, Timing string
}

// Config is a mode as the user gave it; Parse checks it.
type Config struct {
	Mode   string        // one of the modes; "" is Live
	From   string        // replay (required) and preflight (optional): a bundle to answer from
	Timing string        // replay: "fast" (default) or "recorded" (the recorded gaps)
	Seed   uint64        // faults
	Faults string        // faults: SPEC, e.g. "write=0.1,read=0.02" or "api.example.com=0.5"
	Bound  time.Duration // faults: how long a timeout fault holds the answer at most; 0 is 30 s
}

// Effect is an effect's canonical form: the request as the agent asked for
// it, a held value only as its label ("[secret:NAME]") or its stand-in.
type Effect struct {
	Method string      `json:"method"`
	Scheme string      `json:"scheme"`
	Host   string      `json:"host"` // lowercase
	Port   int         `json:"port"`
	Path   string      `json:"path"`
	Query  string      `json:"query,omitempty"`
	Header [][2]string `json:"headers,omitempty"`     // the identifying headers: names lowercase, sorted, volatile ones left out
	Body   string      `json:"body_sha256,omitempty"` // hex sha-256 of the body as recorded; "" for none
	Length int64       `json:"body_length,omitempty"`
}

// Canon returns the canonical form of a request: method, its absolute url
// (scheme://host[:port]/path?query), its headers as [name, value] pairs
// (values as the agent sent them: stand-ins, or labels) and the body as
// recorded (nil for none).
func Canon(method, rawURL string, header [][2]string, body []byte) (Effect, error) {
	return Effect{}, errNotBuilt
}

// Key is the form as one comparable string.
func (e Effect) Key() string { return "" }

// Class is "read" for GET, HEAD and OPTIONS without a body, else "write".
func (e Effect) Class() string { return "" }

// Action is what a verdict tells the host to do.
type Action int

const (
	// Send: call Verdict.RoundTrip (live, replay, preflight and faults all
	// go through it).
	Send Action = iota
	// Refuse: answer the agent with the host's own refusal naming Rule and
	// Reason; nothing is sent.
	Refuse
)

// RuleReadOnly is the rule a read-only refusal is recorded with.
const RuleReadOnly = "mode:read-only"

// Verdict is the layer's answer for one effect.
type Verdict struct {
	Action Action
	Rule   string // Refuse: the rule to record
	Reason string // Refuse: the text for the agent, naming the mode
	// unexported: what RoundTrip does (send, answer from the record, the
	// planned answer, a fault).
}

// RoundTrip sends req through next, or answers it without next (replay,
// preflight, a fault that replaces the answer), or wraps next's answer (a
// fault that cuts, corrupts or resets the body).
func (v Verdict) RoundTrip(next http.RoundTripper, req *http.Request) (*http.Response, error) {
	return next.RoundTrip(req)
}

// Layer is one run's (or one Effector's) mode. It is safe for concurrent
// use.
type Layer struct {
	cfg Config
	rec bundle.Recorder
}

// New checks cfg (an error names the setting by names and says the fix)
// and, for replay and preflight with From, reads the source bundle, which
// must verify. rec is where the layer's own records go.
func New(cfg Config, names Names, rec bundle.Recorder) (*Layer, error) {
	if cfg.Mode == "" || cfg.Mode == Live {
		return &Layer{cfg: Config{Mode: Live}, rec: rec}, nil
	}
	return nil, errNotBuilt
}

// Mode is the layer's mode.
func (l *Layer) Mode() string { return l.cfg.Mode }

// Before decides an effect before anything is sent, and records what the
// mode records about it (effect-planned, fault-injected,
// replay-divergence). at is the seq of the host's own record of the
// request (0 when none), which the layer's records point to.
func (l *Layer) Before(e Effect, at uint64) Verdict {
	return Verdict{Action: Send}
}

// Unasked lists, in replay, the recorded effects the replay never asked
// for, in recorded order; the host puts them in its closing record.
func (l *Layer) Unasked() []Effect { return nil }

var errNotBuilt = errors.New("mode: not built yet")

// Sends reports whether the mode sends effects out at all: false for
// replay and preflight, whose hosts then record no secret as spent.
func (l *Layer) Sends() bool { return l.cfg.Mode != Replay && l.cfg.Mode != Preflight }
