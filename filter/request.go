package filter

import (
	"encoding/base64"
	"net"
	"strconv"
	"strings"
)

// Methods an intercepted request may use (rule 1). TRACE would echo the
// request, the value in it, back to the agent.
var allowedMethods = map[string]bool{
	"GET": true, "HEAD": true, "POST": true, "PUT": true, "PATCH": true, "DELETE": true, "OPTIONS": true,
}

// NotAPathText is rule 5's answer to a request target that is not a path
// (OPTIONS *, an absolute URI). Envoy's connection manager refuses such a
// target before any filter runs; the rendered intercept listener maps that
// refusal onto this same text (controlplane's bootstrap).
const NotAPathText = "the request target must be a path that starts with /"

// DecideRequest decides one request intercepted toward target (a bound
// host:port, as DecideConnect returned it), by the rules of the spec's "An
// intercepted request", in their order:
//
//  1. a method other than GET HEAD POST PUT PATCH DELETE OPTIONS: 405
//  2. a header name with '_': 400
//  3. a Host that does not name the target: 421
//  4. %2f, %2e or %5c in the path: 400
//  5. the normalised path outside the secret's paths: 403 (the upstream
//     gets the normalised path)
//  6. a credential header sent twice: 400
//  7. the swap, in each header the secret names: the stand-in alone, one
//     auth scheme and the stand-in, or Basic base64(user:stand-in)
//  8. every credential header that no swap made is removed
//  9. no swap: 403 "needs the stand-in of <name> in <header>"; 401 with
//     WWW-Authenticate: Basic realm="jr2 custodian" (Challenge) and the
//     same text when the request carries no credential header at all and
//     a secret bound to the target rides authorization, so a client that
//     waits for a challenge (git) asks its credential helper and sends
//     the stand-in. Either way nothing goes upstream.
//  10. a stand-in anywhere else in the path, query or headers: 403
//  11. accept-encoding: identity upstream; range and if-range removed
//
// r is not modified.
func (e *Engine) DecideRequest(target string, r *Request) Decision {
	d := e.decideRequest(target, r)
	d.Reply = e.scrubReply(d.Reply)
	return d
}

func (e *Engine) decideRequest(target string, r *Request) Decision {
	d := Decision{Target: target}
	bound := e.byTarget[target]
	if len(bound) == 0 {
		d.Reply = reply(421, ReasonTarget, target+" is not a bound target")
		return d
	}
	// 1
	if !allowedMethods[r.Method] {
		d.Reply = reply(405, ReasonMethod, "method "+safeWord(r.Method)+" is not allowed; use GET, HEAD, POST, PUT, PATCH, DELETE or OPTIONS")
		return d
	}
	d.Method = r.Method
	// 2
	if d.Reply = underscoreName(r.Headers); d.Reply != nil {
		return d
	}
	// 3
	if !e.hostNames(r, target) {
		d.Reply = reply(421, ReasonHost, "the Host header must name "+target)
		return d
	}
	// 4
	path, query, hasQuery := splitRequestTarget(r.Path)
	if encodedSeparator(path) {
		d.Reply = reply(400, ReasonEncoded, `the path holds an encoded "/", "." or "\" (%2f, %2e or %5c); send it unencoded`)
		return d
	}
	if !strings.HasPrefix(path, "/") {
		d.Reply = reply(400, ReasonPath, NotAPathText)
		return d
	}
	norm := NormalizePath(path)
	d.Path = norm
	if hasQuery {
		d.Path += "?" + query
	}

	// Which headers hold a swappable stand-in (computed now, answered in
	// the rules' order).
	swaps := e.findSwaps(bound, r)

	// 5
	considered := bound
	if len(swaps) > 0 {
		considered = nil
		for _, s := range swaps {
			considered = append(considered, s.secret)
		}
	}
	if denied := pathDenied(norm, considered, len(swaps) > 0); denied != nil {
		d.Reply = reply(403, ReasonPath, denied.name+" may not be sent to this path; its paths are "+strings.Join(denied.paths, ", "))
		return d
	}
	// 6
	count, dup := e.countCredentials(r.Headers)
	if dup != nil {
		d.Reply = dup
		return d
	}
	// 7, 8
	swapped := map[string]bool{}
	for _, s := range swaps {
		swapped[s.header] = true
		d.Set = append(d.Set, Header{Name: s.header, Value: s.value})
		if !containsStr(d.Secrets, s.secret.name) {
			d.Secrets = append(d.Secrets, s.secret.name)
		}
	}
	for _, n := range sortedKeys(count) {
		if !swapped[n] {
			d.Remove = append(d.Remove, n)
		}
	}
	// 9
	if len(swaps) == 0 {
		first := bound[0]
		d.Reply = reply(403, ReasonNoStandIn, "needs the stand-in of "+first.name+" in "+strings.Join(first.headers, " or "))
		if len(count) == 0 && ridesAuthorization(bound) {
			d.Reply.Status = 401
			d.Reply.Headers = []Header{{Name: "www-authenticate", Value: Challenge}}
		}
		d.Set, d.Remove, d.Secrets = nil, nil, nil
		return d
	}
	// 10
	if name, place := e.standInElsewhere(path, query, r.Headers, swapped, swaps); name != "" {
		d.Reply = reply(403, ReasonStandIn, "the stand-in of "+name+" is in "+place+"; a stand-in rides only a header its secret is bound to, and is never sent upstream")
		d.Set, d.Remove, d.Secrets = nil, nil, nil
		return d
	}
	// 11
	d.Set = append(d.Set, Header{Name: "accept-encoding", Value: "identity"})
	d.Remove = append(d.Remove, rangeHeaders(r.Headers)...)
	return d
}

