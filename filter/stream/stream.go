package stream

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/filter/pluginconf"
	"jr2.dev/boundary/filter/wsframe"
	"jr2.dev/boundary/internal/logline"
)

// Reasons of the machine's own refusals (the engine's are in package
// filter).
const (
	// ReasonMisconfigured: the stream has no usable config (see Merge).
	ReasonMisconfigured = "misconfigured"
	// ReasonInternal: an entry point panicked and was recovered.
	ReasonInternal = "internal"
)

// Headers is one header map of a stream (request or response headers, or
// response trailers) as an adapter exposes it. Names are lowercase, as
// Envoy holds them. Set and Del on ":path" and ":authority" change the
// request's path and host.
type Headers interface {
	// All returns every header, pseudo-headers included, each value of a
	// name in arrival order. The machine sorts by name itself.
	All() []filter.Header
	// Set replaces every value of name with value.
	Set(name, value string)
	// Add appends one value of name.
	Add(name, value string)
	// Del removes every value of name.
	Del(name string)
}

// Body is the response-body chunk now passing.
type Body interface {
	// Bytes is the chunk; it may be a view valid only for this call.
	Bytes() []byte
	// Set replaces the chunk with b (which may be empty).
	Set(b []byte) error
}

// Host is an adapter's side of one stream.
type Host interface {
	// SetMark sets (or overwrites) the jr2.custodian/decided mark.
	SetMark(v bool)
	// ClearRouteCache makes Envoy match the route again after :authority
	// changed.
	ClearRouteCache()
	// SendLocalReply answers with status and a text/plain body, plus the
	// reply's own headers (fixed text: rule 9's challenge); details is
	// Envoy's response-code-details word. encoding tells the phase: once
	// response headers went out, Envoy resets the stream instead.
	SendLocalReply(encoding bool, status int, body, details string, headers []filter.Header)
	// AppendResponseBody adds b to the response body after the last chunk;
	// it is called only from ResponseTrailers.
	AppendResponseBody(b []byte)
	// Log writes one log line at info level. line is the machine's buffer,
	// valid only during the call: a host that keeps it copies it.
	Log(line []byte)
}

// Status is what an entry point tells the adapter to return to Envoy.
type Status int

const (
	// Continue: let the headers or the chunk (as changed) go on.
	Continue Status = iota
	// Answered: the machine sent a local reply, or dropped what followed a
	// refused response; stop iteration.
	Answered
	// Held: the machine holds the request until its body is whole (a
	// SigV4 signature covers the body's hash: filter.Decision.NeedBody).
	// For request headers the adapter stops iteration; for a request
	// chunk, which the machine took (Body.Set to empty), it stops without
	// Envoy buffering it. The last chunk carries the whole body on.
	Held
)

// Stream is the machine of one request and its response. Its methods are
// called one after another, in Envoy's order, on one Envoy worker thread;
// the machine starts no goroutine, so a Stream needs no lock. A Config and
// its engine are shared by every stream and are read-only. A Stream
// decides its request and its response with the newest engine of its
// Config's lineage when it was made (filter.Engine.Latest): a rotation of
// the values (Engines' watcher) changes only the streams that begin after
// it. Nothing the machine hands out (a log line, a scrubbed chunk)
// outlives the call it is handed out in.
//
// Failing closed: every entry point recovers a panic of its own. The
// request is answered 500 (or, once response headers went out, the stream
// is reset), the mark is overwritten with false, what follows of the
// response is dropped, and one line with reason=internal is logged. A
// broken Config (see Merge) answers every request 500 and never marks.
type Stream struct {
	host Host
	cfg  *Config
	// eng is the engine this stream decides with, from start to end: the
	// newest of cfg's when the stream began (filter.Engine.Latest). A
	// reload of the values swaps the engine for streams that begin later;
	// this one keeps its set, and its body's scrubber.
	eng *filter.Engine

	target    string            // for log lines: the decision's target, or "-"
	forwarded bool              // the request went on, marked
	marked    bool              // the mark was set
	answered  bool              // this filter answered the request itself
	dec       filter.Decision   // the forward decision (control, intercept)
	logged    bool              // the action=intercept line was written
	body      *filter.Body      // the response body scrubber, while a body flows
	frames    *wsframe.Scrubber // the upstream's WebSocket frames' scrubber, after a 101
	broken    bool              // the response was cut off; drop whatever follows

	// A request held for its body (Held): its headers as the engine read
	// them, the header map to apply the decision to, the body so far.
	holding bool
	held    filter.Request
	heldHdr Headers
	heldBuf []byte
	hold    *filter.Hold // heldBuf's share of the process's budget (filter.MaxHeldBodies)
	// chunks re-signs a forwarded signed aws-chunked body (Decision.Chunks).
	chunks *filter.Chunks

	// What a stream reuses when Reset makes it the machine of the next
	// one: a passed request and its answer allocate nothing once these
	// have grown to fit (see Reset).
	bodyMem filter.Body     // body points here while a body flows
	reqHdrs []filter.Header // the request's headers, sorted (RequestOf)
	resHdrs []filter.Header // the response's headers, sorted
	out     []byte          // the scrubbed chunk now passing
	fields  []string        // a log line's fields
	line    []byte          // a log line
}

