// Package server is the Effector's signed HTTP wire and its one state
// machine: effects start, attach, long-poll, stop (or keep a stop), settle
// exactly once, stay answerable for a while after they settle, and hold a
// drain open until they were read.
//
// Invariants:
//   - A request is verified (guard) before any route is read; a refusal is
//     401 with an empty body and no signature.
//   - Every other answer is JSON naming the replica, scrubbed, and only then
//     signed over the pinned lines: every string of an outcome when it
//     settles for every held secret, the placement key and what the effect
//     built from a secret (effect.Scrubber); then the whole encoded answer
//     for every held secret and the placement key. No answer holds a string
//     the effect built except through an outcome's strings, so that is
//     where what it built is scrubbed.
//   - The held secrets' automaton (and its case-folded twin) is built in
//     New, and again when the secrets rotate (SetHeld, one atomic swap); an
//     effect keeps the scrubber it started with. An effect's own state —
//     its plan, its scrubber — lives only until it settles; what stays for
//     re-reads until Expire is the scrubbed outcome and a few words about
//     the effect.
//   - An effect's Run is called at most once per id, and its outcome is
//     settled exactly once.
//   - Log lines carry ids, kinds, methods, hosts, outcome kinds, statuses
//     and counts; never a value, a path, a query, a header value or a body.
package server

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"jr2.dev/boundary/effector/internal/effect"
	"jr2.dev/boundary/effector/internal/guard"
	"jr2.dev/boundary/effector/internal/wire"
	"jr2.dev/boundary/filter/scrub"
	"jr2.dev/boundary/internal/bundle"
	"jr2.dev/boundary/internal/logline"
)

// Options configure a Server. They are read once by New.
type Options struct {
	Replica wire.Replica
	// Key is the placement key the wire is signed with.
	Key []byte
	// Started is when the process started; a request signed before it is
	// refused.
	Started time.Time
	// Kinds maps a start's kind to what runs it.
	Kinds map[string]effect.Kind
	// Held is every held secret and the placement key's forms (labelled
	// "effector-key"): what every answer is scrubbed for.
	Held []scrub.Secret
	// Log receives the jr2.effector lines.
	Log io.Writer
	// Hold is how long a poll waits for a settle (25 s).
	Hold time.Duration
	// Expire is how long a settled outcome stays answerable (10 min).
	Expire time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Receipts, when set, records each start (effect-start) and each
	// outcome as answered, scrubbed (effect-outcome), in the bundle format
	// (internal/bundle). A start whose record cannot be written is refused
	// (503): nothing runs unrecorded.
	Receipts bundle.Recorder
}

// The receipts' records of a start and its outcome.
type (
	effectStart struct {
		Effect string `json:"effect"`
		Kind   string `json:"effect_kind"` // "kind" is the record's own
		Method string `json:"method"`
		Host   string `json:"host"`
		// Secrets are the names of the secrets the start names (names
		// only, sorted).
		Secrets []string `json:"secrets,omitempty"`
	}
	effectOutcome struct {
		Effect  string        `json:"effect"`
		Outcome *wire.Outcome `json:"outcome"`
	}
)

// Server serves the wire. It is safe for concurrent use.
type Server struct {
	o     Options
	guard *guard.Guard
	// scrub is the held secrets' scrubber every answer passes through, and
	// each effect's over it; SetHeld swaps both at once.
	scrub atomic.Pointer[heldScrub]
	held  map[string]bool
	log   *logline.Writer

	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	effects  map[string]*entry
	kept     map[string]time.Time // kept stops: id → when they are forgotten
	draining bool
	changed  chan struct{} // closed, and replaced, when an effect settles, is read or goes
}

// entry is one effect this replica holds. What only running needs (the
// plan and its scrubber) is dropped when it settles.
type entry struct {
	id      string
	kind    string
	pinned  string
	canStop bool
	done    chan struct{} // closed once outcome is set

	// Guarded by Server.mu.
	plan      *effect.Plan     // nil once settled
	sc        *effect.Scrubber // nil once settled
	outcome   *wire.Outcome
	settledAt time.Time
	read      bool
}

// heldScrub is the scrubber over every held secret, and the Scrubbers
// each effect's scrubber is made from, over it.
type heldScrub struct {
	global *scrub.Scrubber
	scrubs *effect.Scrubbers
}

func newHeldScrub(global *scrub.Scrubber) *heldScrub {
	global.Folded() // built now, not by the first effect that settles
	return &heldScrub{global: global, scrubs: effect.NewScrubbers(global)}
}