// ridesAuthorization reports whether a secret of bound rides the
// authorization header: only then does a Basic challenge lead a client to
// a header the swap reads.
func ridesAuthorization(bound []*held) bool {
	for _, s := range bound {
		if containsStr(s.headers, "authorization") {
			return true
		}
	}
	return false
}

// rangeHeaders are the names of r's range and if-range headers, which never
// go upstream (beside rule 11): a byte range lets the agent cut an echoed
// value into pieces each shorter than any form the scrubber knows, and
// read it whole across requests. Without them the answer is whole (200),
// and scrubbed whole.
func rangeHeaders(hs []Header) []string {
	var out []string
	for _, n := range []string{"range", "if-range"} {
		for _, h := range hs {
			if strings.EqualFold(h.Name, n) {
				out = append(out, n)
				break
			}
		}
	}
	return out
}

// underscoreName is rule 2: a header name with '_' is answered 400.
func underscoreName(hs []Header) *Reply {
	for _, h := range hs {
		if strings.IndexByte(h.Name, '_') >= 0 {
			return reply(400, ReasonUnderscore, "header "+safeWord(h.Name)+` has "_" in its name; header names here use "-"`)
		}
	}
	return nil
}

// countCredentials counts each credential header of hs by lowercase name;
// one sent twice is rule 6's 400.
func (e *Engine) countCredentials(hs []Header) (map[string]int, *Reply) {
	count := map[string]int{}
	for _, h := range hs {
		n := strings.ToLower(h.Name)
		if e.cred[n] {
			count[n]++
			if count[n] == 2 {
				return nil, reply(400, ReasonDuplicate, "header "+n+" was sent more than once; send it once")
			}
		}
	}
	return count, nil
}

// hostNames reports whether the request's Host (and any host header the
// host passed on) names target: the same host, lowercased, without a
// trailing dot, with the target's port or, for 443, no port.
func (e *Engine) hostNames(r *Request, target string) bool {
	hosts := []string{r.Authority}
	for _, h := range r.Headers {
		if strings.EqualFold(h.Name, "host") {
			hosts = append(hosts, h.Value)
		}
	}
	th, tp, err := SplitTarget(target)
	if err != nil {
		return false
	}
	for _, a := range hosts {
		host, port := a, strconv.Itoa(443)
		if hh, pp, err := net.SplitHostPort(a); err == nil {
			host, port = hh, pp
		} else if strings.HasPrefix(a, "[") && strings.HasSuffix(a, "]") {
			host = a[1 : len(a)-1]
		}
		host = strings.ToLower(strings.TrimSuffix(host, "."))
		if host != th || port != strconv.Itoa(tp) {
			return false
		}
	}
	return true
}

