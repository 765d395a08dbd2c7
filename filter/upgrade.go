package filter

import (
	"strings"

	"jr2.dev/boundary/filter/wsframe"
)

// Upgrade is what a host read of a request's connection upgrade before it
// removed the hop-by-hop headers: each Upgrade header value as sent, and
// whether a body comes with the request (a content-length other than 0,
// or a transfer-encoding).
type Upgrade struct {
	Tokens []string
	Body   bool
}

// Asked reports whether the request asked for an upgrade at all.
func (u Upgrade) Asked() bool { return len(u.Tokens) > 0 }

// UpgradeText is the answer to an upgrade an intercept listener does not
// carry: another protocol than websocket (h2c, TLS/1.0, several), a
// method other than GET, or a body.
const UpgradeText = `an upgrade here is a GET with "Upgrade: websocket" and no body; send any other request without Upgrade`

// ControlUpgradeText is the control listener's answer to any upgrade.
const ControlUpgradeText = "the control listener does not upgrade a connection; send the request without Upgrade"

// ReasonUpgrade is the word of every upgrade refusal (the request's and
// the 101's).
const ReasonUpgrade = "upgrade"

// ExtensionsHeader is the request header the host removes from a
// WebSocket upgrade (Decision.Remove names it): the Custodian reads only
// frames no extension (permessage-deflate) transformed.
const ExtensionsHeader = "sec-websocket-extensions"

// DecideUpgrade decides a request that asked for an upgrade (u.Asked())
// toward target. The upgrade rule comes first: only a GET asking for
// websocket alone and carrying no body goes on, else 400 UpgradeText.
// Then the request is judged by rules 1–11 as DecideRequest judges any
// (an unbound target is its 421); a forward has WebSocket set, and
// Sec-WebSocket-Extensions removed. The host sends the request with
// "Connection: Upgrade" and "Upgrade: websocket".
func (e *Engine) DecideUpgrade(target string, r *Request, u Upgrade) Decision {
	if !u.Asked() {
		return e.DecideRequest(target, r)
	}
	d := Decision{Target: target}
	if e.bound[target] == nil {
		d.Reply = reply(421, ReasonTarget, target+" is not a bound target")
	} else if r.Method != "GET" || u.Body || len(u.Tokens) != 1 || !strings.EqualFold(strings.TrimSpace(u.Tokens[0]), "websocket") {
		d.Reply = reply(400, ReasonUpgrade, UpgradeText)
	} else {
		e.decideRequest(&d, r)
		if d.Reply == nil {
			d.WebSocket = true
			d.Remove = append(d.Remove, ExtensionsHeader)
		}
	}
	d.Reply = e.scrubReply(d.Reply)
	return d
}

// DecideControlUpgrade is the control listener's answer to a request that
// asked for an upgrade: always 400 ControlUpgradeText.
func (e *Engine) DecideControlUpgrade() Decision {
	d := Decision{Target: "-"}
	if e.cfg.Orchestrator != "" {
		d.Target = e.cfg.Orchestrator
	}
	d.Reply = reply(400, ReasonUpgrade, ControlUpgradeText)
	return d
}

// DecideSwitch decides the 101 an upstream answered a forwarded WebSocket
// upgrade with, on its headers exactly as sent. Its header values are
// scrubbed as any answer's (Set, Remove); a 101 that switches to anything
// but websocket alone, or selects an extension (Sec-WebSocket-Extensions,
// which the request did not offer), is answered 502 and the upstream's
// connection closed: nothing of its frames is passed on. Otherwise
// WebSocket is set, and the host passes every byte the upstream sends
// from then on through NewFrames.
func (e *Engine) DecideSwitch(target string, headers []Header) ResponseDecision {
	var d ResponseDecision
	f := e.scrubFields(headers)
	ups := f.values("upgrade")
	switch {
	case f.has(ExtensionsHeader):
		d.Reply = e.scrubReply(reply(502, ReasonUpgrade, target+" answered the upgrade with a WebSocket extension, which the Custodian cannot read to scrub; the connection was closed"))
		return d
	case len(ups) != 1 || !strings.EqualFold(strings.TrimSpace(ups[0]), "websocket"):
		d.Reply = e.scrubReply(reply(502, ReasonUpgrade, target+" switched to a protocol other than websocket; the connection was closed"))
		return d
	}
	d.Set = f.set
	d.Remove = append(d.Remove, f.renamed...)
	d.WebSocket = true
	return d
}

// NewFrames starts the scrubber of one upgraded connection's bytes from
// the upstream (package wsframe), over every value the engine holds, with
// the config's webSocketMaxMessageBytes as its hold.
func (e *Engine) NewFrames() *wsframe.Scrubber {
	return wsframe.New(e.scrubber, e.cfg.WebSocketMaxMessageBytes)
}

// ClosedText is the reason of the close frame the Custodian sends the
// agent when it ends an upgraded connection for malformed upstream
// framing (code 1002).
const ClosedText = wsframe.CloseReason
