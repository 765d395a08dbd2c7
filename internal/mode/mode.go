// Package mode is the one layer between an engine's decision and the
// egress, shared by the contained run's mediator and the Effector's http
// kind, so a mode means the same in both: live (send), read-only (only
// reads pass), replay (answer from a verified recording, send nothing),
// faults (send, and inject seeded faults) and preflight (send nothing,
// record the plan).
//
// Invariant: in replay and preflight no byte of any request leaves the
// machine: Verdict.RoundTrip never calls the next RoundTripper; in
// read-only only a read (GET, HEAD, OPTIONS, no body) reaches it. The
// records this package writes (effect-planned, fault-injected,
// replay-divergence) carry canonical forms only, which hold labels, never
// values. A truncate or corrupt fault spoils an answer only after the
// host's scrubber (Plan.Scrub) has run over it, so a spoiled byte never
// hides a value from the scrub; without one it is a reset, which passes
// no byte of the body. A fault draw depends only on the seed, the effect's canonical
// form and its index among equal forms, so one seed against one run
// injects the same faults. A replay answers only from the bytes it
// verified (the source is read once), each recorded answer at most once,
// and as recorded: its chunks as framed, a cut as a cut, no answer as no
// answer (ErrNoRecordedAnswer).
package mode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"syscall"
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
	Bound  time.Duration // the longest wait: a timeout fault's, and each gap replay --timing recorded waits; 0 is 30 s
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

// Key is the form as one comparable string.
func (e Effect) Key() string { return e.key() }

// Class is "read" for GET, HEAD and OPTIONS without a body, else "write".
func (e Effect) Class() string {
	switch e.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		if e.Length == 0 && e.Body == "" {
			return "read"
		}
	}
	return "write"
}

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

// Rules a verdict refuses with.
const (
	RuleReadOnly = "mode:read-only"
	RuleRecord   = "mode:record" // the mode's own record could not be written
)

// Verdict is the layer's answer for one effect.
type Verdict struct {
	Action Action
	Rule   string // Refuse: the rule to record
	Reason string // Refuse: the text for the agent, naming the mode

	// what RoundTrip does
	local  *http.Response // an answer made here: nothing is sent
	replay *answer        // replay, or preflight with a source: nothing is sent
	paced  bool           // replay the recorded gaps
	fault  string         // a fault that spoils the sent answer, or timeout
	offset int
	bound  time.Duration
	scrub  func() Stream // truncate, corrupt: the host's scrubber, run first
}

// Plan is what a host alone knows of an effect: the secrets it would
// spend and the rule that allows it, for preflight's effect-planned
// record.
type Plan struct {
	Secrets []string
	Rule    string
	// Scrub starts a stream of the host's scrubber for this effect's
	// answer. A truncate or corrupt fault spoils the answer only after it
	// is scrubbed: a byte flipped (or a cut) inside a held value's form
	// would hide it from the host's own scrub, which runs after the layer.
	// Without it, such a fault becomes a reset, which passes no byte.
	Scrub func() Stream
}

// Stream is a streaming scrubber (filter/scrub.Stream, the Effector's
// effect.Stream): Write passes on what it can decide, Flush the rest at
// the end.
type Stream interface {
	Write(dst, p []byte) []byte
	Flush(dst []byte) []byte
}

// Layer is one run's (or one Effector's) mode. It is safe for concurrent
// use. A host computes each effect's canonical form (Canon: the request as
// the agent asked for it, a held value only as its label), asks the Layer
// before anything leaves (Before), acts on a Refuse verdict with its own
// refusal answer, and otherwise sends through the verdict
// (Verdict.RoundTrip), which sends live, answers from the record, or
// injects the drawn fault.
type Layer struct {
	cfg    Config
	rec    bundle.Recorder
	rules  []rule
	mu     sync.Mutex
	seen   map[string]uint64      // faults: effects of each key so far
	source []*recorded            // replay, preflight with From: in recorded order
	queue  map[string][]*recorded // key → its recorded requests, unconsumed first
}