type swap struct {
	secret *held
	header string // lowercase
	value  string // the header's new value, with the secret's value in it
	user   string // the Basic user, when the swap was a Basic pair
}

// findSwaps finds, for each secret bound to the target and each header it
// names, a header whose (first) value is the stand-in in a swappable form.
func (e *Engine) findSwaps(bound []*held, r *Request) []swap {
	var out []swap
	for _, s := range bound {
		for _, hn := range s.headers {
			for _, h := range r.Headers {
				if !strings.EqualFold(h.Name, hn) {
					continue
				}
				if v, user, ok := swapValue(h.Value, s.standIn, s.value); ok {
					out = append(out, swap{secret: s, header: hn, value: v, user: user})
				}
				break
			}
		}
	}
	return out
}

// swapValue returns v with the stand-in replaced by value when v is the
// stand-in alone, one auth scheme and the stand-in ("Bearer jr2-held-X"),
// or a Basic pair whose password is the stand-in.
func swapValue(v, standIn string, value []byte) (out, basicUser string, ok bool) {
	if v == standIn {
		return string(value), "", true
	}
	sp := strings.IndexByte(v, ' ')
	if sp <= 0 || !isToken(v[:sp]) {
		return "", "", false
	}
	scheme, rest := v[:sp], v[sp+1:]
	if rest == standIn {
		return scheme + " " + string(value), "", true
	}
	if strings.EqualFold(scheme, "basic") {
		raw, err := base64.StdEncoding.DecodeString(rest)
		if err != nil {
			raw, err = base64.RawStdEncoding.DecodeString(rest)
		}
		if err != nil {
			return "", "", false
		}
		user, pass, found := strings.Cut(string(raw), ":")
		if !found || pass != standIn {
			return "", "", false
		}
		return scheme + " " + base64.StdEncoding.EncodeToString([]byte(user+":"+string(value))), user, true
	}
	return "", "", false
}

// pathDenied returns the first considered secret whose paths do not allow
// path. With every considered (all) when none was swapped, the path is
// allowed when any of them allows it.
func pathDenied(path string, considered []*held, swapped bool) *held {
	if swapped {
		for _, s := range considered {
			if !pathAllowed(path, s.paths) {
				return s
			}
		}
		return nil
	}
	for _, s := range considered {
		if pathAllowed(path, s.paths) {
			return nil
		}
	}
	return considered[0]
}

// standInElsewhere finds a stand-in in the path, the query (each also
// percent-decoded), a header name (in any case), a header value that is
// neither swapped nor removed, or the user of a swapped Basic pair.
func (e *Engine) standInElsewhere(path, query string, hs []Header, swapped map[string]bool, swaps []swap) (name, place string) {
	if n := e.findStandIn(path); n != "" {
		return n, "the path"
	}
	if n := e.findStandIn(percentDecode(path)); n != "" {
		return n, "the path"
	}
	if n := e.findStandIn(query); n != "" {
		return n, "the query"
	}
	if n := e.findStandIn(percentDecode(strings.ReplaceAll(query, "+", " "))); n != "" {
		return n, "the query"
	}
	for _, h := range hs {
		ln := strings.ToLower(h.Name)
		// Both hosts fold a name's case (Go canonicalises it, Envoy
		// lowercases it), so a name is searched without regard to case.
		if n := e.findStandInFold(h.Name); n != "" {
			return n, "a header name"
		}
		if swapped[ln] || e.cred[ln] {
			continue // swapped, or removed by rule 8
		}
		if n := e.findStandIn(h.Value); n != "" {
			return n, "header " + ln
		}
	}
	for _, s := range swaps {
		if n := e.findStandIn(s.user); n != "" {
			return n, "the Basic user of header " + s.header
		}
	}
	return "", ""
}

// isToken reports whether s is an HTTP token (RFC 9110 tchar+).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// safeWord is s when it is a short token, else "(not a token)": request
// words echoed in a local reply stay readable and bounded.
func safeWord(s string) string {
	if len(s) <= 64 && isToken(s) {
		return s
	}
	return "(not a token)"
}

func containsStr(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

func sortedKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}
