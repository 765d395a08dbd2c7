package filter

import (
	"bytes"
	"encoding/base64"
	"slices"
	"strings"

	"jr2.dev/boundary/internal/tchar"
)

// NotAPathText is rule 5's answer to a request target that is not a path
// (OPTIONS *, an absolute URI). Envoy's connection manager refuses such a
// target before any filter runs; the rendered intercept listener maps that
// refusal onto this same text (controlplane's bootstrap).
const NotAPathText = "the request target must be a path that starts with /"

// FragmentText is rule 5's answer to a request target that holds '#': a
// fragment is never part of a request target (RFC 9112 section 3.2), and
// a server could cut the path there where the path check did not. Envoy's
// connection manager refuses it before any filter runs
// (path_normalization_failed); the rendered intercept listener maps that
// refusal onto this same text.
const FragmentText = `the request target holds "#"; a fragment is never sent, send the path and query only`

// EncodedText and BadEscapeText are rule 4's answers.
const (
	EncodedText   = `the path holds an encoded "/", "." or "\" (%2f, %2e or %5c); send it unencoded`
	BadEscapeText = `the path holds a "%" that does not begin a %XX escape (such as IIS's %u002e); send "%" as %25`
)

// pathEscapes is rule 4: an encoded separator (%2f, %2e, %5c in any case)
// a server behind might read as the separator the path check did not see,
// or a '%' that does not begin two hex digits — IIS reads %u002e as '.',
// and net/http refuses the request line.
func pathEscapes(path string) *Reply {
	if encodedSeparator(path) {
		return reply(400, ReasonEncoded, EncodedText)
	}
	if badEscape(path) {
		return reply(400, ReasonEncoded, BadEscapeText)
	}
	return nil
}

// notAPath is rule 5's first half: a request target that does not start
// with '/' (OPTIONS *, an absolute URI), or one that holds a fragment.
func notAPath(target string) *Reply {
	if !strings.HasPrefix(target, "/") {
		return reply(400, ReasonPath, NotAPathText)
	}
	if strings.IndexByte(target, '#') >= 0 {
		return reply(400, ReasonPath, FragmentText)
	}
	return nil
}

// DecideRequest decides one request intercepted toward target (a bound
// host:port, as DecideConnect returned it), by the rules of the spec's "An
// intercepted request", in their order:
//
//  1. a method other than GET HEAD POST PUT PATCH DELETE OPTIONS: 405
//  2. a header name with '_': 400
//  3. a Host that does not name the target: 421
//  4. %2f, %2e or %5c in the path, or a '%' that begins no %XX escape: 400
//  5. a target that is not a path, or holds '#': 400; the normalised path
//     outside the secret's paths: 403 (the upstream gets the normalised
//     path)
//  6. a credential header sent twice, or holding ',': 400
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
	d := Decision{Target: target}
	e.decideRequest(&d, r)
	d.Reply = e.scrubReply(d.Reply)
	return d
}

// decideRequest fills d (its Target set) in place: the Decision is large,
// and is copied once, by DecideRequest.
func (e *Engine) decideRequest(d *Decision, r *Request) { e.decideRequestPayload(d, r, "") }