// New checks cfg (an error names the setting by names and says the fix)
// and, for replay and preflight with From, reads the source bundle, which
// must verify. rec is where the layer's own records go.
func New(cfg Config, names Names, rec bundle.Recorder) (*Layer, error) {
	if cfg.Mode == "" {
		cfg.Mode = Live
	}
	l := &Layer{cfg: cfg, rec: rec, seen: map[string]uint64{}, queue: map[string][]*recorded{}}
	switch cfg.Mode {
	case Live, ReadOnly, Replay, Faults, Preflight:
	default:
		return nil, fmt.Errorf("%s %q: the modes are %s, %s, %s, %s and %s", names.Mode, cfg.Mode, Live, ReadOnly, Replay, Faults, Preflight)
	}
	if cfg.From != "" && cfg.Mode != Replay && cfg.Mode != Preflight {
		return nil, fmt.Errorf("%s: only replay and preflight answer from a recording; drop it, or give %s replay", names.From, names.Mode)
	}
	if (cfg.Seed != 0 || cfg.Faults != "") && cfg.Mode != Faults {
		return nil, fmt.Errorf("%s and %s: only faults draws; drop them, or give %s faults", names.Seed, names.Faults, names.Mode)
	}
	switch cfg.Timing {
	case "", "fast":
	case "recorded":
		if cfg.Mode != Replay {
			return nil, fmt.Errorf("%s: only replay has a pace; drop it, or give %s replay", names.Timing, names.Mode)
		}
	default:
		return nil, fmt.Errorf("%s %q: the paces are fast and recorded", names.Timing, cfg.Timing)
	}
	if cfg.Bound == 0 {
		cfg.Bound = 30 * time.Second
		l.cfg.Bound = cfg.Bound
	}
	if cfg.Mode == Faults {
		rules, err := parseSpec(cfg.Faults, names.Faults)
		if err != nil {
			return nil, err
		}
		l.rules = rules
	}
	if cfg.Mode == Replay || (cfg.Mode == Preflight && cfg.From != "") {
		src, err := loadSource(cfg.From, names.From)
		if err != nil {
			return nil, err
		}
		l.source = src
		for _, r := range src {
			k := r.effect.Key()
			l.queue[k] = append(l.queue[k], r)
		}
	}
	return l, nil
}

// Mode is the layer's mode.
func (l *Layer) Mode() string { return l.cfg.Mode }

// Sends reports whether the mode sends effects out at all: false for
// replay and preflight, whose hosts then record no secret as spent.
func (l *Layer) Sends() bool { return l.cfg.Mode != Replay && l.cfg.Mode != Preflight }

// Before decides an effect before anything is sent, and records what the
// mode records about it (effect-planned, fault-injected,
// replay-divergence). at is the seq of the host's own record of the
// request (0 when none), which the layer's records point to.
func (l *Layer) Before(e Effect, at uint64) Verdict { return l.BeforeWith(e, at, Plan{}) }

// The records the layer writes.
type (
	plannedRecord struct {
		Request uint64   `json:"request"`
		Effect  Effect   `json:"effect"`
		Secrets []string `json:"secrets,omitempty"`
		Rule    string   `json:"rule,omitempty"`
		Answer  string   `json:"answer"` // planned, or recorded (preflight with a source)
	}
	faultRecord struct {
		Request uint64  `json:"request"`
		Seed    uint64  `json:"seed"`
		Draw    string  `json:"draw"`
		Fault   string  `json:"fault"`
		Offset  *int    `json:"offset,omitempty"`
		Rate    float64 `json:"rate"`
		Class   string  `json:"class"`
		Index   uint64  `json:"index"`
	}
	divergenceRecord struct {
		Request uint64 `json:"request"`
		Method  string `json:"method"`
		Host    string `json:"host"`
		Path    string `json:"path"`
		Field   string `json:"field"`             // the first field that differed from the nearest recorded request
		Nearest uint64 `json:"nearest,omitempty"` // its seq in the source; absent when the source holds no request
	}
)

