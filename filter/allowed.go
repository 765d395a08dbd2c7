package filter

import "net/netip"

// A host that reads every connection it allows, bound or not — the
// contained run's mediator, which ends TLS toward each host its policy
// allows — decides each request with DecideAllowed. The Custodian's hosts
// read only bound targets (any other is a tunnel whose bytes they never
// read) and decide with DecideUpgrade, which DecideAllowed calls for a
// bound target: one set of rules, whichever host reads the request.

// ReasonPlaintext is the word of a request toward a bound target that came
// over plain HTTP.
const ReasonPlaintext = "plaintext"

// identitySet is rule 11's Set toward a target no secret is bound to: the
// answer in identity encoding, so that it is scrubbed as it streams.
var identitySet = []Header{identityEncoding}

// DecideAllowed decides one request a host read in the clear toward target
// (canonical host:port), a target the host's own policy allowed, whether
// or not a secret is bound to it; overTLS reports whether the request came
// inside TLS the host ended (it then goes upstream over TLS). u is the
// request's upgrade, as for DecideUpgrade.
//
// Toward a bound target: over plain HTTP, 403 (reason plaintext), since a
// value crosses the network only inside TLS; otherwise exactly
// DecideUpgrade's decision (the upgrade rule, rules 1–11).
//
// Toward a target no secret is bound to, the rules that keep a stand-in
// from going upstream and the answer scrubbable, in this order:
//
//   - an upgrade: 400 (reason upgrade): only a bound target's WebSocket is
//     carried, decided by DecideUpgrade;
//   - rule 3, where a Host without a port names the scheme's default (443
//     over TLS, 80 without): 421;
//   - rule 5's first half: a target that is not a path, or holds '#': 400;
//   - rule 10 over the whole request: the path and the query (also
//     percent-decoded), a header name (any case), and every header value —
//     nothing is swapped and no credential header removed here, so each
//     goes upstream as sent and is searched, a Basic pair decoded: 403;
//   - rule 11: accept-encoding: identity set; range and if-range removed.
//
// The path goes upstream as sent. Rules 1, 2, 4, 5's paths and 6–9 guard
// where a value goes and in which header, and toward such a target no value
// goes at all. r is not modified.
func (e *Engine) DecideAllowed(target string, overTLS bool, r *Request, u Upgrade) Decision {
	if e.bound[target] != nil {
		if overTLS {
			return e.DecideUpgrade(target, r, u)
		}
		d := Decision{Target: target}
		d.Reply = e.scrubReply(reply(403, ReasonPlaintext, "a secret is bound to "+target+" and values cross the network only inside TLS; use https"))
		return d
	}
	d := Decision{Target: target}
	e.decideUnbound(&d, overTLS, r, u)
	d.Reply = e.scrubReply(d.Reply)
	return d
}

// decideUnbound fills d (its Target set, no secret bound to it) by
// DecideAllowed's rules for such a target.
func (e *Engine) decideUnbound(d *Decision, overTLS bool, r *Request, u Upgrade) {
	target := d.Target
	if u.Asked() {
		d.Reply = reply(400, ReasonUpgrade, "no secret is bound to "+target+"; an upgrade (WebSocket) is carried only to a bound target")
		return
	}
	var infoBuf [16]hinfo
	var arena [256]byte
	info := e.scanHeaders(r.Headers, infoBuf[:0], arena[:])
	bt := &boundTarget{}
	def := 80
	if overTLS {
		def = 443
	}
	bt.hostOf(target, def)
	// 3
	if !hostNames(r, info, bt) {
		d.Reply = reply(421, ReasonHost, "the Host header must name "+target)
		return
	}
	// 5
	if d.Reply = notAPath(r.Path); d.Reply != nil {
		return
	}
	// 10
	path, query, _ := splitRequestTarget(r.Path)
	if name, place := e.standInAnywhere(path, query, r.Headers, info); name != "" {
		d.Reply = standInReply(name, place)
		return
	}
	// 11
	var flags uint8
	for _, in := range info {
		flags |= in.flags
	}
	d.Path = r.Path
	d.Set = identitySet
	d.Remove = appendRange(nil, flags)
}

// DialAllowed is the dial guard of a host that dials both kinds of target
// (DecideAllowed's): DialBound's for a bound target, AllowDial's for any
// other. The host calls it with the address it is about to dial, after
// resolution, and dials only when it returns nil.
func (e *Engine) DialAllowed(target string, addr netip.Addr) *Reply {
	if e.bound[target] != nil {
		return e.DialBound(target, addr)
	}
	return e.AllowDial(target, addr)
}
