package filter

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	"jr2.dev/boundary/filter/scrub"
	"jr2.dev/boundary/internal/contract"
	"jr2.dev/boundary/internal/valuedir"
)

// Engine decides requests and responses for one pod. It is read-only once
// built and safe for concurrent use by any number of streams.
type Engine struct {
	cfg       *Config
	live      *Live              // the engine's lineage when its values follow their files; nil for a fixed engine
	secrets   []*held            // table order
	byName    map[string]*held   //
	byTarget  map[string][]*held // canonical host:port -> secrets bound to it, table order
	token     *held              // nil when the table holds no token
	cred      map[string]bool    // credential header names (lowercase)
	credList  []string           // cred, sorted
	parts     map[string][]byte  // each OAuth secret's parts, by file name (oauth.go)
	standIns  []string           // every stand-in, longest first
	siNames   []string           // the secret of each of standIns
	shaped    bool               // a stand-in is shaped (contract.StandInMark)
	scrubber  *scrub.Scrubber    // every value held
	targets   []string           // bound targets, sorted
	upstreams map[string]bool

	// Built once in New from the config alone, so that a request's pass
	// path allocates nothing (it runs on every request): see request.go.
	bound      map[string]*boundTarget // canonical host:port -> its table
	credIdx    map[string]int          // credential header name -> index in credList
	credFirst  [256]uint64             // first byte -> bit min(len, 63) of each credential name
	standInsLC []string                // standIns, lowercase, same order
	tokenSet   []Header                // the control Set for "Bearer <token>"
	tokenNames []string                // {contract.TokenName}
	fetchPath  string                  // POST /fetch's upstream path
}

// boundTarget is what DecideRequest needs of one bound target, computed
// once: its secrets, its host and port as rule 3 compares them, and, for a
// target many secrets ride, which of them names which header.
type boundTarget struct {
	secrets   []*held
	host      string // contract.SplitTarget's host; ok is false when it failed
	port      string // decimal
	defPort   string // the port a Host without one names: "443" (TLS), "80" (DecideAllowed over plain HTTP)
	ok        bool
	plain     string            // the Host spellings rule 3 takes at a glance: the
	withPort  string            // canonical host (defPort only) and host:port
	ridesAuth bool              // ridesAuthorization(secrets)
	slots     []slot            // every (secret, header) pair, table order
	aws       *held             // the AWS key bound to the target, if any (sigv4.go)
	byCred    map[int32][]int32 // credential index -> indexes into slots (only when slots is long)
}

// slot is one header a bound secret may ride: secrets[i].headers[j], the
// credential header cred of credList.
type slot struct {
	secret *held
	j      int
	cred   int32
}

func (sl slot) header() string { return sl.secret.headers[sl.j] }

// held is one secret with its value. The value never leaves the engine
// except in a Decision's Set headers.
type held struct {
	name    string
	standIn string
	value   []byte
	headers []string
	paths   []string
	aws     *awsKey // an AWS key (sigv4.go); nil for a value that rides a header

	// Precomputed so a swap allocates nothing: the value as a string, the
	// Secrets of a decision that swaps this secret alone, and, per header
	// j, the Set of a decision whose one swap is the stand-in alone (bare)
	// or "Bearer <stand-in>" (bearer). A Decision shares these; a host
	// reads them and never writes (Decision says so).
	valueStr string
	names1   []string
	bare     [][]Header
	bearer   [][]Header

	// oauth: the value is an access token (oauth.go); noToken: the engine
	// holds none, and a swap of this secret is answered tokenReply.
	oauth   bool
	noToken bool
	mint    mintState
}

// precompute fills h's shared decision parts.
func (h *held) precompute() {
	h.valueStr = string(h.value)
	h.names1 = []string{h.name}
	for _, hn := range h.headers {
		h.bare = append(h.bare, []Header{{Name: hn, Value: h.valueStr}, identityEncoding})
		h.bearer = append(h.bearer, []Header{{Name: hn, Value: "Bearer " + h.valueStr}, identityEncoding})
	}
}

// identityEncoding is rule 11's Set header, last in every forwarded Set.
var identityEncoding = Header{Name: "accept-encoding", Value: "identity"}

// manySlots is the number of (secret, header) pairs of a target above which
// DecideRequest finds a credential header's slots in a map rather than
// among all of them.
const manySlots = 8

// newBoundTarget builds t's table from its secrets (table order); credIdx
// indexes the credential header names.
func newBoundTarget(t string, secrets []*held, credIdx map[string]int) *boundTarget {
	b := &boundTarget{secrets: secrets, ridesAuth: ridesAuthorization(secrets)}
	b.hostOf(t, 443)
	for _, s := range secrets {
		if s.aws != nil {
			b.aws = s // no slot: its key signs, it rides no header (sigv4.go)
			continue
		}
		for j, hn := range s.headers {
			b.slots = append(b.slots, slot{secret: s, j: j, cred: int32(credIdx[hn])})
		}
	}
	if len(b.slots) > manySlots {
		b.byCred = map[int32][]int32{}
		for k, sl := range b.slots {
			b.byCred[sl.cred] = append(b.byCred[sl.cred], int32(k))
		}
	}
	return b
}

