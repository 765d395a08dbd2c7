package mediator

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"

	"jr2.dev/boundary/custodian/internal/relay"
	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/internal/bundle"
	"jr2.dev/boundary/internal/contract"
	"jr2.dev/boundary/internal/mode"
)

// forward carries one request on an allowed connection to its target,
// decided and answered with one engine (the broker's newest when it
// began: an OAuth token minted meanwhile changes the next request): the
// engine decides it (DecideAllowed, bound target or not), the run's mode
// may refuse it, and it is recorded, sent, and its answer streamed back
// through the scrubber and recorded chunk by chunk.
func (m *Mediator) forward(w http.ResponseWriter, r *http.Request, ci *connInfo) {
	eng := m.o.Broker.Engine()
	target := ci.target()
	req := relay.RequestOf(r)
	if r.URL.IsAbs() {
		req.Path = r.URL.RequestURI() // the proxy's absolute form: the path goes upstream
	}
	d := eng.DecideAllowed(target, ci.scheme == "https", &req, relay.UpgradeOf(r))
	if d.NeedBody { // a SigV4 signature over the body's hash: the same step as custodian serve's
		d = relay.SignedBody(eng, target, r, &req)
	}
	if d.WebSocket && m.o.Mode.Mode() != mode.Live {
		d.Reply = &filter.Reply{Status: http.StatusForbidden, Reason: filter.ReasonUpgrade,
			Body: "jr2 custodian: mode " + m.o.Mode.Mode() + " matches and replays requests whole, and a WebSocket is not one; run it live"}
	}
	if d.Reply != nil {
		m.recordDenial(bundle.KindEgressDecision, egressDecision{Attempt: ci.attempt, Decision: "deny", Host: ci.host, Port: ci.port,
			Rule: ruleEngine, Reason: d.Reply.Reason, Method: safeMethod(r.Method), Status: d.Reply.Status})
		m.refuseLog(target, d.Reply.Reason)
		relay.WriteReply(w, d.Reply)
		return
	}
	var (
		reqSeq uint64
		v      mode.Verdict
		next   = m.transport(ci.scheme, ci.host, ci.port)
	)
	relay.Forward(w, r, &relay.Exchange{
		Engine: eng, Decision: &d, Scheme: ci.scheme, Target: target, Host: ci.hostHeader(),
		// Recorded before it is sent, the run's mode applied; a WebSocket
		// is carried from here.
		Prepare: func(out *http.Request) (int, bool) {
			var ok bool
			if reqSeq, v, ok = m.prepare(eng, w, r, ci, out, &d); !ok {
				return 0, true
			}
			if d.WebSocket {
				status := m.webSocket(eng, w, r, next, target, out, reqSeq)
				if m.log != nil {
					m.log.Log(d.LogFields(status)...)
				}
				return status, true
			}
			return 0, false
		},
		Send: func(out *http.Request) (*http.Response, bool, error) {
			return relay.RoundTrip(roundTripFunc(func(req *http.Request) (*http.Response, error) {
				return v.RoundTrip(next, req)
			}), out)
		},
		Fail: func(w http.ResponseWriter, rep *filter.Reply, _ bool, err error) {
			if errors.Is(err, relay.ErrGuarded) {
				m.refuseLog(target, filter.ReasonGuard)
			}
			m.localReply(w, reqSeq, rep)
		},
		Gone: func() {
			m.record(bundle.KindHTTPResponse, httpResponse{Request: reqSeq, End: true, Error: "the client went away"})
		},
		Respond: func(w http.ResponseWriter, resp *http.Response) int {
			status := m.relayResponse(eng, w, r, target, reqSeq, resp)
			if m.log != nil && len(d.Secrets) > 0 {
				m.log.Log(d.LogFields(status)...)
			}
			return status
		},
	})
}