// decideRequestPayload is decideRequest with the hash of the request's
// body, when a host read it for a SigV4 signature (DecideRequestBody).
func (e *Engine) decideRequestPayload(d *Decision, r *Request, payload string) {
	target := d.Target
	bt := e.bound[target]
	if bt == nil {
		d.Reply = reply(421, ReasonTarget, target+" is not a bound target")
		return
	}
	bound := bt.secrets
	// 1
	if !allowedMethod(r.Method) {
		d.Reply = reply(405, ReasonMethod, "method "+safeWord(r.Method)+" is not allowed; use GET, HEAD, POST, PUT, PATCH, DELETE or OPTIONS")
		return
	}
	d.Method = r.Method
	// Each header name, read once (on the stack), for the rules below.
	var infoBuf [16]hinfo
	var arena [256]byte
	info := e.scanHeaders(r.Headers, infoBuf[:0], arena[:])
	// 2
	if d.Reply = underscoreName(r.Headers, info); d.Reply != nil {
		return
	}
	// 3
	if !hostNames(r, info, bt) {
		d.Reply = reply(421, ReasonHost, "the Host header must name "+target)
		return
	}
	// 4
	path, query, hasQuery := splitRequestTarget(r.Path)
	if d.Reply = pathEscapes(path); d.Reply != nil {
		return
	}
	// 5
	if d.Reply = notAPath(r.Path); d.Reply != nil {
		return
	}
	var norm string
	// The normalised path, and "?query" if any: the request's own target
	// when normalising changes nothing, else one string built once.
	norm, d.Path = path, r.Path
	if !isNormal(path) {
		var buf [256]byte
		b := appendNormal(buf[:0], path)
		n := len(b)
		if hasQuery {
			b = append(append(b, '?'), query...)
		}
		d.Path = string(b)
		norm = d.Path[:n]
	}

	// An AWS key bound to the target: a request signed with its stand-in
	// key id is checked and signed again (sigv4.go).
	if bt.aws != nil && e.decideSigV4(d, r, bt, info, path, query, norm, payload) {
		return
	}
	// Which headers hold a swappable stand-in (computed now, answered in
	// the rules' order).
	var swapBuf [4]swap
	swaps := findSwaps(bt, r.Headers, info, swapBuf[:0])

	// 5
	if denied := pathDenied(norm, bound, swaps); denied != nil {
		d.Reply = reply(403, ReasonPath, denied.name+" may not be sent to this path; its paths are "+strings.Join(denied.paths, ", "))
		return
	}
	// 6
	if d.Reply = e.duplicate(r.Headers, info); d.Reply != nil {
		return
	}
	// 9
	if len(swaps) == 0 {
		first := bound[0]
		d.Reply = reply(403, ReasonNoStandIn, "needs the stand-in of "+first.name+" in "+strings.Join(first.headers, " or "))
		if noCredential(info) && bt.ridesAuth {
			d.Reply.Status = 401
			d.Reply.Headers = []Header{{Name: "www-authenticate", Value: Challenge}}
		}
		return
	}
	// 10
	if name, place := e.standInElsewhere(path, query, r.Headers, info, swaps); name != "" {
		d.Reply = standInReply(name, place)
		return
	}
	// 7: a secret whose value is an access token the engine holds none of
	for _, sw := range swaps {
		if sw.secret.noToken {
			d.Reply = tokenReply(sw.secret)
			return
		}
	}
	// 7, 8, 11
	d.Set = setHeaders(swaps)
	d.Secrets = swappedSecrets(swaps)
	d.Remove = e.removeList(info, swaps)
	return
}

// allowedMethod is rule 1: the methods an intercepted request may use.
// TRACE would echo the request, the value in it, back to the agent.
func allowedMethod(m string) bool {
	switch m {
	case "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS":
		return true
	}
	return false
}

// setHeaders is rules 7 and 11's Set: each swap's header with its new
// value, in the swaps' order, then accept-encoding: identity. One swap of
// a precomputed form shares its secret's Set.
func setHeaders(swaps []swap) []Header {
	if len(swaps) == 1 && swaps[0].pre != nil {
		return swaps[0].pre
	}
	set := make([]Header, 0, len(swaps)+1)
	for _, s := range swaps {
		set = append(set, Header{Name: s.header, Value: s.value})
	}
	return append(set, identityEncoding)
}

// swappedSecrets names the swaps' secrets once each, in the swaps' order
// (table order). One secret shares its precomputed list.
func swappedSecrets(swaps []swap) []string {
	one := true
	for _, s := range swaps[1:] {
		one = one && s.secret == swaps[0].secret
	}
	if one {
		return swaps[0].secret.names1
	}
	var out []string
	for _, s := range swaps {
		if !containsStr(out, s.secret.name) {
			out = append(out, s.secret.name)
		}
	}
	return out
}