// New returns the machine of one stream. A nil cfg refuses the request as
// NoConfig does.
func New(cfg *Config, host Host) *Stream {
	s := &Stream{}
	s.Reset(cfg, host)
	return s
}

// KeepCap is the largest buffer, in bytes, Reset keeps for the next
// stream; a larger one (a huge chunk or header list) is let go. Adapters
// that reuse their own memory per stream keep it by the same rule
// (Emptied).
const KeepCap = 32 << 10

// Reset makes s the machine of a new stream, as New returns, keeping the
// memory of its buffers: an adapter that keeps one Stream per filter and
// reuses the filter allocates nothing for the next stream's pass path. The
// last stream must be over (Done called): nothing of it is kept but
// emptied memory, and nothing the machine handed out (a log line, a
// chunk, a header list) is valid after it.
func (s *Stream) Reset(cfg *Config, host Host) {
	if s.hold != nil {
		s.hold.Release()
	}
	if s.chunks != nil {
		s.chunks.Close()
	}
	if cfg == nil {
		cfg = NoConfig
	}
	s.bodyMem.Wipe()
	*s = Stream{
		host:    host,
		cfg:     cfg,
		target:  "-",
		bodyMem: s.bodyMem,
		reqHdrs: Emptied(s.reqHdrs),
		resHdrs: Emptied(s.resHdrs),
		out:     Emptied(s.out),
		heldBuf: Emptied(s.heldBuf),
		fields:  Emptied(s.fields),
		line:    Emptied(s.line),
	}
	if cfg.engine != nil {
		s.eng = cfg.engine.Latest()
	}
}

// Emptied zeroes b and empties it for reuse, or lets it go (nil) when it
// grew past KeepCap bytes.
func Emptied[T any](b []T) []T {
	var zero T
	clear(b[:cap(b)])
	if uintptr(cap(b))*unsafe.Sizeof(zero) > KeepCap {
		return nil
	}
	return b[:0]
}

// RequestHeaders decides the request by the route's role and applies the
// verdict: RequestHeadersEnd of headers a body follows.
func (s *Stream) RequestHeaders(h Headers) (status Status) { return s.RequestHeadersEnd(h, false) }

