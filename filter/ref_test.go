package filter

// The engine's request decision as it was before it was made
// allocation-free: the reference FuzzDecideRequestSame and
// TestDecideRequestSame hold the fast engine to. Test code only.

import (
	"encoding/base64"
	"net"
	"strconv"
	"strings"

	"jr2.dev/boundary/internal/contract"
	"jr2.dev/boundary/internal/tchar"
)

var allowedMethods = map[string]bool{
	"GET": true, "HEAD": true, "POST": true, "PUT": true, "PATCH": true, "DELETE": true, "OPTIONS": true,
}

type refSwap struct {
	secret *held
	header string
	value  string
	user   string
}

func (e *Engine) refDecideRequest(target string, r *Request) Decision {
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
	if d.Reply = refUnderscoreName(r.Headers); d.Reply != nil {
		return d
	}
	// 3
	if !e.refHostNames(r, target) {
		d.Reply = reply(421, ReasonHost, "the Host header must name "+target)
		return d
	}
	// 4
	path, query, hasQuery := splitRequestTarget(r.Path)
	if encodedSeparator(path) {
		d.Reply = reply(400, ReasonEncoded, EncodedText)
		return d
	}
	if refBadEscape(path) {
		d.Reply = reply(400, ReasonEncoded, BadEscapeText)
		return d
	}
	if !strings.HasPrefix(path, "/") {
		d.Reply = reply(400, ReasonPath, NotAPathText)
		return d
	}
	if strings.Contains(r.Path, "#") {
		d.Reply = reply(400, ReasonPath, FragmentText)
		return d
	}
	norm := refNormalizePath(path)
	d.Path = norm
	if hasQuery {
		d.Path += "?" + query
	}

	// Which headers hold a swappable stand-in (computed now, answered in
	// the rules' order).
	swaps := e.refFindSwaps(bound, r)

	// 5
	considered := bound
	if len(swaps) > 0 {
		considered = nil
		for _, s := range swaps {
			considered = append(considered, s.secret)
		}
	}
	if denied := refPathDenied(norm, considered, len(swaps) > 0); denied != nil {
		d.Reply = reply(403, ReasonPath, denied.name+" may not be sent to this path; its paths are "+strings.Join(denied.paths, ", "))
		return d
	}
	// 6
	count, dup := e.refCountCredentials(r.Headers)
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
	for _, n := range refSortedKeys(count) {
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
	if name, place := e.refStandInElsewhere(path, query, r.Headers, swapped, swaps); name != "" {
		d.Reply = reply(403, ReasonStandIn, "the stand-in of "+name+" is in "+place+"; a stand-in rides only a header its secret is bound to, and is never sent upstream")
		d.Set, d.Remove, d.Secrets = nil, nil, nil
		return d
	}
	// 11
	d.Set = append(d.Set, Header{Name: "accept-encoding", Value: "identity"})
	d.Remove = append(d.Remove, refRangeHeaders(r.Headers)...)
	return d
}

func (e *Engine) refCountCredentials(hs []Header) (map[string]int, *Reply) {
	count := map[string]int{}
	for _, h := range hs {
		n := strings.ToLower(h.Name)
		if e.cred[n] {
			count[n]++
			if count[n] == 2 || strings.Contains(h.Value, ",") {
				return nil, reply(400, ReasonDuplicate, "header "+n+" was sent more than once; send it once")
			}
		}
	}
	return count, nil
}

func (e *Engine) refHostNames(r *Request, target string) bool {
	hosts := []string{r.Authority}
	for _, h := range r.Headers {
		if strings.EqualFold(h.Name, "host") {
			hosts = append(hosts, h.Value)
		}
	}
	th, tp, err := contract.SplitTarget(target)
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

func (e *Engine) refFindSwaps(bound []*held, r *Request) []refSwap {
	var out []refSwap
	for _, s := range bound {
		for _, hn := range s.headers {
			for _, h := range r.Headers {
				if !strings.EqualFold(h.Name, hn) {
					continue
				}
				if v, user, ok := refSwapValue(h.Value, s.standIn, s.value); ok {
					out = append(out, refSwap{secret: s, header: hn, value: v, user: user})
				}
				break
			}
		}
	}
	return out
}

func (e *Engine) refStandInElsewhere(path, query string, hs []Header, swapped map[string]bool, swaps []refSwap) (name, place string) {
	if n := e.refFindStandInCase(path, false); n != "" {
		return n, "the path"
	}
	if n := e.refFindStandInCase(percentDecode(path), false); n != "" {
		return n, "the path"
	}
	if n := e.refFindStandInCase(query, false); n != "" {
		return n, "the query"
	}
	if n := e.refFindStandInCase(percentDecode(strings.ReplaceAll(query, "+", " ")), false); n != "" {
		return n, "the query"
	}
	for _, h := range hs {
		ln := strings.ToLower(h.Name)
		// Every host folds a name's case (Go canonicalises it, Envoy
		// lowercases it), so a name is searched without regard to case.
		if n := e.refFindStandInCase(h.Name, true); n != "" {
			return n, "a header name"
		}
		if swapped[ln] || e.cred[ln] {
			continue // swapped, or removed by rule 8
		}
		if n := e.refFindStandInCase(h.Value, false); n != "" {
			return n, "header " + ln
		}
	}
	for _, s := range swaps {
		if n := e.refFindStandInCase(s.user, false); n != "" {
			return n, "the Basic user of header " + s.header
		}
	}
	return "", ""
}

func refSwapValue(v, standIn string, value []byte) (out, basicUser string, ok bool) {
	if v == standIn {
		return string(value), "", true
	}
	sp := strings.IndexByte(v, ' ')
	if sp <= 0 || !tchar.Token(v[:sp]) {
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

func refSortedKeys(m map[string]int) []string {
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

func refNormalizePath(path string) string {
	path = strings.ReplaceAll(path, `\`, "/")
	segs := strings.Split(path[1:], "/")
	out := make([]string, 0, len(segs))
	trail := false
	for i, seg := range segs {
		last := i == len(segs)-1
		switch dotSegment(seg) {
		case ".":
			trail = last
		case "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
			trail = last
		default:
			out = append(out, seg)
		}
	}
	res := "/" + strings.Join(out, "/")
	if trail && len(out) > 0 {
		res += "/"
	}
	return res
}

func (e *Engine) refDecideControl(r *Request) Decision {
	d := Decision{Target: e.cfg.Orchestrator}
	path, query, hasQuery := splitRequestTarget(r.Path)
	upstream, read, ok := e.route(r.Method, path)
	if e.cfg.Orchestrator == "" || strings.Contains(r.Path, "#") {
		ok = false
	}
	if e.cfg.Orchestrator == "" {
		d.Target = "-"
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
	d.Path = upstream
	if hasQuery {
		d.Path += "?" + query
	}
	if d.Reply = refUnderscoreName(r.Headers); d.Reply != nil {
		return d
	}
	if e.token == nil {
		d.Reply = reply(403, ReasonNoStandIn, "this Custodian holds no "+contract.TokenName+"; render the pod's config with controlplane render")
		return d
	}
	count, dup := e.refCountCredentials(r.Headers)
	if dup != nil {
		d.Reply = dup
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
	swapped := map[string]bool{"authorization": true}
	if name, place := e.refStandInElsewhere(path, query, r.Headers, swapped, nil); name != "" {
		d.Reply = reply(403, ReasonStandIn, "the stand-in of "+name+" is in "+place+"; a stand-in rides only a header its secret is bound to, and is never sent upstream")
		return d
	}
	d.Secrets = []string{contract.TokenName}
	d.Set = []Header{
		{Name: "authorization", Value: scheme + " " + string(e.token.value)},
		{Name: "accept-encoding", Value: "identity"},
	}
	for _, n := range refSortedKeys(count) {
		if n != "authorization" {
			d.Remove = append(d.Remove, n)
		}
	}
	d.Remove = append(d.Remove, refRangeHeaders(r.Headers)...)
	return d
}

func (e *Engine) refFindStandInCase(s string, fold bool) string {
	if fold {
		s = strings.ToLower(s)
	}
	if !strings.Contains(s, contract.StandInPrefix) {
		return ""
	}
	for _, si := range e.standIns {
		want := si
		if fold {
			want = strings.ToLower(si)
		}
		if strings.Contains(s, want) {
			return strings.TrimPrefix(si, contract.StandInPrefix)
		}
	}
	return ""
}

func refPathDenied(path string, considered []*held, swapped bool) *held {
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

func refUnderscoreName(hs []Header) *Reply {
	for _, h := range hs {
		if strings.IndexByte(h.Name, '_') >= 0 {
			return reply(400, ReasonUnderscore, "header "+safeWord(h.Name)+` has "_" in its name; header names here use "-"`)
		}
	}
	return nil
}

func refRangeHeaders(hs []Header) []string {
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

// refBadEscape: a '%' not followed by two hex digits.
func refBadEscape(path string) bool {
	for i := 0; i < len(path); i++ {
		if path[i] != '%' {
			continue
		}
		if i+2 >= len(path) || !strings.ContainsRune("0123456789abcdefABCDEF", rune(path[i+1])) || !strings.ContainsRune("0123456789abcdefABCDEF", rune(path[i+2])) {
			return true
		}
	}
	return false
}