// prepare records out before it is sent and applies the run's mode: the
// request's record (a form of a value the agent sent itself refuses it,
// recorded with its label), the mode's verdict, and a record of each
// secret the engine put in. It reports false when it answered the child
// itself.
func (m *Mediator) prepare(eng *filter.Engine, w http.ResponseWriter, r *http.Request, ci *connInfo, out *http.Request, d *filter.Decision) (uint64, mode.Verdict, bool) {
	target := ci.target()
	path := d.Path
	if len(d.Secrets) > 0 && m.o.Broker.Contains([]byte(path)) && !m.o.Broker.Contains([]byte(r.URL.RequestURI())) {
		// A presigned URL the engine signed again with the real key: shown
		// as the agent sent it, with its stand-ins, as a swapped header is.
		path = r.URL.RequestURI()
	}
	hr := httpRequest{
		Attempt: ci.attempt,
		Method:  out.Method,
		URL:     ci.scheme + "://" + ci.hostHeader() + path,
		Headers: m.recordedHeaders(out, r, d),
		Length:  out.ContentLength,
	}
	if hr.scrub(m) {
		// A form of a value the agent sent itself: recorded with its
		// label, and never sent.
		m.record(bundle.KindHTTPRequest, hr)
		rep := &filter.Reply{Status: http.StatusForbidden, Reason: ruleValueInRequest,
			Body: "jr2 custodian: the request to " + target + " holds a form of a held value in its url or headers; a value is sent only where the engine puts it\n"}
		m.recordDenial(bundle.KindEgressDecision, egressDecision{Attempt: ci.attempt, Decision: "deny", Host: ci.host, Port: ci.port,
			Rule: ruleValueInRequest, Method: safeMethod(r.Method), Status: rep.Status, Scrubbed: true})
		m.refuseLog(target, ruleValueInRequest)
		relay.WriteReply(w, rep)
		return 0, mode.Verdict{}, false
	}
	reqSeq, err := m.record(bundle.KindHTTPRequest, hr)
	if err != nil {
		m.localReply(w, reqSeq, eng.Unreachable(target, "the request could not be recorded, so it was not sent"))
		return reqSeq, mode.Verdict{}, false
	}
	v, ok := m.decideMode(eng, w, r, ci, out, &hr, reqSeq, d)
	if !ok {
		return reqSeq, v, false
	}
	for _, name := range d.Secrets {
		if err != nil || !v.Sends() {
			break
		}
		_, err = m.record(bundle.KindSecretInjected, secretInjected{Request: reqSeq, Name: name, Host: target})
	}
	if err != nil {
		m.localReply(w, reqSeq, eng.Unreachable(target, "the request could not be recorded, so it was not sent"))
		return reqSeq, v, false
	}
	return reqSeq, v, true
}

// relayResponse streams resp to w through the engine and records it: the
// status and headers before any byte, each chunk the child got, and the
// end. A chunk that cannot be recorded cuts the child's stream.
func (m *Mediator) relayResponse(eng *filter.Engine, w http.ResponseWriter, r *http.Request, target string, reqSeq uint64, resp *http.Response) (status int) {
	var chunks int
	var bytes int64
	headed := false
	done := false
	defer func() {
		if done {
			return
		}
		// relay.Response cut the stream (a broken or unreadable body) or a
		// hook refused: record the cut, then let the server reset the
		// child's stream.
		m.record(bundle.KindHTTPResponse, httpResponse{Request: reqSeq, End: true, Chunks: chunks, Bytes: bytes, Error: "cut"})
	}()
	hooks := &relay.Hooks{
		Header: func(st int, h http.Header) {
			headed = true
			if _, err := m.record(bundle.KindHTTPResponse, httpResponse{Request: reqSeq, Status: st, Headers: headerList(h)}); err != nil {
				panic(http.ErrAbortHandler)
			}
		},
		Chunk: func(p []byte) {
			if _, err := m.record(bundle.KindHTTPResponse, chunkRecord(reqSeq, chunks, p)); err != nil {
				panic(http.ErrAbortHandler)
			}
			chunks++
			bytes += int64(len(p))
		},
	}
	relay.Response(eng, w, target, r.Method, resp, &status, hooks)
	done = true
	if !headed {
		// The engine answered itself (an encoding it cannot scrub).
		m.recordDenial(bundle.KindHTTPResponse, httpResponse{Request: reqSeq, Status: status, Local: true})
		return status
	}
	m.record(bundle.KindHTTPResponse, httpResponse{Request: reqSeq, End: true, Chunks: chunks, Bytes: bytes})
	return status
}