// RequestHeadersEnd is RequestHeaders, told whether the request ends with
// its headers (no body follows). By the route's role — control:
// DecideControl (DecideControlUpgrade for an upgrade); egress:
// DecideConnect; intercept: DecideUpgrade, which is DecideRequest for a
// request that asks no upgrade (UpgradeOf reads the upgrade header Envoy
// keeps), toward the route's target (the connection's, when the route
// config names none: the host gives it with Config.ForConnection before
// the stream starts). A reply is sent as a local reply (text/plain); a
// forward sets :path (and, toward a bound target, :authority to
// contract.UpstreamHost), removes and sets headers, then marks the
// request, the last thing it does. A request whose decision needs its
// body (filter.Decision.NeedBody: a SigV4 signature over the body's hash)
// is decided at once with an empty body when none follows, else Held
// until RequestData has it whole.
func (s *Stream) RequestHeadersEnd(h Headers, endStream bool) (status Status) {
	defer s.recoverPanic(false, &status)
	s.target = "-"
	if m := s.cfg.broken; m != nil {
		return s.misconfigured(m.why)
	}
	s.reqHdrs = sortInto(s.reqHdrs, h.All())
	r := requestOf(s.reqHdrs)
	e := s.eng
	switch s.cfg.route.Role {
	case pluginconf.RoleEgress:
		cd := e.DecideConnect(r.Method, r.Authority)
		if cd.Reply != nil {
			return s.reply(false, cd.Reply, cd.LogFields())
		}
		s.target = cd.Target
		if cd.Target != r.Authority {
			// The canonical target decides, so the rendered routes must
			// match on it too (a trailing dot or capitals would otherwise
			// miss the intercept route).
			h.Set(":authority", cd.Target)
			s.host.ClearRouteCache()
		}
		// A tunnel's line is Envoy's: the rendered access log writes
		// action=tunnel once the tunnel is up, and the guard's refusal at
		// stream end; the machine logs only what it refuses itself.
		return s.forward()
	case pluginconf.RoleControl:
		d := e.DecideControl(&r)
		if UpgradeOf(r.Headers).Asked() {
			d = e.DecideControlUpgrade()
		}
		if d.Reply != nil {
			return s.reply(false, d.Reply, d.LogFields(0))
		}
		applyRequest(h, &d)
		// The route matched the agent's path; the Orchestrator gets the
		// engine's path and its own name. The route cache is kept on
		// purpose: the rewritten path is no route of this listener.
		h.Set(":authority", d.Target)
		return s.forwardDecision(d)
	case pluginconf.RoleIntercept:
		d := e.DecideUpgrade(s.cfg.route.Target, &r, UpgradeOf(r.Headers))
		if d.NeedBody && endStream {
			d = e.DecideRequestBody(s.cfg.route.Target, &r, nil)
		} else if d.NeedBody {
			s.holding, s.held, s.heldHdr, s.target = true, r, h, s.cfg.route.Target
			return Held
		}
		return s.intercept(h, d)
	}
	// ParseRoute admits no other role; a config built around one is a bug.
	return s.misconfigured("the route's role is unknown")
}

// intercept applies an intercepted request's decision.
func (s *Stream) intercept(h Headers, d filter.Decision) Status {
	if d.Reply != nil {
		return s.reply(false, d.Reply, d.LogFields(0))
	}
	applyRequest(h, &d)
	// The Host rule let any spelling of the target through (case, a
	// trailing dot, :443); the upstream gets the target's own, as from
	// the Go host.
	h.Set(":authority", s.cfg.upstream)
	s.chunks = d.Chunks
	return s.forwardDecision(d)
}

// RequestData takes one chunk of a request Held for its body: the chunk
// is taken out of Envoy's stream (b.Set to empty) into the machine's
// buffer, at most filter.MaxSignedBody bytes (past them the engine's 413);
// at the last chunk the request is decided with the whole body
// (filter.Engine.DecideRequestBody), and the body goes on in that chunk.
// A forwarded signed aws-chunked body (Decision.Chunks) goes through the
// engine's chunk re-signer chunk by chunk; one that does not verify is
// answered 403 and Envoy cuts the request upstream. Any other request's
// body passes untouched: the agent's bytes, an upgraded connection's too,
// are not read.
func (s *Stream) RequestData(b Body, endStream bool) (status Status) {
	defer s.recoverPanic(false, &status)
	if s.chunks != nil {
		return s.chunkData(b, endStream)
	}
	if !s.holding {
		return Continue
	}
	if s.hold == nil {
		s.hold = new(filter.Hold)
	}
	if !s.hold.Take(len(b.Bytes())) {
		s.holding = false
		s.hold.Release()
		d := s.eng.HeldBudgetSpent(s.target)
		return s.reply(false, d.Reply, d.LogFields(0))
	}
	s.heldBuf = append(s.heldBuf, b.Bytes()...)
	if len(s.heldBuf) > filter.MaxSignedBody {
		s.holding = false
		s.hold.Release()
		d := s.eng.BodyTooLarge(s.target)
		return s.reply(false, d.Reply, d.LogFields(0))
	}
	if !endStream {
		if err := b.Set(nil); err != nil {
			panic(err)
		}
		return Held
	}
	s.holding = false
	d := s.eng.DecideRequestBody(s.target, &s.held, s.heldBuf)
	if d.Reply == nil {
		if err := b.Set(s.heldBuf); err != nil {
			panic(err)
		}
	}
	s.hold.Release() // refused, or the body is Envoy's now
	return s.intercept(s.heldHdr, d)
}

