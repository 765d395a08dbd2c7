package relay

import (
	"net/http"

	"jr2.dev/boundary/filter"
)

// Exchange is one request the engine decided to send upstream, as a host
// hands it to Forward: the decision, where it goes, and the host's hooks.
// Each hook's nil is the plain behaviour named beside it; hooks run on the
// handler's goroutine, in the order Forward's doc gives.
type Exchange struct {
	// Engine decided the request, and decides and scrubs its answer.
	Engine *filter.Engine
	// Decision is the engine's, with no Reply.
	Decision *filter.Decision
	// Scheme, Target and Host are the outbound request's: "https" or
	// "http", the canonical host:port dialled, and its Host header.
	Scheme, Target, Host string
	// Transport sends the outbound request, unless Send is set.
	Transport http.RoundTripper

	// Prepare runs with the outbound request before it is sent (records, a
	// mode's match). It may replace out.Body; it must not change out's
	// headers, which are the engine's. When it answers the client itself
	// (or carries the whole exchange, as a WebSocket), it reports done and
	// the status the client got, and nothing is sent.
	Prepare func(out *http.Request) (status int, done bool)
	// Send sends out in Transport's place (a replay, retries); nil is
	// RoundTrip(Transport, out). sent reports whether any of out was
	// written.
	Send func(out *http.Request) (resp *http.Response, sent bool, err error)
	// Fail answers a request that got no answer, or whose outbound request
	// could not be built (then sent is false and err the reason); nil
	// writes rep (WriteReply). It is not called when the client went away.
	Fail func(w http.ResponseWriter, rep *filter.Reply, sent bool, err error)
	// Gone is told that the client went away before an answer.
	Gone func()
	// Respond streams the answer to the client and returns the status it
	// got; nil is Response with Hooks.
	Respond func(w http.ResponseWriter, resp *http.Response) (status int)
	// Hooks observe the answer Response passes on (when Respond is nil).
	Hooks *Hooks
	// Log is told the status the client got (499: it went away), once,
	// when Forward returns or the handler's stream is cut.
	Log func(status int)
}

// Forward carries x to its upstream and the answer back, in this order:
// the request body is made full-duplex (unless the decision is a
// WebSocket's, whose bytes its carrier moves); the outbound request is
// built exactly as the engine decided (Outbound); Prepare; Send; then
// either the answer, streamed through the engine's scrubber (Respond), or
// the 502 of a request that got no answer (Failure, through Fail), or
// nothing when the client went away (499). It returns the status the
// client got. serve's intercept and control listeners and the contained
// run's mediator each forward through it, so the steps of a forward are in
// one place.
func Forward(w http.ResponseWriter, r *http.Request, x *Exchange) (status int) {
	if x.Log != nil {
		defer func() { x.Log(status) }()
	}
	if !x.Decision.WebSocket {
		defer FullDuplex(w, r)()
	}
	if x.Decision.Chunks != nil { // a signed aws-chunked body, re-signed as it goes
		r.Body = x.Decision.Chunks.Reader(r.Body)
		// The chunk it holds is given back when the request ends, however.
		defer x.Decision.Chunks.Close()
	}
	fail := func(rep *filter.Reply, sent bool, err error) int {
		if x.Decision.Chunks != nil && x.Decision.Chunks.Failed() {
			// The body was cut upstream (the transport aborts a body
			// whose read failed), so the upstream never read it whole;
			// the agent gets the refusal: 403, or the budget's 503.
			rep = x.Engine.ChunksRefused(x.Target, x.Decision.Chunks)
		}
		if x.Fail != nil {
			x.Fail(w, rep, sent, err)
		} else {
			WriteReply(w, rep)
		}
		return rep.Status
	}
	out, err := Outbound(r, x.Scheme, x.Target, x.Host, x.Decision)
	if err != nil {
		return fail(x.Engine.Unreachable(x.Target, "the request could not be built: "+err.Error()), false, err)
	}
	if x.Prepare != nil {
		if st, done := x.Prepare(out); done {
			return st
		}
	}
	var resp *http.Response
	var sent bool
	if x.Send != nil {
		resp, sent, err = x.Send(out)
	} else {
		resp, sent, err = RoundTrip(x.Transport, out)
	}
	if err != nil {
		if r.Context().Err() != nil {
			if x.Gone != nil {
				x.Gone()
			}
			return 499 // the client went away: its request was reset upstream too
		}
		return fail(Failure(x.Engine, x.Target, sent, err), sent, err)
	}
	if x.Respond != nil {
		return x.Respond(w, resp)
	}
	Response(x.Engine, w, x.Target, r.Method, resp, &status, x.Hooks)
	return status
}
