package filter

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"jr2.dev/boundary/filter/scrub"
)

// Engine decides requests and responses for one pod. It is read-only once
// built and safe for concurrent use by any number of streams.
type Engine struct {
	cfg       *Config
	secrets   []*held            // table order
	byName    map[string]*held   //
	byTarget  map[string][]*held // canonical host:port -> secrets bound to it, table order
	token     *held              // nil when the table holds no token
	cred      map[string]bool    // credential header names (lowercase)
	credList  []string           // cred, sorted
	standIns  []string           // every stand-in, longest first
	scrubber  *scrub.Scrubber    // every value held
	targets   []string           // bound targets, sorted
	upstreams map[string]bool
}

// held is one secret with its value. The value never leaves the engine
// except in a Decision's Set headers.
type held struct {
	name    string
	standIn string
	value   []byte
	headers []string
	paths   []string
}

// New builds an engine from a parsed config and the values LoadValues read.
// Every held secret must have its value.
func New(c *Config, values map[string][]byte) (*Engine, error) {
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
	for _, h := range DefaultHeaders {
		e.cred[h] = true
	}
	var secrets []scrub.Secret
	for _, s := range c.Secrets {
		v, ok := values[s.Name]
		if !ok {
			return nil, fmt.Errorf("held secret %s: no value was loaded", s.Name)
		}
		if err := checkValue(s.Name, v); err != nil {
			return nil, err
		}
		h := &held{
			name:    s.Name,
			standIn: s.StandIn,
			value:   append([]byte(nil), v...),
			headers: append([]string(nil), s.Headers...),
			paths:   append([]string(nil), s.Paths...),
		}
		e.secrets = append(e.secrets, h)
		e.byName[s.Name] = h
		if s.Name == TokenName {
			e.token = h
		}
		for _, t := range s.Targets {
			e.byTarget[t] = append(e.byTarget[t], h)
		}
		for _, hd := range s.Headers {
			e.cred[hd] = true
		}
		e.standIns = append(e.standIns, s.StandIn)
		secrets = append(secrets, scrub.Secret{Name: s.Name, Value: h.value})
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
	sort.Slice(e.standIns, func(i, j int) bool { return len(e.standIns[i]) > len(e.standIns[j]) })
	for t := range e.byTarget {
		e.targets = append(e.targets, t)
	}
	sort.Strings(e.targets)
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
func (e *Engine) findStandIn(s string) string { return e.findStandInCase(s, false) }

// findStandInFold is findStandIn without regard to ASCII case, for text
// whose case a transport rewrote (a header name).
func (e *Engine) findStandInFold(s string) string { return e.findStandInCase(s, true) }

func (e *Engine) findStandInCase(s string, fold bool) string {
	if fold {
		s = strings.ToLower(s)
	}
	if !strings.Contains(s, StandInPrefix) {
		return ""
	}
	for _, si := range e.standIns {
		want := si
		if fold {
			want = strings.ToLower(si)
		}
		if strings.Contains(s, want) {
			return strings.TrimPrefix(si, StandInPrefix)
		}
	}
	return ""
}