// chunkData re-signs one chunk of a signed aws-chunked body: what is whole
// of it goes on, re-signed; a chunk that does not verify, or that the
// process's budget of held bytes has no room for, is the engine's refusal
// (403, or 503 with Retry-After): Envoy resets the request upstream, which
// never read the body whole, and sends the agent the refusal, or resets
// the agent's stream too when the upstream's answer already began.
func (s *Stream) chunkData(b Body, endStream bool) Status {
	out, err := s.chunks.Write(b.Bytes())
	if err == nil && endStream {
		err = s.chunks.End()
	}
	if err != nil {
		// The request went on: its action=intercept line, as custodian
		// serve's, has the status the agent gets.
		r := s.eng.ChunksRefused(s.target, s.chunks)
		s.chunks, s.answered = nil, true
		s.host.SendLocalReply(false, r.Status, s.redact(r.Body), "jr2_custodian_"+r.Reason, r.Headers)
		return Answered
	}
	if err := b.Set(out); err != nil {
		panic(err)
	}
	return Continue
}

// RequestTrailers ends a request Held for its body that ended with
// trailers: the body cannot be put back before them, so the request is
// refused with the answer of a host that cannot hold a body (the engine's
// NeedBody reply). A request not held passes.
func (s *Stream) RequestTrailers() (status Status) {
	defer s.recoverPanic(false, &status)
	if !s.holding {
		return Continue
	}
	s.holding = false
	if s.hold != nil {
		s.hold.Release()
	}
	d := s.eng.DecideUpgrade(s.target, &s.held, filter.Upgrade{})
	return s.reply(false, d.Reply, d.LogFields(0))
}

// misconfigured answers 500: the stream has no config it can decide with.
func (s *Stream) misconfigured(why string) Status {
	return s.reply(false, &filter.Reply{
		Status: 500,
		Body:   "jr2 custodian: misconfigured: " + why + "; the request was not passed on",
		Reason: ReasonMisconfigured,
	}, []string{"action", "refuse", "target", "-", "reason", ReasonMisconfigured})
}

func (s *Stream) forwardDecision(d filter.Decision) Status {
	s.dec = d
	s.target = d.Target
	return s.forward()
}

// forward marks the request and lets it go on. The mark is the last thing
// RequestHeaders does, after every header change.
func (s *Stream) forward() Status {
	s.host.SetMark(true)
	s.marked = true
	s.forwarded = true
	return Continue
}

// reply answers the request (or the response) with r, logs fields, and
// never marks.
func (s *Stream) reply(encoding bool, r *filter.Reply, fields []string) Status {
	s.answered = true
	s.log(fields)
	s.host.SendLocalReply(encoding, r.Status, s.redact(r.Body), "jr2_custodian_"+r.Reason, r.Headers)
	return Answered
}

// log writes one jr2.custodian line of the engine's (or this package's)
// fields: names, targets and words.
func (s *Stream) log(fields []string) {
	for i, f := range fields {
		fields[i] = s.redact(f)
	}
	s.line = logline.AppendFormat(s.line[:0], logline.Custodian, fields...)
	s.host.Log(s.line)
}

// redact scrubs held values from what the machine itself writes (a log
// field, a reply body). The engine puts none there; a target the agent
// spelled could still hold one it learnt, and this keeps it out.
func (s *Stream) redact(v string) string {
	if s.eng == nil {
		return v
	}
	return s.eng.ScrubHeaderValue(v)
}

