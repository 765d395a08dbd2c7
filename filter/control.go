package filter

import (
	"strings"

	"jr2.dev/boundary/internal/contract"
)

// DecideControl decides a request on the control listener. Four routes go
// to the Orchestrator, and no other:
//
//	GET  /agents/{id}/surface         → the same path (a read)
//	POST /agents/{id}/events          → the same path (a pick)
//	GET  /agents/{id}/deliveries/{d}  → the same path (a read)
//	POST /fetch                       → /sandboxes/{sandbox}/fetch (the ask)
//
// Anything else is 404 (a target holding '#' too), and POST /fetch is 404 where the pod has no
// Sandbox. The bearer must be the token's stand-in (else 403) and becomes
// the token; every other credential header is removed, and range and
// if-range too (see rangeHeaders); a stand-in anywhere else is 403. r is
// not modified.
func (e *Engine) DecideControl(r *Request) Decision {
	d := e.decideControl(r)
	d.Reply = e.scrubReply(d.Reply)
	return d
}

func (e *Engine) decideControl(r *Request) Decision {
	d := Decision{Target: e.cfg.Orchestrator}
	path, query, hasQuery := splitRequestTarget(r.Path)
	upstream, read, ok := e.route(r.Method, path)
	if e.cfg.Orchestrator == "" {
		d.Target, ok = "-", false
	}
	if strings.IndexByte(r.Path, '#') >= 0 {
		// A fragment is never part of a request target; Envoy refuses it
		// before any filter runs, and the rendered control listener maps
		// that refusal onto this 404.
		ok = false
	}
	if !ok {
		if r.Method == "POST" && path == "/fetch" {
			d.Reply = reply(404, ReasonRoute, "POST /fetch is not served here: this pod has no Sandbox")
			return d
		}
		d.Reply = reply(404, ReasonRoute, "not a route of the control listener; it serves GET /agents/{id}/surface, POST /agents/{id}/events, GET /agents/{id}/deliveries/{d} and POST /fetch")
		return d
	}
	d.Method, d.Read = r.Method, read
	d.Path = r.Path // the route keeps the path
	if upstream != path {
		d.Path = upstream
		if hasQuery {
			d.Path += "?" + query
		}
	}
	var infoBuf [16]hinfo
	var arena [256]byte
	info := e.scanHeaders(r.Headers, infoBuf[:0], arena[:])
	if d.Reply = underscoreName(r.Headers, info); d.Reply != nil {
		return d
	}
	if e.token == nil {
		d.Reply = reply(403, ReasonNoStandIn, "this Custodian holds no "+contract.TokenName+"; render the pod's config with controlplane render")
		return d
	}
	if d.Reply = e.duplicate(r.Headers, info); d.Reply != nil {
		return d
	}
	var bearer string
	for _, h := range r.Headers {
		if strings.EqualFold(h.Name, "authorization") {
			bearer = h.Value
		}
	}
	scheme, rest, _ := strings.Cut(bearer, " ")
	if !strings.EqualFold(scheme, "bearer") || rest != e.token.standIn {
		d.Reply = reply(403, ReasonNoStandIn, "needs the stand-in of "+contract.TokenName+" in authorization")
		return d
	}
	if name, place := e.standInElsewhere(path, query, r.Headers, info, nil); name != "" {
		d.Reply = standInReply(name, place)
		return d
	}
	d.Secrets = e.tokenNames
	d.Set = e.tokenSet
	if scheme != "Bearer" {
		d.Set = []Header{{Name: "authorization", Value: scheme + " " + e.token.valueStr}, identityEncoding}
	}
	var authz [1]swap
	authz[0].header = "authorization" // swapped: never removed
	d.Remove = e.removeList(info, authz[:])
	return d
}

// route maps a control request to its upstream path.
func (e *Engine) route(method, path string) (upstream string, read, ok bool) {
	if method == "POST" && path == "/fetch" {
		if e.cfg.Sandbox == "" || e.cfg.Orchestrator == "" {
			return "", false, false
		}
		return e.fetchPath, false, true
	}
	// /agents/{id}/{what}[/{d}], cut without splitting into a new slice
	rest, ok := strings.CutPrefix(path, "/agents/")
	if !ok {
		return "", false, false
	}
	id, rest, ok := strings.Cut(rest, "/")
	if !ok || !validID(id) {
		return "", false, false
	}
	what, last, five := strings.Cut(rest, "/")
	if five && strings.IndexByte(last, '/') >= 0 {
		return "", false, false // more than five segments
	}
	switch {
	case method == "GET" && !five && what == "surface":
		return path, true, true
	case method == "POST" && !five && what == "events":
		return path, false, true
	case method == "GET" && five && what == "deliveries" && validID(last):
		return path, true, true
	}
	return "", false, false
}

// validID accepts 1–256 characters of [A-Za-z0-9._~-], not "." or "..".
func validID(s string) bool {
	if s == "" || len(s) > 256 || s == "." || s == ".." {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '~' || c == '-') {
			return false
		}
	}
	return true
}