// SetHeld swaps the scrubber over every held secret (a rotation of the
// secrets, with the values it replaced still held for their grace
// window). An effect already started keeps the scrubber it started with;
// every answer written from now on passes through global. Call it before
// the new values can be read.
func (s *Server) SetHeld(global *scrub.Scrubber) {
	s.scrub.Store(newHeldScrub(global))
}

// keepStops is how long a stop for an id the replica did not hold is kept:
// twice the signing window, past which a start signed before the stop is
// refused by its time.
const keepStops = 2 * wire.Window

// New returns a Server. It fails only when the held secrets cannot make a
// scrubber (a value shorter than scrub.MinLen, which config refuses first).
func New(o Options) (*Server, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	global, err := scrub.New(o.Held)
	if err != nil {
		return nil, err
	}
	s := &Server{
		o:       o,
		guard:   guard.New(o.Key, o.Replica.Address, o.Started, o.Now),
		held:    map[string]bool{},
		log:     logline.NewWriter(o.Log, logline.Effector),
		effects: map[string]*entry{},
		kept:    map[string]time.Time{},
		changed: make(chan struct{}),
	}
	s.scrub.Store(newHeldScrub(global))
	for _, h := range o.Held {
		s.held[h.Name] = true
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	go s.sweepLoop()
	return s, nil
}

// Close stops the sweeper and tells running effects the process is going.
func (s *Server) Close() { s.cancel() }

// ServeHTTP answers one request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.RequestURI == "/healthz" {
		s.health(w)
		return
	}
	v, ok := s.guard.Check(r)
	if !ok {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	a := s.route(r.Context(), v)
	body, err := wire.Marshal(a.body)
	if err != nil {
		// A shape with no encoding is a bug of this package; answer it
		// signed, as an error, rather than leave the caller guessing.
		a = answer{status: http.StatusInternalServerError, body: s.errorBody("internal: the answer could not be encoded")}
		body, _ = wire.Marshal(a.body)
	}
	body = s.scrub.Load().global.Bytes(body)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set(wire.HeaderSignature, wire.Sign(s.o.Key, wire.ResponseLines(a.status, v.Method, v.Target, v.Nonce, body)))
	if a.status == http.StatusMethodNotAllowed {
		h.Set("Allow", a.allow)
	}
	w.WriteHeader(a.status)
	if _, err := w.Write(body); err == nil && a.read {
		s.markRead(a.effect)
	}
}

func (s *Server) health(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if s.Draining() {
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, "stopping")
		return
	}
	io.WriteString(w, "ok")
}

// answer is what a route decided.
type answer struct {
	status int
	body   any
	// effect is the effect the answer is the state of.
	effect *entry
	// read marks effect's outcome read once the answer is written.
	read  bool
	allow string
}

func (s *Server) errorBody(reason string) *wire.Error {
	return &wire.Error{Error: reason, Replica: s.o.Replica}
}

func (s *Server) fail(status int, reason string) answer {
	return answer{status: status, body: s.errorBody(reason)}
}

// route reads a verified request's target and method.
func (s *Server) route(ctx context.Context, v *guard.Verified) answer {
	id, ok := strings.CutPrefix(v.Target, "/effects/")
	if !ok || !wire.ValidID(id) {
		return s.fail(http.StatusNotFound, "no such route; the wire's routes are /effects/{id} (id: 1–128 of A-Z a-z 0-9 . _ -)")
	}
	switch v.Method {
	case http.MethodPost:
		return s.start(id, v.Body)
	case http.MethodGet:
		return s.poll(ctx, id)
	case http.MethodDelete:
		return s.stop(ctx, id)
	}
	a := s.fail(http.StatusMethodNotAllowed, "method not allowed; use POST, GET or DELETE")
	a.allow = "POST, GET, DELETE"
	return a
}

// state answers e's current state; a settled one counts as read once
// written.
func (s *Server) state(status int, e *entry) answer {
	s.mu.Lock()
	out := e.outcome
	s.mu.Unlock()
	st := &wire.State{State: wire.StateRunning, Replica: s.o.Replica, Pinned: e.pinned}
	if out != nil {
		st.State, st.Outcome = wire.StateSettled, out
	}
	return answer{status: status, body: st, effect: e, read: out != nil}
}

func (s *Server) unknown() answer {
	return answer{status: http.StatusNotFound, body: &wire.State{State: wire.StateUnknown, Replica: s.o.Replica}}
}

func (s *Server) lookup(id string) *entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.effects[id]
}

