package envoyfilter

import (
	"bytes"

	"github.com/envoyproxy/envoy/contrib/golang/common/go/api"

	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/filter/pluginconf"
	"jr2.dev/boundary/internal/logline"
)

// Reasons of the adapter's own refusals (the engine's are in package
// filter).
const (
	// ReasonMisconfigured: the stream has no usable config (see Merge).
	ReasonMisconfigured = "misconfigured"
	// ReasonInternal: a callback panicked and was recovered.
	ReasonInternal = "internal"
)

// noGRPCStatus is SendLocalReply's "no gRPC status".
const noGRPCStatus = -1

// Configs a stream gets when the factory is handed something it cannot run.
var (
	noRouteConfig = &streamConfig{broken: errNoRouteConfig}
	noConfig      = &streamConfig{broken: errNoConfig}
)

// Factory is the plugin's api.StreamFilterFactory: one filter per stream,
// holding the stream's state. config is what Merge returned for the
// stream's route, or the filter-level config when the route has none; any
// config but a usable merged one makes the filter refuse the request.
func Factory(config interface{}, callbacks api.FilterCallbackHandler) api.StreamFilter {
	s := &stream{cb: callbacks, cfg: noConfig}
	switch c := config.(type) {
	case *streamConfig:
		if c != nil {
			s.cfg = c
		}
	case *filterConfig:
		s.cfg = noRouteConfig
	}
	return s
}

var _ api.StreamFilterFactory = Factory

// stream is the filter of one request and its response. Envoy calls its
// methods one at a time (see the package doc).
type stream struct {
	api.PassThroughStreamFilter
	cb  api.FilterCallbackHandler
	cfg *streamConfig

	target    string          // for log lines: the decision's target, or "-"
	forwarded bool            // the request went on, marked
	marked    bool            // the mark was set
	answered  bool            // this filter answered the request itself
	dec       filter.Decision // the forward decision (control, intercept)
	logged    bool            // the action=intercept line was written
	body      *filter.Body    // the response body scrubber, while a body flows
	broken    bool            // the response was cut off; drop whatever follows
}

// DecodeHeaders decides the request by the route's role and applies the
// verdict.
func (s *stream) DecodeHeaders(h api.RequestHeaderMap, _ bool) (status api.StatusType) {
	defer s.recoverPanic(false, &status)
	s.target = "-"
	if m := s.cfg.broken; m != nil {
		return s.misconfigured(m.why)
	}
	r := requestFromHeaders(h)
	e := s.cfg.engine
	switch s.cfg.route.Role {
	case pluginconf.RoleEgress:
		cd := e.DecideConnect(r.Method, r.Authority)
		if cd.Reply != nil {
			return s.reply(s.decoder(), cd.Reply, cd.LogFields())
		}
		s.target = cd.Target
		if cd.Target != r.Authority {
			// The canonical target decides, so the rendered routes must
			// match on it too (a trailing dot or capitals would otherwise
			// miss the intercept route).
			h.SetHost(cd.Target)
			s.cb.ClearRouteCache()
		}
		if f := cd.LogFields(); f != nil {
			s.log(f)
		}
		return s.forward()
	case pluginconf.RoleControl:
		d := e.DecideControl(&r)
		if d.Reply != nil {
			return s.reply(s.decoder(), d.Reply, d.LogFields(0))
		}
		applyRequest(h, &d)
		// The route matched the agent's path; the Orchestrator gets the
		// engine's path and its own name. The route cache is kept on
		// purpose: the rewritten path is no route of this listener.
		h.SetHost(d.Target)
		return s.forwardDecision(d)
	case pluginconf.RoleIntercept:
		d := e.DecideRequest(s.cfg.route.Target, &r)
		if d.Reply != nil {
			return s.reply(s.decoder(), d.Reply, d.LogFields(0))
		}
		applyRequest(h, &d)
		// The Host rule let any spelling of the target through (case, a
		// trailing dot, :443); the upstream gets the target's own, as from
		// the Go host.
		h.SetHost(filter.UpstreamHost(s.cfg.route.Target))
		return s.forwardDecision(d)
	}
	// ParseRoute admits no other role; a config built around one is a bug.
	return s.misconfigured("the route's role is unknown")
}

// misconfigured answers 500: the stream has no config it can decide with.
func (s *stream) misconfigured(why string) api.StatusType {
	return s.reply(s.decoder(), &filter.Reply{
		Status: 500,
		Body:   "jr2 custodian: misconfigured: " + why + "; the request was not passed on",
		Reason: ReasonMisconfigured,
	}, []string{"action", "refuse", "target", "-", "reason", ReasonMisconfigured})
}

func (s *stream) forwardDecision(d filter.Decision) api.StatusType {
	s.dec = d
	s.target = d.Target
	return s.forward()
}

// forward marks the request and lets it go on. The mark is the last thing
// DecodeHeaders does, after every header change.
func (s *stream) forward() api.StatusType {
	s.cb.StreamInfo().DynamicMetadata().Set(pluginconf.MetadataNamespace, pluginconf.MarkKey, true)
	s.marked = true
	s.forwarded = true
	return api.Continue
}

// reply answers the request (or the response) with r, logs fields, and
// never marks.
func (s *stream) reply(cb api.FilterProcessCallbacks, r *filter.Reply, fields []string) api.StatusType {
	s.answered = true
	s.log(fields)
	cb.SendLocalReply(r.Status, s.redact(r.Body), textPlain(), noGRPCStatus, "jr2_custodian_"+r.Reason)
	return api.LocalReply
}