// ResponseHeaders decides a response to a forwarded request (intercept and
// control roles) with DecideResponse, on the headers exactly as the
// upstream sent them: scrubbed header values, content-length and
// content-encoding dropped and the body's scrubber started, or the 502 of
// an encoding the Custodian cannot read. A 101 to a WebSocket upgrade is
// decided by DecideSwitch (switched). It writes the request's
// action=intercept line, with the status the agent gets.
func (s *Stream) ResponseHeaders(h Headers, endStream bool) (status Status) {
	defer s.recoverPanic(true, &status)
	if !s.scrubs() {
		return Continue
	}
	all := h.All()
	code, _ := strconv.Atoi(firstValue(all, ":status"))
	if s.dec.WebSocket && code == 101 {
		return s.switched(h, all)
	}
	s.resHdrs = sortInto(s.resHdrs, all)
	rd := s.eng.DecideResponse(s.dec.Target, s.dec.Method, code, withoutPseudo(s.resHdrs))
	if rd.Reply != nil {
		s.logIntercept(rd.Reply.Status)
		return s.refuseResponse(rd.Reply)
	}
	s.logIntercept(code)
	for _, n := range rd.Remove {
		h.Del(n)
	}
	setAll(h, rd.Set)
	if !endStream {
		s.eng.ResetBody(&s.bodyMem, rd.Gzip)
		s.body = &s.bodyMem
	}
	return Continue
}

// ResponseData passes one chunk through the body's scrubber and lets what
// it returns go on at once: a body is never buffered whole; the scrubber
// holds the tail that could begin a value. A gzip body that turns out
// broken ends the response (cutOff). After a 101, each chunk of the
// upgraded bytes goes through the engine's frame scrubber (framesData).
func (s *Stream) ResponseData(b Body, endStream bool) (status Status) {
	defer s.recoverPanic(true, &status)
	if s.broken {
		_ = b.Set(nil)
		return Answered
	}
	if s.frames != nil {
		return s.framesData(b, endStream)
	}
	if s.body == nil {
		return Continue
	}
	in := b.Bytes()
	out, err := s.body.Write(s.out[:0], in)
	if err == nil && endStream {
		out, err = s.body.Flush(out)
		s.body = nil
	}
	s.out = out[:0]
	if err != nil {
		_ = b.Set(nil)
		return s.cutOff()
	}
	if bytes.Equal(out, in) {
		return Continue
	}
	if err := b.Set(out); err != nil {
		_ = b.Set(nil)
		return s.cutOff()
	}
	return Continue
}

// ResponseTrailers appends the scrubber's held tail before the trailers
// and decides the trailers as headers are: a name that holds a value is
// removed, every value scrubbed.
func (s *Stream) ResponseTrailers(t Headers) (status Status) {
	defer s.recoverPanic(true, &status)
	if s.broken {
		return Answered
	}
	if !s.scrubs() {
		return Continue
	}
	if s.body != nil {
		out, err := s.body.Flush(nil)
		s.body = nil
		if err != nil {
			return s.cutOff()
		}
		if len(out) > 0 {
			s.host.AppendResponseBody(out)
		}
	}
	scrubTrailers(t, s.eng)
	return Continue
}

// cutOff ends a response whose body could not be read to the end. Envoy
// answers the local reply when no header went out yet, and otherwise
// resets the stream: the agent never sees a cut body as complete.
func (s *Stream) cutOff() Status {
	if s.body != nil {
		s.body.Close()
		s.body = nil
	}
	return s.refuseResponse(&filter.Reply{
		Status: 502,
		Body:   "jr2 custodian: " + s.target + " answered with a gzip body that could not be read; the answer was cut off",
		Reason: filter.ReasonEncoding,
	})
}

// refuseResponse replaces the response with r (a reset, once headers went
// out). Whatever of the upstream's response still reaches the filter is
// dropped.
func (s *Stream) refuseResponse(r *filter.Reply) Status {
	s.broken = true
	return s.reply(true, r, []string{"action", "refuse", "target", s.target, "reason", r.Reason})
}