// removeList is rule 8 and rangeHeaders: every credential header of hs
// that no swap made (sorted, once each), then range and if-range. nil when
// none.
func (e *Engine) removeList(info []hinfo, swaps []swap) []string {
	var idxBuf [8]int32
	idx := idxBuf[:0]
	var rangeFlags uint8
	for _, in := range info {
		rangeFlags |= in.flags & (fRange | fIfRange)
		c := in.cred
		if c < 0 || swapsHeader(swaps, e.credList[c]) || slices.Contains(idx, c) {
			continue
		}
		// insert c in order: credList is sorted, so by index is by name
		idx = append(idx, c)
		for k := len(idx) - 1; k > 0 && idx[k] < idx[k-1]; k-- {
			idx[k], idx[k-1] = idx[k-1], idx[k]
		}
	}
	if len(idx) == 0 && rangeFlags == 0 {
		return nil
	}
	out := make([]string, 0, len(idx)+2)
	for _, c := range idx {
		out = append(out, e.credList[c])
	}
	return appendRange(out, rangeFlags)
}

// appendRange appends range and if-range to out when flags say the request
// holds them. They never go upstream (beside rule 11): a byte range lets
// the agent cut an echoed value into pieces each shorter than any form the
// scrubber knows, and read it whole across requests. Without them the
// answer is whole (200), and scrubbed whole.
func appendRange(out []string, flags uint8) []string {
	if flags&fRange != 0 {
		out = append(out, "range")
	}
	if flags&fIfRange != 0 {
		out = append(out, "if-range")
	}
	return out
}

func swapsHeader(swaps []swap, name string) bool {
	for _, s := range swaps {
		if s.header == name {
			return true
		}
	}
	return false
}

// ridesAuthorization reports whether a secret of bound rides the
// authorization header: only then does a Basic challenge lead a client to
// a header the swap reads.
func ridesAuthorization(bound []*held) bool {
	for _, s := range bound {
		if s.aws == nil && containsStr(s.headers, "authorization") {
			return true
		}
	}
	return false
}

// underscoreName is rule 2: a header name with '_' is answered 400.
func underscoreName(hs []Header, info []hinfo) *Reply {
	for i, h := range hs {
		if info[i].flags&fUnderscore != 0 {
			return reply(400, ReasonUnderscore, "header "+safeWord(h.Name)+` has "_" in its name; header names here use "-"`)
		}
	}
	return nil
}

// duplicate is rule 6: the first credential header sent a second time
// (by lowercase name), or whose value holds ',', is answered 400. A value
// with ',' is a list of two (RFC 9110 section 5.3): Envoy's codec joins a
// repeated authorization (one of its inline headers) into one value with
// ',' before any filter sees it, so a host could not tell the two apart.
func (e *Engine) duplicate(hs []Header, info []hinfo) *Reply {
	for i, in := range info {
		if in.cred >= 0 && (credAmong(info[:i], in.cred) || strings.IndexByte(hs[i].Value, ',') >= 0) {
			return reply(400, ReasonDuplicate, "header "+e.credList[in.cred]+" was sent more than once; send it once")
		}
	}
	return nil
}

// noCredential reports whether no header was a credential header.
func noCredential(info []hinfo) bool {
	for _, in := range info {
		if in.cred >= 0 {
			return false
		}
	}
	return true
}

// credAmong reports whether a header of info is credential header c.
func credAmong(info []hinfo, c int32) bool {
	for _, in := range info {
		if in.cred == c {
			return true
		}
	}
	return false
}

// hostNames reports whether the request's Host (and any host header the
// host passed on) names the target: the same host, lowercased, without a
// trailing dot, with the target's port or, for the scheme's default (443;
// 80 for a request DecideAllowed judged over plain HTTP), no port.
func hostNames(r *Request, info []hinfo, bt *boundTarget) bool {
	if !bt.ok || !hostIs(r.Authority, bt) {
		return false
	}
	for i, h := range r.Headers {
		if info[i].flags&fHost != 0 && !hostIs(h.Value, bt) {
			return false
		}
	}
	return true
}