// log writes one jr2.custodian line of the engine's (or this package's)
// fields: names, targets and words.
func (s *stream) log(fields []string) {
	for i, f := range fields {
		fields[i] = s.redact(f)
	}
	api.LogInfo(logline.Format(logline.Custodian, fields...))
}

// redact scrubs held values from what the filter itself writes (a log
// field, a reply body). The engine puts none there; a target the agent
// spelled could still hold one it learnt, and this keeps it out.
func (s *stream) redact(v string) string {
	if s.cfg.engine == nil {
		return v
	}
	return s.cfg.engine.ScrubHeaderValue(v)
}

// EncodeHeaders decides a response to a forwarded request: scrubbed
// headers, the body's scrubber, or the 502 of an unreadable encoding. It
// writes the request's action=intercept line.
func (s *stream) EncodeHeaders(h api.ResponseHeaderMap, endStream bool) (status api.StatusType) {
	defer s.recoverPanic(true, &status)
	if !s.scrubs() {
		return api.Continue
	}
	code, _ := h.Status()
	rd := s.cfg.engine.DecideResponse(s.dec.Target, s.dec.Method, code, responseHeaders(h))
	if rd.Reply != nil {
		s.logIntercept(rd.Reply.Status)
		return s.refuseResponse(rd.Reply)
	}
	s.logIntercept(code)
	applyResponse(h, &rd)
	if !endStream {
		s.body = s.cfg.engine.NewBody(rd.Gzip)
	}
	return api.Continue
}

// EncodeData passes one chunk through the body's scrubber and lets what it
// returns go on at once.
func (s *stream) EncodeData(buf api.BufferInstance, endStream bool) (status api.StatusType) {
	defer s.recoverPanic(true, &status)
	if s.broken {
		buf.Reset()
		return api.LocalReply
	}
	if s.body == nil {
		return api.Continue
	}
	in := buf.Bytes()
	out, err := s.body.Write(nil, in)
	if err == nil && endStream {
		out, err = s.body.Flush(out)
		s.body = nil
	}
	if err != nil {
		buf.Reset()
		return s.cutOff()
	}
	if bytes.Equal(out, in) {
		return api.Continue
	}
	if len(out) == 0 {
		buf.Reset()
		return api.Continue
	}
	if err := buf.Set(out); err != nil {
		buf.Reset()
		return s.cutOff()
	}
	return api.Continue
}

// EncodeTrailers adds the scrubber's held tail before the trailers and
// scrubs every trailer value.
func (s *stream) EncodeTrailers(t api.ResponseTrailerMap) (status api.StatusType) {
	defer s.recoverPanic(true, &status)
	if s.broken {
		return api.LocalReply
	}
	if !s.scrubs() {
		return api.Continue
	}
	if s.body != nil {
		out, err := s.body.Flush(nil)
		s.body = nil
		if err != nil {
			return s.cutOff()
		}
		if len(out) > 0 {
			s.encoder().AddData(out, true)
		}
	}
	scrubTrailers(t, s.cfg.engine)
	return api.Continue
}

// cutOff ends a response whose body could not be read to the end. Envoy
// answers the local reply when no header went out yet, and otherwise
// resets the stream: the agent never sees a cut body as complete.
func (s *stream) cutOff() api.StatusType {
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
func (s *stream) refuseResponse(r *filter.Reply) api.StatusType {
	s.broken = true
	return s.reply(s.encoder(), r, []string{"action", "refuse", "target", s.target, "reason", r.Reason})
}

// scrubs reports whether the response of this stream is one the engine
// decides: the answer to a request the filter forwarded on the control or
// an intercept listener — not the filter's own reply, and not a tunnel.
func (s *stream) scrubs() bool {
	return s.forwarded && !s.answered && s.cfg.route.Role != pluginconf.RoleEgress
}

// OnDestroy releases the body's scrubber and writes the action=intercept
// line of a forwarded request that ended before any response (status=0).
func (s *stream) OnDestroy(api.DestroyReason) {
	defer func() { _ = recover() }()
	if s.body != nil {
		s.body.Close()
		s.body = nil
	}
	if s.scrubs() {
		s.logIntercept(0)
	}
}

// logIntercept writes the request's action=intercept line once.
func (s *stream) logIntercept(status int) {
	if s.logged {
		return
	}
	s.logged = true
	s.log(s.dec.LogFields(status))
}

// recoverPanic turns a panic in a callback into a refusal: no mark (an
// existing one is overwritten with false), one line with reason=internal,
// and a 500 — or a reset, once response headers went out. A panic while
// the filter was already answering (the SDK's own errors, such as a
// finished request) is passed on to the SDK, which handles it.
func (s *stream) recoverPanic(encoding bool, status *api.StatusType) {
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
			s.cb.StreamInfo().DynamicMetadata().Set(pluginconf.MetadataNamespace, pluginconf.MarkKey, false)
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
	r500 := &filter.Reply{Status: 500, Body: "jr2 custodian: internal error; the request was not passed on", Reason: ReasonInternal}
	fields := []string{"action", "refuse", "target", target, "reason", ReasonInternal}
	cb := s.decoder
	if encoding {
		s.broken = true // what follows of the upstream's response is dropped
		cb = s.encoder
	}
	*status = s.reply(cb(), r500, fields)
}

func (s *stream) decoder() api.FilterProcessCallbacks { return s.cb.DecoderFilterCallbacks() }
func (s *stream) encoder() api.FilterProcessCallbacks { return s.cb.EncoderFilterCallbacks() }

// textPlain is the header set of every local reply.
func textPlain() map[string][]string {
	return map[string][]string{"content-type": {"text/plain; charset=utf-8"}}
}
