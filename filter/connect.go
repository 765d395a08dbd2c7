package filter

import (
	"net"
	"net/netip"
	"strings"

	"jr2.dev/boundary/filter/dialguard"
	"jr2.dev/boundary/internal/contract"
)

// ConnectDecision is the egress listener's verdict on a CONNECT.
type ConnectDecision struct {
	// Target is the canonical host:port (lowercase, no trailing dot), or
	// the raw authority when it is not one.
	Target string
	// Intercept: a held secret is bound to Target; the host ends TLS with
	// Target's leaf and decides each request with DecideRequest.
	Intercept bool
	// Reply is set when the CONNECT is answered here; otherwise a target
	// that is not intercepted is tunneled byte for byte, and the host checks
	// every address it dials with AllowDial.
	Reply *Reply

	logTarget string // Target with any stand-in redacted
}

// LogFields returns the pairs of the decision's jr2.custodian line:
// action=tunnel or action=refuse. An intercepted target logs per request.
func (d ConnectDecision) LogFields() []string {
	switch {
	case d.Reply != nil:
		return []string{"action", "refuse", "target", d.logTarget, "reason", d.Reply.Reason}
	case d.Intercept:
		return nil
	}
	return []string{"action", "tunnel", "target", d.logTarget}
}

// DecideConnect decides a request on the egress listener: CONNECT only; the
// target (lowercased, no trailing dot) decides, never the SNI or a Host
// header. A bound target is intercepted. Any other is tunneled, unless it
// spells a guarded address or a localhost name (403, reason guard) — the
// half of the dial guard that runs before anything is resolved.
func (e *Engine) DecideConnect(method, authority string) ConnectDecision {
	d := e.decideConnect(method, authority)
	d.Reply = e.scrubReply(d.Reply)
	return d
}

func (e *Engine) decideConnect(method, authority string) ConnectDecision {
	if method != "CONNECT" {
		return ConnectDecision{Target: "-", logTarget: "-", Reply: reply(405, ReasonNotConnect, "this listener takes CONNECT only; use it as HTTPS_PROXY")}
	}
	host, port, err := contract.SplitTarget(authority)
	if err == contract.ErrNotAHost {
		if t, why, ok := guardedSpelling(authority); ok {
			return ConnectDecision{Target: t, logTarget: e.logTarget(t), Reply: guardReply(t, why)}
		}
	}
	if err == nil && strings.IndexByte(host, '_') >= 0 {
		// Envoy's HTTP/1 codec refuses a CONNECT target with '_' before any
		// filter runs: no host could tunnel to (or intercept) one, so the
		// engine refuses it as a target that is not host:port.
		err = contract.ErrNotAHost
	}
	if err != nil {
		return ConnectDecision{Target: "-", logTarget: "-", Reply: reply(400, ReasonTarget, "a CONNECT target is host:port: "+err.Error())}
	}
	t := contract.JoinTarget(host, port)
	d := ConnectDecision{Target: t, logTarget: e.logTarget(t)}
	if len(e.byTarget[t]) > 0 {
		d.Intercept = true
		return d
	}
	if v := dialguard.Judge(host); v.Guarded {
		d.Reply = guardReply(t, v.Why)
	}
	return d
}

// AllowDial is the resolved half of the dial guard: a host calls it with
// the address it is about to dial for a tunnel (after resolution, e.g. in
// net.Dialer.Control), and dials only when it returns nil.
func (e *Engine) AllowDial(target string, addr netip.Addr) *Reply {
	if g, why := dialguard.Guarded(addr); g {
		return e.scrubReply(guardReply(target, why))
	}
	return nil
}

// guardedSpelling reads a CONNECT target whose host is no host by the one
// grammar but an IPv4 spelling inet_aton reads ("127.1", "0x7f.0.0.1",
// "2130706433"): when the address it spells is guarded, the refusal names
// what it would dial (403, reason guard) rather than only that it is no
// host. Only inet_aton's alphabet is read, so the target logged is digits,
// 'x', a–f and dots.
func guardedSpelling(authority string) (target, why string, ok bool) {
	h, p, err := net.SplitHostPort(authority)
	if err != nil {
		return "", "", false
	}
	if _, ok := contract.PortNumber(p); !ok {
		return "", "", false
	}
	h = contract.Lower(strings.TrimSuffix(h, "."))
	if h == "" || strings.Trim(h, "0123456789abcdefx.") != "" {
		return "", "", false
	}
	v := dialguard.Judge(h)
	if !v.IsAddr || !v.Guarded {
		return "", "", false
	}
	return net.JoinHostPort(h, p), v.Why, true
}

func guardReply(target, why string) *Reply {
	return reply(403, ReasonGuard, target+" is guarded ("+why+"); a tunnel never reaches it")
}

// logTarget is t as a log line shows it: "[stand-in]" whole when t holds
// a stand-in's prefix or mark in any case (the rest of such a name is the agent's
// choice too, and Envoy's access log, which cannot cut a stand-in out of
// a string, writes the same), else t with any value scrubbed.
func (e *Engine) logTarget(t string) string {
	if markFold(t) {
		return "[stand-in]"
	}
	return e.scrubber.String(t)
}

// LogTarget is Target as the log shows it (any stand-in redacted).
func (d ConnectDecision) LogTarget() string { return d.logTarget }

// Unreachable is the Custodian's 502 when nothing was sent to target:
// "jr2 custodian: <target> could not be reached: <reason>".
func (e *Engine) Unreachable(target, reason string) *Reply {
	return e.scrubReply(reply(502, ReasonUnreached, target+" could not be reached: "+reason))
}

// NoAnswer is the Custodian's 502 when the request may have reached
// target: "jr2 custodian: <target> did not answer; the request may have
// reached it: <reason>".
func (e *Engine) NoAnswer(target, reason string) *Reply {
	return e.scrubReply(reply(502, ReasonNoAnswer, target+" did not answer; the request may have reached it: "+reason))
}

// scrubReply scrubs a reply's body: a reply is built from config words and
// what the agent sent, and an agent that spells a value (it cannot know
// one, but may guess or copy one from elsewhere) gets it back replaced.
func (e *Engine) scrubReply(r *Reply) *Reply {
	if r != nil {
		r.Body = e.scrubber.String(r.Body)
	}
	return r
}