// hostIs is hostNames for one Host value a.
func hostIs(a string, bt *boundTarget) bool {
	if a == bt.plain || a == bt.withPort {
		return true
	}
	host, port := a, bt.defPort
	if hh, pp, ok := splitHostPort(a); ok {
		host, port = hh, pp
	} else if strings.HasPrefix(a, "[") && strings.HasSuffix(a, "]") {
		host = a[1 : len(a)-1]
	}
	if port != bt.port {
		return false
	}
	host = strings.TrimSuffix(host, ".")
	if !isASCII(host) {
		return strings.ToLower(host) == bt.host
	}
	if len(host) != len(bt.host) {
		return false
	}
	for i := 0; i < len(host); i++ {
		if lowerByte(host[i]) != bt.host[i] {
			return false
		}
	}
	return true
}

// splitHostPort is net.SplitHostPort without building an error: ok is
// false exactly where net.SplitHostPort fails (a Host without a port is
// the common case, and its error allocated on every request).
func splitHostPort(hostport string) (host, port string, ok bool) {
	j, k := 0, 0
	i := strings.LastIndexByte(hostport, ':')
	if i < 0 {
		return "", "", false
	}
	if hostport[0] == '[' {
		end := strings.IndexByte(hostport, ']')
		if end < 0 || end+1 != i {
			return "", "", false
		}
		host = hostport[1:end]
		j, k = 1, end+1
	} else {
		host = hostport[:i]
		if strings.IndexByte(host, ':') >= 0 {
			return "", "", false
		}
	}
	if strings.IndexByte(hostport[j:], '[') >= 0 || strings.IndexByte(hostport[k:], ']') >= 0 {
		return "", "", false
	}
	return host, hostport[i+1:], true
}

type swap struct {
	secret *held
	header string // lowercase
	value  string // the header's new value, with the secret's value in it
	user   string // the Basic user, when the swap was a Basic pair
	pre    []Header
	order  int // index of the (secret, header) slot: table order
}

// findSwaps appends to out, for each secret bound to the target and each
// header it names, in table order, the swap of the first request header of
// that name whose value is the stand-in in a swappable form. Every such
// header is a credential header, so a lowered name that is none is passed
// over at once, and one that is finds its slots by credential index.
func findSwaps(bt *boundTarget, hs []Header, info []hinfo, out []swap) []swap {
	for i, h := range hs {
		in := info[i]
		switch {
		case in.lo >= 0 && in.cred < 0:
		case in.lo >= 0 && bt.byCred != nil:
			for _, k := range bt.byCred[in.cred] {
				out = trySlot(bt, hs, info, i, int(k), out)
			}
		case in.lo >= 0:
			for k := range bt.slots {
				if bt.slots[k].cred == in.cred {
					out = trySlot(bt, hs, info, i, k, out)
				}
			}
		default: // a name strings.EqualFold may fold onto ASCII
			for k, sl := range bt.slots {
				if strings.EqualFold(h.Name, sl.header()) {
					out = trySlot(bt, hs, info, i, k, out)
				}
			}
		}
	}
	for a := 1; a < len(out); a++ { // back into table order
		for b := a; b > 0 && out[b].order < out[b-1].order; b-- {
			out[b], out[b-1] = out[b-1], out[b]
		}
	}
	return out
}

// trySlot appends slot k's swap of hs[i] when hs[i] is the first header of
// the slot's name.
func trySlot(bt *boundTarget, hs []Header, info []hinfo, i, k int, out []swap) []swap {
	sl := &bt.slots[k]
	for j, h := range hs[:i] {
		if info[j].lo >= 0 && info[j].cred == sl.cred || info[j].lo < 0 && strings.EqualFold(h.Name, sl.header()) {
			return out
		}
	}
	out = append(out, swap{})
	if !sl.swap(&out[len(out)-1], hs[i].Value, k) {
		out = out[:len(out)-1]
	}
	return out
}