// start is POST: attach to an id this replica holds, else check the start
// and run it.
func (s *Server) start(id string, body []byte) answer {
	if e := s.lookup(id); e != nil {
		return s.state(http.StatusOK, e)
	}
	if s.Draining() {
		return s.fail(http.StatusServiceUnavailable, "stopping")
	}
	st, err := wire.DecodeStart(body)
	if err != nil {
		return s.fail(http.StatusBadRequest, err.Error())
	}
	for _, name := range st.Secrets() {
		if !s.held[name] {
			return s.fail(http.StatusBadRequest, fmt.Sprintf("secret %q: this Effector holds no secret of that name; place it on this Effector or name one it holds", name))
		}
	}
	kind, ok := s.o.Kinds[st.Kind]
	if !ok {
		return s.fail(http.StatusBadRequest, fmt.Sprintf("kind %q: this Effector does not run it", st.Kind))
	}
	plan, err := kind.Prepare(id, st)
	if err != nil {
		return s.fail(http.StatusBadRequest, err.Error())
	}
	sc, err := s.scrub.Load().scrubs.For(plan.Built)
	if err != nil {
		return s.fail(http.StatusInternalServerError, "internal: the effect's scrubber could not be built")
	}
	e := &entry{id: id, kind: st.Kind, pinned: plan.Pinned, canStop: plan.Stop != nil,
		plan: plan, sc: sc, done: make(chan struct{})}

	s.mu.Lock()
	if held := s.effects[id]; held != nil {
		s.mu.Unlock()
		return s.state(http.StatusOK, held)
	}
	if s.draining {
		s.mu.Unlock()
		return s.fail(http.StatusServiceUnavailable, "stopping")
	}
	if s.o.Receipts != nil {
		if _, err := s.o.Receipts.Append(bundle.KindEffectStart, effectStart{Effect: id, Kind: st.Kind, Method: plan.Method, Host: plan.Host, Secrets: slices.Sorted(maps.Keys(plan.Built))}); err != nil {
			s.mu.Unlock()
			return s.fail(http.StatusServiceUnavailable, "the start could not be recorded in the receipts, so it did not run")
		}
	}
	_, stopped := s.kept[id]
	delete(s.kept, id)
	s.effects[id] = e
	s.mu.Unlock()

	s.log.Log("action", "start", "effect", id, "kind", st.Kind, "method", plan.Method, "host", plan.Host)
	if stopped && plan.KeptStop == effect.DidNotRun {
		s.settle(e, sc, wire.Outcome{Kind: wire.OutcomeUnknown, Reason: "did not run: a stop for this effect arrived before its start"})
		return s.state(http.StatusOK, e)
	}
	go s.run(e, plan, sc)
	return s.state(http.StatusAccepted, e)
}

// run calls the plan once and settles its outcome. A kind that panics
// settles unknown: whether it acted cannot be told.
func (s *Server) run(e *entry, plan *effect.Plan, sc *effect.Scrubber) {
	var out wire.Outcome
	func() {
		defer func() {
			if recover() != nil {
				out = wire.Outcome{Kind: wire.OutcomeUnknown, Reason: "the effect failed inside the Effector; it may have acted"}
			}
		}()
		out = plan.Run(s.ctx, sc)
	}()
	s.settle(e, sc, out)
}

// settle stores e's outcome, scrubbed with sc, once, and drops what only
// running needed.
func (s *Server) settle(e *entry, sc *effect.Scrubber, out wire.Outcome) {
	// A header name reaches the Effector canonicalized (HTTP/1) or lower
	// case (HTTP/2), never in a value's own case: match it with case folded.
	out.MapHeaderNames(sc.Folded().String)
	out.MapStrings(sc.String)
	s.mu.Lock()
	if e.outcome != nil {
		s.mu.Unlock()
		return
	}
	e.plan, e.sc = nil, nil
	// The settle line goes out before the outcome can be read, so whoever
	// reads the outcome finds the line already in the log.
	kv := []string{"action", "settle", "effect", e.id, "outcome", out.Kind}
	if out.Kind == wire.OutcomeResponse {
		kv = append(kv, "status", strconv.Itoa(out.Status))
	}
	s.log.Log(kv...)
	if s.o.Receipts != nil {
		s.o.Receipts.Append(bundle.KindEffectOutcome, effectOutcome{Effect: e.id, Outcome: &out})
	}
	e.outcome = &out
	e.settledAt = s.o.Now()
	close(e.done)
	s.notifyLocked()
	s.mu.Unlock()
}