// BeforeWith is Before with what the host knows of the effect, for
// preflight's plan.
func (l *Layer) BeforeWith(e Effect, at uint64, p Plan) Verdict {
	switch l.cfg.Mode {
	case ReadOnly:
		if e.Class() == "read" {
			return Verdict{}
		}
		why := e.Method + " is not a read"
		if e.Class() == "write" && (e.Method == http.MethodGet || e.Method == http.MethodHead || e.Method == http.MethodOptions) {
			why = "a request with a body is not a read"
		}
		return Verdict{Action: Refuse, Rule: RuleReadOnly,
			Reason: "mode read-only: " + why + "; only GET, HEAD and OPTIONS without a body pass"}
	case Replay:
		a, nearest, field := l.take(e)
		if a != nil {
			return Verdict{replay: a, paced: l.cfg.Timing == "recorded", bound: l.cfg.Bound}
		}
		if !l.write(bundle.KindReplayDiverged, divergenceRecord{Request: at, Method: e.Method, Host: e.Host, Path: e.Path, Field: field, Nearest: nearest}) {
			return l.unrecorded()
		}
		return Verdict{local: textAnswer(http.StatusBadGateway, "jr2 replay: no recorded answer for "+e.Method+" "+sourceLabel(e)+"\n", nil)}
	case Preflight:
		v := Verdict{local: textAnswer(http.StatusOK, "", [][2]string{{"Jr2-Preflight", "planned"}})}
		kind := "planned"
		if l.source != nil {
			if a, _, _ := l.take(e); a != nil {
				v, kind = Verdict{replay: a}, "recorded"
			}
		}
		if !l.write(bundle.KindEffectPlanned, plannedRecord{Request: at, Effect: e, Secrets: p.Secrets, Rule: p.Rule, Answer: kind}) {
			return l.unrecorded()
		}
		return v
	case Faults:
		return l.faults(e, at, p.Scrub)
	}
	return Verdict{}
}

func (l *Layer) unrecorded() Verdict {
	return Verdict{Action: Refuse, Rule: RuleRecord, Reason: "mode " + l.cfg.Mode + ": its record could not be written, so the effect was not answered"}
}

// write appends a record when the layer has a recorder.
func (l *Layer) write(kind string, fields any) bool {
	if l.rec == nil {
		return true
	}
	_, err := l.rec.Append(kind, fields)
	return err == nil
}

// take consumes the first unconsumed recorded request equal to e and
// returns its answer; with none it returns the nearest recorded request's
// seq and the first field in which it differs.
func (l *Layer) take(e Effect) (a *answer, nearest uint64, field string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := e.Key()
	for _, r := range l.queue[k] {
		if !r.used {
			r.used = true
			if r.answer == nil {
				return &answer{none: true}, 0, ""
			}
			return r.answer, 0, ""
		}
	}
	best, bestScore := (*recorded)(nil), -1
	for _, r := range l.source {
		score := e.likeness(r.effect) * 2
		if !r.used {
			score++ // ties go to the earliest unconsumed
		}
		if score > bestScore {
			best, bestScore = r, score
		}
	}
	if best == nil {
		return nil, 0, "method"
	}
	field = e.differs(best.effect)
	if field == "" {
		field = "count" // every equal recorded request was consumed
	}
	return nil, best.seq, field
}

// faults draws for e and records an injection.
func (l *Layer) faults(e Effect, at uint64, scrub func() Stream) Verdict {
	r := ruleFor(l.rules, e)
	if r == nil || r.rate == 0 {
		return Verdict{}
	}
	k := e.Key()
	l.mu.Lock()
	index := l.seen[k]
	l.seen[k]++
	l.mu.Unlock()
	d := drawFor(l.cfg.Seed, k, index, r.kinds)
	if d.u >= r.rate {
		return Verdict{}
	}
	rec := faultRecord{Request: at, Seed: l.cfg.Seed, Draw: strconv.FormatFloat(d.u, 'f', -1, 64), Fault: d.kind, Rate: r.rate, Class: e.Class(), Index: index}
	if d.kind == FaultTruncate || d.kind == FaultCorrupt {
		rec.Offset = &d.offset
	}
	if !l.write(bundle.KindFaultInjected, rec) {
		return l.unrecorded()
	}
	switch d.kind {
	case FaultError:
		return Verdict{local: textAnswer(http.StatusBadGateway, "jr2 faults: an injected error\n", [][2]string{{"Jr2-Fault", FaultError}})}
	case FaultRateLimit:
		return Verdict{local: textAnswer(http.StatusTooManyRequests, "jr2 faults: an injected rate limit\n",
			[][2]string{{"Jr2-Fault", FaultRateLimit}, {"Retry-After", strconv.Itoa(1 + d.offset%5)}})}
	}
	return Verdict{fault: d.kind, offset: d.offset, bound: l.cfg.Bound, scrub: scrub}
}