// swap returns the header value v with the stand-in replaced by the value
// when v is the stand-in alone, one auth scheme and the stand-in ("Bearer
// jr2-held-X"), or a Basic pair whose password is the stand-in.
// It fills sw, in place (a swap is large), and reports whether v was one.
func (sl *slot) swap(sw *swap, v string, order int) bool {
	s := sl.secret
	sw.secret, sw.header, sw.order = s, sl.header(), order
	if v == s.standIn {
		sw.value, sw.pre = s.valueStr, s.bare[sl.j]
		return true
	}
	sp := strings.IndexByte(v, ' ')
	if sp <= 0 || !tchar.Token(v[:sp]) {
		return false
	}
	scheme, rest := v[:sp], v[sp+1:]
	if rest == s.standIn {
		if scheme == "Bearer" {
			sw.pre = s.bearer[sl.j]
			sw.value = sw.pre[0].Value
		} else {
			sw.value = scheme + " " + s.valueStr
		}
		return true
	}
	if strings.EqualFold(scheme, "basic") {
		var ok bool
		sw.value, sw.user, ok = basicSwap(scheme, rest, s.standIn, s.valueStr)
		return ok
	}
	return false
}

// basicSwap is the Basic form of the swap: rest is base64 (padded or not)
// of "user:<stand-in>"; out is "<scheme> base64(user:<value>)". A pair of
// ordinary size is decoded and re-encoded on the stack, so out is the one
// allocation; user is returned only when it may hold a stand-in (rule 10
// searches it, and finds nothing in any other).
func basicSwap(scheme, rest, standIn, value string) (out, user string, ok bool) {
	var src [256]byte
	var raw [256]byte
	var plain [384]byte
	var enc [512]byte
	if len(rest) > len(src) || len(rest) > len(raw) {
		return basicSwapLarge(scheme, rest, standIn, value)
	}
	in := append(src[:0], rest...)
	n, err := base64.StdEncoding.Decode(raw[:], in)
	if err != nil {
		n, err = base64.RawStdEncoding.Decode(raw[:], in)
	}
	if err != nil {
		return "", "", false
	}
	colon := bytes.IndexByte(raw[:n], ':')
	if colon < 0 || string(raw[colon+1:n]) != standIn {
		return "", "", false
	}
	if colon+1+len(value) > len(plain) || base64.StdEncoding.EncodedLen(colon+1+len(value)) > len(enc) {
		return basicSwapLarge(scheme, rest, standIn, value)
	}
	if bytes.Contains(raw[:colon], standInPrefixBytes) || bytes.Contains(raw[:colon], shapedMarkBytes) {
		user = string(raw[:colon])
	}
	p := append(append(plain[:0], raw[:colon+1]...), value...)
	m := base64.StdEncoding.EncodedLen(len(p))
	base64.StdEncoding.Encode(enc[:m], p)
	var b strings.Builder
	b.Grow(len(scheme) + 1 + m)
	b.WriteString(scheme)
	b.WriteByte(' ')
	b.Write(enc[:m])
	clear(plain[:])
	return b.String(), user, true
}

// basicSwapLarge is basicSwap for a pair too long for its stack buffers.
func basicSwapLarge(scheme, rest, standIn, value string) (out, user string, ok bool) {
	raw, err := base64.StdEncoding.DecodeString(rest)
	if err != nil {
		raw, err = base64.RawStdEncoding.DecodeString(rest)
	}
	if err != nil {
		return "", "", false
	}
	colon := bytes.IndexByte(raw, ':')
	if colon < 0 || string(raw[colon+1:]) != standIn {
		return "", "", false
	}
	plain := append(raw[:colon+1], value...)
	user = string(plain[:colon])
	out = scheme + " " + base64.StdEncoding.EncodeToString(plain)
	clear(plain)
	return out, user, true
}

// pathDenied is rule 5: the first swapped secret whose paths do not allow
// path; with no swap, bound[0] unless one of bound allows path.
func pathDenied(path string, bound []*held, swaps []swap) *held {
	if len(swaps) > 0 {
		for _, s := range swaps {
			if !pathAllowed(path, s.secret.paths) {
				return s.secret
			}
		}
		return nil
	}
	for _, s := range bound {
		if pathAllowed(path, s.paths) {
			return nil
		}
	}
	return bound[0]
}