// hostOf fills what rule 3 compares a Host with: t's host and port, and
// the spellings of a Host that names it, without a port when its port is
// def (the scheme's default).
func (b *boundTarget) hostOf(t string, def int) {
	b.defPort = strconv.Itoa(def)
	if host, port, err := contract.SplitTarget(t); err == nil {
		b.host, b.port, b.ok = host, strconv.Itoa(port), true
		b.withPort = contract.JoinTarget(host, port)
		b.plain = b.withPort
		if port == def {
			b.plain = host
			if strings.Contains(host, ":") {
				b.plain = "[" + host + "]"
			}
		}
	}
}

// New builds an engine from a parsed config and the values LoadValues read.
// Every held secret must have its value.
func New(c *Config, values map[string][]byte) (*Engine, error) {
	return newEngine(c, values, nil)
}

// newEngine is New whose scrubber also replaces every form of each retired
// value (a value of the secret before a rotation, within the grace window)
// with the secret's own label. A retired value is never sent: only values
// are put in Set headers.
func newEngine(c *Config, values map[string][]byte, retired map[string][][]byte) (*Engine, error) {
	if c == nil {
		return nil, errors.New("engine: no config")
	}
	if err := c.check(); err != nil {
		return nil, fmt.Errorf("engine config: %w", err)
	}
	e := &Engine{
		cfg:      c,
		byName:   map[string]*held{},
		byTarget: map[string][]*held{},
		cred:     map[string]bool{"proxy-authorization": true},
	}
	for _, h := range contract.DefaultHeaders {
		e.cred[h] = true
	}
	var secrets []scrub.Secret
	for _, s := range c.Secrets {
		if s.AWS != nil {
			h, parts, err := newAWSHeld(&s, values)
			if err != nil {
				return nil, err
			}
			e.secrets = append(e.secrets, h)
			e.byName[s.Name] = h
			for _, t := range s.Targets {
				e.byTarget[t] = append(e.byTarget[t], h)
			}
			for _, hd := range s.Headers {
				e.cred[hd] = true
			}
			e.standIns = append(e.standIns, s.StandIn)
			e.siNames = append(e.siNames, s.Name)
			for _, p := range parts {
				e.standIns = append(e.standIns, contract.StandIn(p.Name))
				e.siNames = append(e.siNames, p.Name)
				secrets = append(secrets, scrub.Secret{Name: p.Name, Value: p.Value, Built: retired[p.Name]})
			}
			continue
		}
		v, ok := values[s.Name]
		if !ok && s.OAuth == nil {
			return nil, fmt.Errorf("held secret %s: no value was loaded", s.Name)
		}
		if ok {
			if err := valuedir.Check(s.Name, v, valuedir.Header); err != nil {
				return nil, err
			}
		}
		h := &held{
			name:    s.Name,
			standIn: s.StandIn,
			value:   append([]byte(nil), v...),
			headers: append([]string(nil), s.Headers...),
			paths:   append([]string(nil), s.Paths...),
			oauth:   s.OAuth != nil,
			noToken: !ok,
		}
		h.precompute()
		built := retired[s.Name]
		if s.OAuth != nil {
			if e.parts == nil {
				e.parts = map[string][]byte{}
			}
			for _, p := range s.OAuth.Parts() {
				f := partFile(s.Name, p)
				pv, have := values[f]
				if !have {
					return nil, fmt.Errorf("held secret %s: no %s was loaded", s.Name, f)
				}
				e.parts[f] = append([]byte(nil), pv...)
				built = append(built, retired[f]...)
			}
			built = append(built, secretParts(s, values)...)
		}
		scrubValue := h.value
		if len(scrubValue) == 0 && len(built) > 0 {
			scrubValue, built = built[len(built)-1], built[:len(built)-1]
		}
		e.secrets = append(e.secrets, h)
		e.byName[s.Name] = h
		if s.Name == contract.TokenName {
			e.token = h
		}
		for _, t := range s.Targets {
			e.byTarget[t] = append(e.byTarget[t], h)
		}
		for _, hd := range s.Headers {
			e.cred[hd] = true
		}
		e.standIns = append(e.standIns, s.StandIn)
		e.siNames = append(e.siNames, s.Name)
		e.shaped = e.shaped || s.Shape != nil
		secrets = append(secrets, scrub.Secret{Name: s.Name, Value: scrubValue, Built: built})
	}
	sc, err := scrub.New(secrets)
	if err != nil {
		return nil, fmt.Errorf("scrubber: %w", err)
	}
	e.scrubber = sc
	for hd := range e.cred {
		e.credList = append(e.credList, hd)
	}
	sort.Strings(e.credList)
	e.credIdx = make(map[string]int, len(e.credList))
	for i, n := range e.credList {
		e.credIdx[n] = i
		e.credFirst[n[0]] |= 1 << min(len(n), 63)
	}
	sort.Sort(byLength{e.standIns, e.siNames})
	for _, si := range e.standIns {
		e.standInsLC = append(e.standInsLC, strings.ToLower(si))
	}
	e.bound = make(map[string]*boundTarget, len(e.byTarget))
	for t, secrets := range e.byTarget {
		e.targets = append(e.targets, t)
		e.bound[t] = newBoundTarget(t, secrets, e.credIdx)
	}
	sort.Strings(e.targets)
	e.fetchPath = "/sandboxes/" + c.Sandbox + "/fetch"
	if e.token != nil {
		e.tokenSet = []Header{{Name: "authorization", Value: "Bearer " + e.token.valueStr}, identityEncoding}
		e.tokenNames = []string{contract.TokenName}
	}
	return e, nil
}