// Unasked lists, in replay, the recorded effects the replay never asked
// for, in recorded order; the host puts them in its closing record.
func (l *Layer) Unasked() []Effect {
	if l == nil || l.cfg.Mode != Replay {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Effect
	for _, r := range l.source {
		if !r.used {
			out = append(out, r.effect)
		}
	}
	return out
}

// textAnswer is an answer made here.
func textAnswer(status int, body string, header [][2]string) *http.Response {
	h := http.Header{"Content-Type": {"text/plain; charset=utf-8"}}
	for _, p := range header {
		h.Add(p[0], p[1])
	}
	return &http.Response{StatusCode: status, Status: strconv.Itoa(status) + " " + http.StatusText(status),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: h,
		Body: io.NopCloser(bytes.NewReader([]byte(body))), ContentLength: int64(len(body))}
}

// Sends reports whether RoundTrip will call next: false for an answer
// from the record, a planned answer, and a fault that replaces the answer.
// A host records a secret as spent only for a verdict that sends.
func (v Verdict) Sends() bool {
	return v.Action == Send && v.local == nil && v.replay == nil && v.fault != FaultTimeout
}

// ErrNoRecordedAnswer is the replay of a recorded request that got no
// answer (the client went away, or the upstream never answered): as then,
// RoundTrip gives no answer, and the host answers its own failure.
var ErrNoRecordedAnswer = errors.New("jr2 replay: the recording holds no answer to this request")

// ErrTimeout is a timeout fault's end: no answer came.
var ErrTimeout = errors.New("jr2 faults: an injected timeout: no answer came")

// RoundTrip sends req through next, or answers it without next (replay,
// preflight, a fault that replaces the answer), or wraps next's answer (a
// fault that cuts, corrupts or resets the body).
func (v Verdict) RoundTrip(next http.RoundTripper, req *http.Request) (*http.Response, error) {
	switch {
	case v.local != nil:
		v.local.Request = req
		return v.local, nil
	case v.replay != nil && v.replay.none:
		return nil, ErrNoRecordedAnswer
	case v.replay != nil:
		if v.paced && !v.replay.asked.IsZero() {
			t := time.NewTimer(min(max(v.replay.at.Sub(v.replay.asked), 0), v.bound))
			select {
			case <-req.Context().Done():
				t.Stop()
				return nil, req.Context().Err()
			case <-t.C:
			}
		}
		return v.replay.response(req, v.paced, v.bound), nil
	case v.fault == FaultTimeout:
		t := time.NewTimer(v.bound)
		defer t.Stop()
		select {
		case <-req.Context().Done():
		case <-t.C:
		}
		return nil, ErrTimeout
	}
	resp, err := next.RoundTrip(req)
	if err != nil || v.fault == "" {
		return resp, err
	}
	fault, src := v.fault, io.Reader(resp.Body)
	if fault == FaultTruncate || fault == FaultCorrupt {
		if v.scrub == nil {
			fault = FaultReset // nothing may pass unscrubbed and spoiled
		} else {
			src = &scrubbed{r: resp.Body, st: v.scrub(), buf: make([]byte, 32<<10)}
		}
	}
	resp.Body = &spoiled{rc: resp.Body, src: src, fault: fault, offset: v.offset}
	resp.ContentLength = -1
	resp.Header.Del("Content-Length")
	return resp, nil
}

// response is a recorded answer as a response: the recorded status and
// headers, each recorded chunk one Read, cut where the recording was.
func (a *answer) response(req *http.Request, paced bool, bound time.Duration) *http.Response {
	h := http.Header{}
	for _, p := range a.header {
		h.Add(p[0], p[1])
	}
	// The recorded length stands when the recorded chunks make it up (or
	// for a HEAD, which has none): a host then frames the answer as it was.
	// Otherwise the answer is unframed, so no host declares a length its
	// body does not have.
	length := int64(-1)
	if n, err := strconv.ParseInt(h.Get("Content-Length"), 10, 64); err == nil && !a.cut {
		var total int64
		for _, c := range a.chunks {
			total += int64(len(c))
		}
		if n == total || req.Method == http.MethodHead {
			length = n
		} else {
			h.Del("Content-Length")
		}
	}
	var gaps []time.Duration
	if paced {
		prev := a.at
		for _, t := range a.times {
			gaps = append(gaps, min(max(t.Sub(prev), 0), bound))
			prev = t
		}
	}
	return &http.Response{StatusCode: a.status, Status: strconv.Itoa(a.status) + " " + http.StatusText(a.status),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: h, ContentLength: length, Request: req,
		Body: &replayBody{ctx: req.Context(), chunks: a.chunks, gaps: gaps, cut: a.cut}}
}

// replayBody reads a recorded body chunk by chunk.
type replayBody struct {
	ctx    context.Context
	chunks [][]byte
	gaps   []time.Duration
	i      int
	rest   []byte
	cut    bool
}

func (b *replayBody) Read(p []byte) (int, error) {
	for len(b.rest) == 0 {
		if b.i == len(b.chunks) {
			if b.cut {
				return 0, io.ErrUnexpectedEOF
			}
			return 0, io.EOF
		}
		if b.i < len(b.gaps) && b.gaps[b.i] > 0 {
			t := time.NewTimer(b.gaps[b.i])
			select {
			case <-b.ctx.Done():
				t.Stop()
				return 0, b.ctx.Err()
			case <-t.C:
			}
		}
		b.rest = b.chunks[b.i]
		b.i++
	}
	n := copy(p, b.rest)
	b.rest = b.rest[n:]
	return n, nil
}

func (b *replayBody) Close() error { return nil }

// spoiled is a sent answer's body with a fault: cut at offset (truncate),
// one byte flipped at offset (corrupt), or reset at once (reset). A body
// shorter than offset is cut, or flipped, at its last byte.
type spoiled struct {
	rc     io.ReadCloser // closed by Close
	src    io.Reader     // read: rc, or rc through the host's scrubber
	fault  string
	offset int
	pos    int
	last   []byte // corrupt: the last byte read, held until the next Read or the end
	done   bool
	buf    []byte
	out    []byte
}

// errReset is what a reset fault's body read fails with.
var errReset = fmt.Errorf("jr2 faults: an injected reset: %w", syscall.ECONNRESET)

func (s *spoiled) Read(p []byte) (int, error) {
	switch s.fault {
	case FaultReset:
		return 0, errReset
	case FaultTruncate:
		if s.pos >= s.offset {
			return 0, io.ErrUnexpectedEOF
		}
		if len(p) > s.offset-s.pos {
			p = p[:s.offset-s.pos]
		}
		n, err := s.src.Read(p)
		s.pos += n
		if err == io.EOF {
			err = io.ErrUnexpectedEOF // a body shorter than the offset is cut at its end
		}
		return n, err
	}
	return s.corrupt(p)
}

// corrupt flips the byte at offset, or the body's last byte when it is
// shorter: until the flip, the last byte read is held back, so the end of
// the body is known before that byte is passed on.
func (s *spoiled) corrupt(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if s.done {
		if len(s.last) > 0 {
			p[0], s.last = s.last[0], nil
			return 1, nil
		}
		return s.src.Read(p)
	}
	if cap(s.buf) < len(p) {
		s.buf = make([]byte, len(p))
	}
	n, err := s.src.Read(s.buf[:len(p)])
	out := append(append(s.out[:0], s.last...), s.buf[:n]...)
	s.last = nil
	if s.pos+len(out) > s.offset {
		out[s.offset-s.pos] ^= 0xff
		s.done = true
	} else if err == io.EOF && len(out) > 0 {
		out[len(out)-1] ^= 0xff
		s.done = true
	}
	if !s.done && err == nil && len(out) > 0 {
		s.last, out = []byte{out[len(out)-1]}, out[:len(out)-1]
	}
	s.out = out
	m := copy(p, out)
	if m < len(out) {
		// The held byte and a full read: one byte over (never more; when
		// the last byte is held back above, out fits p).
		s.last = []byte{out[m]}
		if err == io.EOF {
			err = nil // the byte over is read next, then the end
		}
	}
	s.pos += m
	return m, err
}

func (s *spoiled) Close() error { return s.rc.Close() }

// scrubbed reads r through a host's streaming scrubber: the bytes a held
// value's form took are its label before any fault touches them. What the
// stream holds back at a cut is never passed on.
type scrubbed struct {
	r   io.Reader
	st  Stream
	buf []byte
	out []byte
	eof bool
}

func (s *scrubbed) Read(p []byte) (int, error) {
	for len(s.out) == 0 {
		if s.eof {
			return 0, io.EOF
		}
		n, err := s.r.Read(s.buf)
		s.out = s.st.Write(s.out[:0], s.buf[:n])
		switch {
		case err == io.EOF:
			s.out, s.eof = s.st.Flush(s.out), true
		case err != nil:
			return 0, err
		}
	}
	n := copy(p, s.out)
	s.out = s.out[n:]
	return n, nil
}