// scrubs reports whether the response of this stream is one the engine
// decides: the answer to a request the filter forwarded on the control or
// an intercept listener — not the filter's own reply, and not a tunnel.
func (s *Stream) scrubs() bool {
	return s.forwarded && !s.answered && s.cfg.route.Role != pluginconf.RoleEgress
}

// Done gives back a held body's share of the budget, releases the body's
// scrubber and writes the action=intercept line
// of a forwarded request that ended before any response (status=0). It
// never panics.
func (s *Stream) Done() {
	defer func() { _ = recover() }()
	if s.hold != nil {
		s.hold.Release() // a held request that ended before its body did
	}
	if s.chunks != nil {
		s.chunks.Close() // a chunked body that ended (or was reset) mid-chunk
	}
	if s.frames != nil {
		s.frames.Close()
		s.frames = nil
	}
	if s.body != nil {
		s.body.Close()
		s.body = nil
	}
	if s.scrubs() {
		s.logIntercept(0)
	}
}

// logIntercept writes the request's action=intercept line once.
func (s *Stream) logIntercept(status int) {
	if s.logged {
		return
	}
	s.logged = true
	s.fields = s.dec.AppendLogFields(s.fields[:0], status)
	s.log(s.fields)
}

// recoverPanic turns a panic in an entry point into a refusal: no mark (an
// existing one is overwritten with false), one line with reason=internal,
// and a 500 — or a reset, once response headers went out. A panic while
// the machine was already answering (an SDK's own errors, such as a
// finished request) is passed on to the adapter, which must recover it.
func (s *Stream) recoverPanic(encoding bool, status *Status) {
	r := recover()
	if r == nil {
		return
	}
	if s.answered {
		panic(r)
	}
	if s.marked {
		func() {
			defer func() { _ = recover() }()
			s.host.SetMark(false)
			s.marked = false
		}()
	}
	if s.body != nil {
		func() {
			defer func() { _ = recover() }()
			s.body.Close()
		}()
		s.body = nil
	}
	if s.scrubs() {
		s.logIntercept(500)
	}
	target := s.target
	if target == "" {
		target = "-"
	}
	r500 := &filter.Reply{Status: 500, Body: InternalErrorBody, Reason: ReasonInternal}
	fields := []string{"action", "refuse", "target", target, "reason", ReasonInternal}
	if encoding {
		s.broken = true // what follows of the upstream's response is dropped
	}
	*status = s.reply(encoding, r500, fields)
}

// InternalErrorBody is the fixed text of every answer to a stream that
// failed inside the Custodian (a recovered panic, in the machine or in an
// adapter).
const InternalErrorBody = "jr2 custodian: internal error; the request was not passed on"

// RequestOf reads what the engine judges from a request's headers:
// :method, :authority and :path (the first value of each), and every
// header that is not a pseudo-header, names sorted so that the engine's
// choices (which offending header a reply names) are the same on every
// run and in every host. Values of one name keep their order. Hop-by-hop
// headers are not removed here: Envoy's connection manager removes them
// before any filter runs, and what it leaves is judged.
func RequestOf(all []filter.Header) filter.Request {
	return requestOf(sortHeaders(all))
}

// requestOf is RequestOf of headers already sorted (a copy the caller
// owns: the pseudo-headers are dropped from it in place).
func requestOf(all []filter.Header) filter.Request {
	var r filter.Request
	r.Method = firstValue(all, ":method")
	r.Authority = firstValue(all, ":authority")
	r.Path = firstValue(all, ":path")
	r.ContentLength = firstValue(all, "content-length")
	r.Headers = withoutPseudo(all)
	return r
}

// applyRequest applies a forward decision to the request's headers: the
// engine's path, its removals, then its Set headers (each replacing every
// value of its name).
func applyRequest(h Headers, d *filter.Decision) {
	if d.Path != "" {
		h.Set(":path", d.Path)
	}
	for _, n := range d.Remove {
		h.Del(n)
	}
	for _, x := range d.Set {
		h.Set(x.Name, x.Value)
	}
}