// poll is GET: hold until the effect settles or the hold ends.
func (s *Server) poll(ctx context.Context, id string) answer {
	e := s.lookup(id)
	if e == nil {
		return s.unknown()
	}
	s.wait(ctx, e)
	return s.state(http.StatusOK, e)
}

func (s *Server) wait(ctx context.Context, e *entry) {
	t := time.NewTimer(s.o.Hold)
	defer t.Stop()
	select {
	case <-e.done:
	case <-t.C:
	case <-ctx.Done():
	}
}

// stop is DELETE: stop a kind that can be stopped and answer as a poll;
// 405 for one that cannot; for an id this replica does not hold, 404 and
// keep the stop.
func (s *Server) stop(ctx context.Context, id string) answer {
	s.mu.Lock()
	e := s.effects[id]
	if e == nil {
		s.kept[id] = s.o.Now().Add(keepStops)
		s.mu.Unlock()
		s.log.Log("action", "stop-kept", "effect", id)
		return s.unknown()
	}
	var stop func()
	if e.plan != nil {
		stop = e.plan.Stop
	}
	s.mu.Unlock()
	if !e.canStop {
		a := s.fail(http.StatusMethodNotAllowed, fmt.Sprintf("%s %s effect is one request and ends on its own; it cannot be stopped", article(e.kind), e.kind))
		a.allow = "POST, GET"
		return a
	}
	s.log.Log("action", "stop", "effect", id)
	if stop != nil { // nil: it settled already
		stop()
	}
	s.wait(ctx, e)
	return s.state(http.StatusOK, e)
}

func (s *Server) markRead(e *entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !e.read {
		e.read = true
		s.notifyLocked()
	}
}

func (s *Server) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// sweepLoop forgets outcomes past their time and kept stops past theirs.
func (s *Server) sweepLoop() {
	every := s.o.Expire / 4
	if every > 10*time.Second {
		every = 10 * time.Second
	}
	if every < 10*time.Millisecond {
		every = 10 * time.Millisecond
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
			s.Sweep()
		}
	}
}

// Sweep forgets every outcome that settled more than Expire ago (logging
// the unread ones as dropped) and every kept stop past its time.
func (s *Server) Sweep() {
	now := s.o.Now()
	var dropped []string
	s.mu.Lock()
	for id, e := range s.effects {
		if e.outcome != nil && now.Sub(e.settledAt) >= s.o.Expire {
			if !e.read {
				dropped = append(dropped, id)
			}
			delete(s.effects, id)
		}
	}
	for id, until := range s.kept {
		if !now.Before(until) {
			delete(s.kept, id)
		}
	}
	if len(dropped) > 0 {
		s.notifyLocked()
	}
	s.mu.Unlock()
	sort.Strings(dropped)
	for _, id := range dropped {
		s.log.Log("action", "drop", "effect", id, "reason", "unread")
	}
}

// Drain stops taking new effects: starts answer 503 stopping and /healthz
// answers 503. Effects in flight run on.
func (s *Server) Drain() {
	s.mu.Lock()
	already := s.draining
	s.draining = true
	s.mu.Unlock()
	if !already {
		s.log.Log("action", "drain")
	}
}

// Draining reports whether Drain was called.
func (s *Server) Draining() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.draining
}

// waitingLocked counts the effects whose outcome nobody has read yet:
// running, or settled and unread.
func (s *Server) waitingLocked() (n int, unread []string) {
	for id, e := range s.effects {
		if !e.read {
			n++
			if e.outcome != nil {
				unread = append(unread, id)
			}
		}
	}
	sort.Strings(unread)
	return n, unread
}

// WaitDrained waits until every effect's outcome was read, or ctx ends;
// then it logs drain-ended with what it still waited for, and a drop for
// each settled outcome left unread. It returns that count.
func (s *Server) WaitDrained(ctx context.Context) int {
	for {
		s.mu.Lock()
		n, unread := s.waitingLocked()
		changed := s.changed
		s.mu.Unlock()
		if n == 0 || ctx.Err() != nil {
			s.log.Log("action", "drain-ended", "waiting", strconv.Itoa(n))
			for _, id := range unread {
				s.log.Log("action", "drop", "effect", id, "reason", "unread")
			}
			return n
		}
		select {
		case <-changed:
		case <-ctx.Done():
		}
	}
}

// article is the article of a kind's name as it is said: "an http
// effect" (aitch), "a push effect" (response.405-push.json), "a command".
func article(kind string) string {
	if kind == "http" {
		return "an"
	}
	return "a"
}
