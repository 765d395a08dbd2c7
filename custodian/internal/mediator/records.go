package mediator

import (
	"net/http"
	"sort"

	"jr2.dev/boundary/internal/bundle"
)

// The records' fields. Names and words only come from checked input: a
// host passed contract.CheckName, a type or reason is one of this package's
// words. Paths, queries and header values are recorded (the bundle is the
// record of what went out); values never are. A name the child chose is
// recorded as scrubName gives it back: each form of a held value replaced
// by its label, and "scrubbed": true on the record when one was.

type dnsQuery struct {
	Name      string `json:"name"`
	Type      string `json:"type"`
	Transport string `json:"transport"`
	Error     string `json:"error,omitempty"`
	Scrubbed  bool   `json:"scrubbed,omitempty"`
}

type dnsDecision struct {
	Query    uint64 `json:"query"`
	Name     string `json:"name"`
	Type     string `json:"type"`
	Rcode    string `json:"rcode"`
	Answer   string `json:"answer,omitempty"`
	Reason   string `json:"reason,omitempty"` // ruleValueInName for a name that held a value
	Scrubbed bool   `json:"scrubbed,omitempty"`
}

// ruleValueInName is the rule that denies a DNS question or an attempt
// whose name held a form of a held value.
const ruleValueInName = "value-in-name"

// scrubName returns name (a host name, lowercased on its way here) with
// every form of every held value, in any letter case, replaced by its
// label, and whether it held one. The case-folded scrubber is the engine's
// own, matching more than the bundle writer's guard: what it returns never
// trips the guard, so a name that held a value is recorded, not dropped.
func (m *Mediator) scrubName(name string) (string, bool) {
	if name == "" {
		return "", false
	}
	s := m.o.Broker.Engine().Scrubber().Folded().String(name)
	return s, s != name
}

// Ways an attempt named its destination.
const (
	viaSNI   = "sni"
	viaHost  = "host"
	viaProxy = "proxy"
	viaIP    = "ip"
)

type egressAttempt struct {
	Host     string `json:"host"`
	Port     uint16 `json:"port"`
	Via      string `json:"via"`
	Addr     string `json:"addr,omitempty"`  // the address dialled, for a literal-IP dial
	Error    string `json:"error,omitempty"` // why no host could be read
	Scrubbed bool   `json:"scrubbed,omitempty"`
}

type egressDecision struct {
	Attempt  uint64 `json:"attempt"`
	Decision string `json:"decision"` // allow or deny
	Host     string `json:"host"`
	Port     uint16 `json:"port"`
	Rule     string `json:"rule"`
	Reason   string `json:"reason,omitempty"` // the engine's word, when Rule is "engine"
	Method   string `json:"method,omitempty"`
	Status   int    `json:"status,omitempty"`
	Scrubbed bool   `json:"scrubbed,omitempty"`
}

// ruleEngine is the rule of a request the engine refused on an allowed
// connection (its reason is the engine's word).
const ruleEngine = "engine"

type httpRequest struct {
	Attempt  uint64      `json:"attempt"`
	Method   string      `json:"method"`
	URL      string      `json:"url"`
	Headers  [][2]string `json:"headers"`
	Length   int64       `json:"content_length,omitempty"`
	Scrubbed bool        `json:"scrubbed,omitempty"`
}

// ruleValueInRequest is the rule that denies a request whose URL or
// headers, as they would go upstream, held a form of a held value.
const ruleValueInRequest = "value-in-request"

// scrub replaces, in the request's URL and headers, every form of every
// held value by its label (a header name in any letter case: names are
// case-folded on their way) and reports whether there was one. The headers
// a value was swapped into already show the agent's stand-in.
func (r *httpRequest) scrub(m *Mediator) bool {
	sc := m.o.Broker.Engine().Scrubber()
	held := false
	one := func(s *string, sc interface{ String(string) string }) {
		if out := sc.String(*s); out != *s {
			*s, held = out, true
		}
	}
	one(&r.URL, sc)
	for i := range r.Headers {
		one(&r.Headers[i][0], sc.Folded())
		one(&r.Headers[i][1], sc)
	}
	r.Scrubbed = held
	return held
}

type secretInjected struct {
	Request uint64 `json:"request"`
	Name    string `json:"name"`
	Host    string `json:"host"`
}

// httpResponse and httpRequestBody are the shared shapes (internal/bundle),
// written by the Effector's receipts too.
type httpResponse = bundle.ResponseRecord

// chunkRecord is the record of response body chunk i.
func chunkRecord(req uint64, i int, p []byte) httpResponse {
	return httpResponse{Request: req, BodyChunk: bundle.ChunkOf(i, p)}
}

type httpRequestBody = bundle.RequestBodyRecord

// headerList renders h as sorted [name, value] pairs, repeated names kept
// in order.
func headerList(h http.Header) [][2]string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out [][2]string
	for _, k := range keys {
		for _, v := range h[k] {
			out = append(out, [2]string{k, v})
		}
	}
	return out
}