// DialBound is the guard on a bound target's dial: a host calls it with the
// address it is about to dial for an intercepted request (after resolution)
// and dials only when it returns nil. A bound name that resolves to a
// guarded address is refused, unless the config allows local targets.
func (e *Engine) DialBound(target string, addr netip.Addr) *Reply {
	if e.cfg.LocalTargets {
		return nil
	}
	return e.AllowDial(target, addr)
}

// Latest is the engine a new request or stream decides with: the newest
// of e's lineage when its values follow their files (see Live), else e
// itself. A host calls it once per request (or stream) and decides the
// whole request, and its response, with what it returned.
func (e *Engine) Latest() *Engine {
	if e.live == nil {
		return e
	}
	return e.live.Engine()
}

// Config returns the engine's config. The caller must not modify it.
func (e *Engine) Config() *Config { return e.cfg }

// Targets returns the bound targets, sorted.
func (e *Engine) Targets() []string { return append([]string(nil), e.targets...) }

// Names returns the held secrets' names in table order.
func (e *Engine) Names() []string {
	out := make([]string, len(e.secrets))
	for i, s := range e.secrets {
		out[i] = s.name
	}
	return out
}

// CredentialHeaders returns the credential header names, sorted: the
// default four, every header a held secret names, and proxy-authorization.
func (e *Engine) CredentialHeaders() []string { return append([]string(nil), e.credList...) }

// Scrubber returns the scrubber over every value the engine holds.
func (e *Engine) Scrubber() *scrub.Scrubber { return e.scrubber }

// ReadyFields returns the pairs of the `ready` log line (after the word
// "ready"): secrets=<n1,n2> hosts=<N>.
func (e *Engine) ReadyFields() []string {
	return []string{"secrets", strings.Join(e.Names(), ","), "hosts", fmt.Sprint(len(e.targets))}
}

// findStandIn returns the name of the longest stand-in found in s, or "".
func (e *Engine) findStandIn(s string) string {
	if !e.mayHoldStandIn(s) {
		return ""
	}
	for i, si := range e.standIns {
		if strings.Contains(s, si) {
			return e.siNames[i]
		}
	}
	return ""
}

// byLength sorts stand-ins, and their names with them, longest first
// (stable: table order among equals).
type byLength struct{ standIns, names []string }

func (b byLength) Len() int           { return len(b.standIns) }
func (b byLength) Less(i, j int) bool { return len(b.standIns[i]) > len(b.standIns[j]) }
func (b byLength) Swap(i, j int) {
	b.standIns[i], b.standIns[j] = b.standIns[j], b.standIns[i]
	b.names[i], b.names[j] = b.names[j], b.names[i]
}

// hasStandInPrefix is strings.Contains(s, contract.StandInPrefix), quicker on the
// short texts of a request: most hold no 'j' at all.
func hasStandInPrefix(s string) bool {
	for {
		i := strings.IndexByte(s, 'j')
		if i < 0 {
			return false
		}
		if strings.HasPrefix(s[i:], contract.StandInPrefix) {
			return true
		}
		s = s[i+1:]
	}
}

// findStandInFold is findStandIn without regard to case (strings.ToLower's),
// for text whose case a transport rewrote (a header name). ASCII text
// without the prefix in any case is answered without lowering a copy.
func (e *Engine) findStandInFold(s string) string {
	if isASCII(s) && !containsFoldASCII(s, contract.StandInPrefix) && !(e.shaped && containsFoldASCII(s, shapedMarkLC)) {
		return ""
	}
	s = strings.ToLower(s)
	if !strings.Contains(s, contract.StandInPrefix) && !(e.shaped && strings.Contains(s, shapedMarkLC)) {
		return ""
	}
	for i, si := range e.standInsLC {
		if strings.Contains(s, si) {
			return e.siNames[i]
		}
	}
	return ""
}

// isASCII reports whether s holds only bytes below 0x80.
func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// lowerByte is c in ASCII lowercase.
func lowerByte(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// containsFoldASCII reports whether s holds sub (lowercase ASCII) in any
// ASCII case.
func containsFoldASCII(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		j := 0
		for j < len(sub) && lowerByte(s[i+j]) == sub[j] {
			j++
		}
		if j == len(sub) {
			return true
		}
	}
	return false
}