// standInElsewhere finds a stand-in in the path, the query (each also
// percent-decoded), a header name (in any case), a header value that is
// not a credential header's (rule 8 swaps or removes each), or the user of
// a swapped Basic pair. info is scanHeaders(hs).
func (e *Engine) standInElsewhere(path, query string, hs []Header, info []hinfo, swaps []swap) (name, place string) {
	if name, place = e.standInTarget(path, query); name != "" {
		return name, place
	}
	for i, h := range hs {
		if n := e.standInName(h, info[i]); n != "" {
			return n, "a header name"
		}
		if info[i].cred >= 0 {
			continue // swapped, or removed by rule 8
		}
		if n := e.findStandIn(h.Value); n != "" {
			return n, "header " + strings.ToLower(h.Name)
		}
	}
	for _, s := range swaps {
		if n := e.findStandIn(s.user); n != "" {
			return n, "the Basic user of header " + s.header
		}
	}
	return "", ""
}

// standInReply is rule 10's answer: the stand-in of name is in place.
func standInReply(name, place string) *Reply {
	return reply(403, ReasonStandIn, "the stand-in of "+name+" is in "+place+"; a stand-in rides only a header its secret is bound to, and is never sent upstream")
}

// standInAnywhere is rule 10 toward a target no secret is bound to
// (DecideAllowed), where nothing is swapped and every header goes upstream
// as sent: the path, the query and each header name as standInElsewhere
// searches them, and every header value, a credential header's too, as
// sent and, when it is a Basic pair, decoded. info is scanHeaders(hs).
func (e *Engine) standInAnywhere(path, query string, hs []Header, info []hinfo) (name, place string) {
	if name, place = e.standInTarget(path, query); name != "" {
		return name, place
	}
	for i, h := range hs {
		if n := e.standInName(h, info[i]); n != "" {
			return n, "a header name"
		}
		n := e.findStandIn(h.Value)
		if n == "" {
			n = e.findStandIn(basicPair(h.Value))
		}
		if n != "" {
			return n, "header " + strings.ToLower(h.Name)
		}
	}
	return "", ""
}

// standInTarget is rule 10 on the request target: the path, then the
// query, each searched as sent and percent-decoded ('+' read as a space in
// the query); without a '%' (or, in the query, a '+') decoding changes
// nothing and is not done.
func (e *Engine) standInTarget(path, query string) (name, place string) {
	if n := e.findStandIn(path); n != "" {
		return n, "the path"
	}
	if strings.IndexByte(path, '%') >= 0 {
		if n := e.findStandIn(percentDecode(path)); n != "" {
			return n, "the path"
		}
	}
	if n := e.findStandIn(query); n != "" {
		return n, "the query"
	}
	if strings.IndexAny(query, "%+") >= 0 {
		if n := e.findStandIn(percentDecode(strings.ReplaceAll(query, "+", " "))); n != "" {
			return n, "the query"
		}
	}
	return "", ""
}

// standInName is rule 10 on a header name, of hinfo in: every host folds a
// name's case before the engine sees it (Go's server canonicalises it,
// x-jr2-held-NAME arriving as X-Jr2-Held-Name; Envoy lowercases it), so a
// name is searched without regard to case.
func (e *Engine) standInName(h Header, in hinfo) string {
	if in.flags&fFold == 0 {
		return ""
	}
	return e.findStandInFold(h.Name)
}

// basicPair is the decoded "user:password" of a header value that is a
// Basic pair (the scheme in any case, base64 padded or not), else "".
func basicPair(v string) string {
	scheme, rest, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, "basic") {
		return ""
	}
	rest = strings.TrimSpace(rest)
	raw, err := base64.StdEncoding.DecodeString(rest)
	if err != nil {
		raw, err = base64.RawStdEncoding.DecodeString(rest)
	}
	if err != nil {
		return ""
	}
	return string(raw)
}

// safeWord is s when it is a short token, else "(not a token)": request
// words echoed in a local reply stay readable and bounded.
func safeWord(s string) string {
	if len(s) <= 64 && tchar.Token(s) {
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