// scrubTrailers applies the engine's verdict on the trailers: a name that
// holds a form of a held value is removed, and every value is replaced
// with its scrubbed form.
func scrubTrailers(t Headers, e *filter.Engine) {
	in := sortHeaders(t.All())
	out := e.DecideTrailers(in)
	kept := map[string]bool{}
	for _, x := range out {
		kept[x.Name] = true
	}
	seen := map[string]bool{}
	for _, x := range in {
		if !seen[x.Name] && !kept[strings.ToLower(x.Name)] {
			t.Del(x.Name)
		}
		seen[x.Name] = true
	}
	setAll(t, out)
}

// setAll makes each name's values exactly the listed ones, in order.
func setAll(h Headers, set []filter.Header) {
	done := map[string]bool{}
	for _, x := range set {
		if done[x.Name] {
			h.Add(x.Name, x.Value)
			continue
		}
		done[x.Name] = true
		h.Set(x.Name, x.Value)
	}
}

// sortHeaders orders headers by name, keeping the order of one name's
// values (a stable sort of a copy).
func sortHeaders(hs []filter.Header) []filter.Header { return sortInto(nil, hs) }

// sortInto is sortHeaders into dst's memory (its contents are replaced).
func sortInto(dst, hs []filter.Header) []filter.Header {
	out := append(dst[:0], hs...)
	slices.SortStableFunc(out, func(a, b filter.Header) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// withoutPseudo drops the pseudo-headers from hs in place: hs is the
// caller's own copy (sortHeaders').
func withoutPseudo(hs []filter.Header) []filter.Header {
	out := hs[:0]
	for _, x := range hs {
		if !strings.HasPrefix(x.Name, ":") {
			out = append(out, x)
		}
	}
	return out
}

func firstValue(hs []filter.Header, name string) string {
	for _, x := range hs {
		if x.Name == name {
			return x.Value
		}
	}
	return ""
}

// Scrubbing reports whether the stream holds a live body scrubber (a
// response body is flowing); Done releases it.
func (s *Stream) Scrubbing() bool { return s.body != nil }

// UpgradeOf reads a request's upgrade from its headers (Envoy keeps
// upgrade and connection on an upgrade it carries): each upgrade value,
// and whether a body comes (a content-length other than 0, or a
// transfer-encoding).
func UpgradeOf(hs []filter.Header) filter.Upgrade {
	var u filter.Upgrade
	for _, x := range hs {
		switch strings.ToLower(x.Name) {
		case "upgrade":
			u.Tokens = append(u.Tokens, x.Value)
		case "content-length":
			u.Body = u.Body || strings.TrimSpace(x.Value) != "0"
		case "transfer-encoding":
			u.Body = true
		}
	}
	return u
}

// switched decides the 101 of a forwarded WebSocket upgrade
// (filter.Engine.DecideSwitch): its headers scrubbed and every byte the
// upstream sends from then on through the frame scrubber, or the 502 of
// a 101 that selected an extension or another protocol, nothing of its
// frames passed on.
func (s *Stream) switched(h Headers, all []filter.Header) Status {
	rd := s.eng.DecideSwitch(s.dec.Target, withoutPseudo(sortHeaders(all)))
	if rd.Reply != nil {
		s.logIntercept(rd.Reply.Status)
		return s.refuseResponse(rd.Reply)
	}
	s.logIntercept(101)
	for _, n := range rd.Remove {
		h.Del(n)
	}
	setAll(h, rd.Set)
	s.frames = s.eng.NewFrames()
	return Continue
}

// framesData passes one chunk of the upgraded upstream's bytes through
// the frame scrubber. Malformed framing passes the Custodian's close
// frame (code 1002) and drops everything after.
func (s *Stream) framesData(b Body, endStream bool) Status {
	out, err := s.frames.Write(nil, b.Bytes())
	if err != nil || endStream {
		s.frames.Close()
		s.frames = nil
	}
	if err != nil {
		s.broken = true
	}
	if err := b.Set(out); err != nil {
		_ = b.Set(nil)
		s.broken = true
	}
	return Continue
}