// webSocket carries an upgrade the engine forwarded (relay.WebSocket) and
// records it as a request's answer: the 101's headers, each chunk of
// scrubbed frames the child got as a body chunk, the child's own bytes as
// the request's body (recorded scrubbed, as any body), and the end. A
// record that cannot be written ends the connection. Any other answer is
// recorded by its status.
func (m *Mediator) webSocket(eng *filter.Engine, w http.ResponseWriter, r *http.Request, pool *relay.Pool, target string, out *http.Request, reqSeq uint64) int {
	rec := m.newBodyRecorder(reqSeq)
	var chunks int
	var n int64
	hooks := &relay.WebSocketHooks{
		Switch: func(h http.Header) error {
			_, err := m.record(bundle.KindHTTPResponse, httpResponse{Request: reqSeq, Status: http.StatusSwitchingProtocols, Headers: headerList(h)})
			return err
		},
		Frames: func(p []byte) error {
			_, err := m.record(bundle.KindHTTPResponse, chunkRecord(reqSeq, chunks, p))
			chunks++
			n += int64(len(p))
			return err
		},
		Agent: rec.Write,
	}
	status, failed := relay.WebSocket(eng, w, r, out, pool.Dial, target, nil, nil, hooks)
	switch {
	case failed != nil:
		if r.Context().Err() != nil {
			m.record(bundle.KindHTTPResponse, httpResponse{Request: reqSeq, End: true, Error: "the client went away"})
			return 499
		}
		m.localReply(w, reqSeq, failed)
		return failed.Status
	case status == http.StatusSwitchingProtocols:
		rec.End("")
		m.record(bundle.KindHTTPResponse, httpResponse{Request: reqSeq, End: true, Chunks: chunks, Bytes: n})
	case status != 0:
		m.record(bundle.KindHTTPResponse, httpResponse{Request: reqSeq, Status: status, End: true})
	}
	return status
}

// localReply writes a reply the mediator makes itself, and records it when
// a request was recorded (req > 0).
func (m *Mediator) localReply(w http.ResponseWriter, req uint64, rep *filter.Reply) {
	if req > 0 {
		body := rep.Body
		m.recordDenial(bundle.KindHTTPResponse, httpResponse{Request: req, Status: rep.Status, Local: true, BodyChunk: bundle.BodyChunk{Body: &body}})
	}
	relay.WriteReply(w, rep)
}

// recordedHeaders are the outbound request's headers as the record shows
// them: a header that carries a value is shown as the agent sent it, with
// the stand-in.
func (m *Mediator) recordedHeaders(out, in *http.Request, d *filter.Decision) [][2]string {
	h := out.Header.Clone()
	for _, s := range d.Set {
		if m.o.Broker.Contains([]byte(s.Value)) {
			h[http.CanonicalHeaderKey(s.Name)] = in.Header.Values(s.Name)
		}
	}
	if u, ok := h["User-Agent"]; ok && len(u) == 1 && u[0] == "" {
		delete(h, "User-Agent") // relay's marker for "send none"
	}
	return append([][2]string{{"Host", out.Host}}, headerList(h)...)
}

// safeMethod is m when it is a short token, for the record.
func safeMethod(m string) string {
	if len(m) > 16 {
		return "(long)"
	}
	for i := 0; i < len(m); i++ {
		if c := m[i]; c < 'A' || c > 'Z' {
			return "(not a token)"
		}
	}
	return m
}

// transport is the pool for scheme toward host:port, made on first use:
// HTTP/1.1 only, upstream TLS verified against the roots and the host, the
// address from Resolve when set; a request it can carry whole goes on the
// handler's goroutine (relay.Pool).
func (m *Mediator) transport(scheme, host string, port uint16) *relay.Pool {
	key := scheme + " " + contract.JoinTarget(host, int(port))
	m.tmu.Lock()
	defer m.tmu.Unlock()
	if t, ok := m.trans[key]; ok {
		return t
	}
	addr := net.JoinHostPort(host, strconv.Itoa(int(port)))
	target := contract.JoinTarget(host, int(port))
	eng := m.o.Broker.Engine()
	// The dial guard on the address actually dialled, after resolution: an
	// allowed name that resolves to loopback, link-local (metadata) or
	// another guarded address is not dialled (DialAllowed: the Custodian's
	// guard for a bound target and for a tunnel).
	var check func(netip.Addr) *filter.Reply
	if !m.o.LocalUpstreams {
		check = func(a netip.Addr) *filter.Reply { return eng.DialAllowed(target, a) }
	}
	dialer := relay.GuardedDialer(m.dialer, check)
	dial := func(ctx context.Context, network, _ string) (net.Conn, error) {
		a := addr
		if m.o.Resolve != nil {
			var err error
			if a, err = m.o.Resolve(host, port); err != nil {
				return nil, &net.OpError{Op: "dial", Net: network, Err: err}
			}
		}
		return dialer.DialContext(ctx, "tcp", a)
	}
	t := relay.NewPool(dial, m.o.Roots, host, addr)
	if scheme == "http" {
		t = relay.NewPlainPool(dial, addr)
	}
	m.trans[key] = t
	return t
}

// reasonBodySize is the refuse word of a body a mode cannot read whole.
const reasonBodySize = "body-size"

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// decideMode records the request body and asks the run's mode about the
// request. Live streams the body, recording each read before the
// transport gets it; every other mode reads it whole first (its hash is
// part of the effect's canonical form), bounded by modeBodyMax. It
// answers the child itself and reports false when the request goes no
// further: a body that could not be read or recorded, one over the bound,
// or a mode's refusal (recorded as an egress-decision with the mode's
// rule).
func (m *Mediator) decideMode(eng *filter.Engine, w http.ResponseWriter, r *http.Request, ci *connInfo, out *http.Request, hr *httpRequest, reqSeq uint64, d *filter.Decision) (mode.Verdict, bool) {
	target := ci.target()
	layer := m.o.Mode
	hasBody := out.Body != nil && out.Body != http.NoBody
	rec := m.newBodyRecorder(reqSeq)
	var body []byte
	switch {
	case !hasBody:
	case layer.Mode() == mode.Live:
		out.Body = bundle.RecordedBody(out.Body, rec, -1)
	default:
		b, ok, err := readWhole(out.Body, rec)
		out.Body.Close()
		switch {
		case err != nil && r.Context().Err() != nil:
			m.record(bundle.KindHTTPResponse, httpResponse{Request: reqSeq, End: true, Error: "the client went away"})
			return mode.Verdict{}, false
		case err != nil:
			m.localReply(w, reqSeq, eng.Unreachable(target, "the request body could not be read or recorded, so it was not sent"))
			return mode.Verdict{}, false
		case !ok:
			m.refuseLog(target, reasonBodySize)
			m.localReply(w, reqSeq, &filter.Reply{Status: http.StatusRequestEntityTooLarge, Reason: reasonBodySize,
				Body: "jr2 custodian: mode " + layer.Mode() + " reads a request body whole to match it, and this one is over 16 MiB\n"})
			return mode.Verdict{}, false
		}
		body = b
		out.ContentLength = int64(len(b))
		out.Body = http.NoBody
		if len(b) > 0 {
			out.Body = io.NopCloser(bytes.NewReader(b))
		}
		out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	}
	if layer.Mode() == mode.Live {
		return mode.Verdict{}, true // live decides nothing: as without a mode
	}
	// The canonical form holds the body as recorded: scrubbed, as the
	// stream scrubbed it (the whole-input scan is byte-identical).
	eff, err := mode.Canon(out.Method, hr.URL, hr.Headers, eng.Scrubber().Bytes(body))
	if err != nil {
		m.localReply(w, reqSeq, eng.Unreachable(target, "the request could not be put in its canonical form: "+err.Error()))
		return mode.Verdict{}, false
	}
	rule, _ := m.o.Policy.Allows(ci.host, ci.port)
	if len(d.Secrets) > 0 {
		rule += " (engine)"
	}
	v := layer.BeforeWith(eff, reqSeq, mode.Plan{Secrets: d.Secrets, Rule: rule,
		Scrub: func() mode.Stream { return eng.Scrubber().NewStream() }})
	if v.Action == mode.Refuse {
		rep := &filter.Reply{Status: http.StatusForbidden, Reason: v.Rule, Body: "jr2 custodian: " + v.Reason + "\n"}
		m.recordDenial(bundle.KindEgressDecision, egressDecision{Attempt: ci.attempt, Decision: "deny", Host: ci.host, Port: ci.port,
			Rule: v.Rule, Method: safeMethod(r.Method), Status: rep.Status})
		m.refuseLog(target, v.Rule)
		m.localReply(w, reqSeq, rep)
		return mode.Verdict{}, false
	}
	return v, true
}
