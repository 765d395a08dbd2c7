// Package standintest is the one table of the places a stand-in can ride in
// a request besides a header its secret is bound to: rule 10's places. Every
// host of the engine runs it — the engine itself (package filter), both
// Envoy adapters (filter/stream/streamtest), custodian serve and the
// contained run's mediator — and each asserts the engine's 403, reason
// stand-in, with Body's text byte for byte, and that nothing went upstream.
// A stand-in is never sent upstream: a place a host misses fails here.
//
// Each host sends a Case its own way (a header map as Envoy holds it, a real
// HTTP request that Go's client writes and Go's server reads). Toward a
// bound target it adds the swap (the stand-in in a header the secret is
// bound to), since without one rule 9 answers first; toward a target no
// secret is bound to it adds nothing, and Unbound's cases hold there too.
//
// Invariant: test code only; nothing outside _test.go files and test
// helpers imports it.
package standintest

import (
	"encoding/base64"
	"net/textproto"
	"strings"

	"jr2.dev/boundary/filter"
)

// Reason is the word of every refusal the table expects.
const Reason = filter.ReasonStandIn

// Status is the status of every refusal the table expects.
const Status = 403

// Case is one request holding a stand-in where it may not go.
type Case struct {
	Name string
	// Path is the request target: the path and, if any, "?query".
	Path string
	// Header is one more header, its name spelled as the client sends it;
	// Header.Name "" for none.
	Header filter.Header
	// Place is where rule 10's answer says the stand-in is.
	Place string
}

// Cases are the places of si, the stand-in of a secret whose name holds no
// '_' (a header name holding one is rule 2's 400 toward a bound target,
// before rule 10), under base, a path prefix the secret may be sent to
// ("/v1/"). The header names are the stand-in as sent, as Go's server
// rewrites it (X-Jr2-Held-Name: textproto.CanonicalMIMEHeaderKey), in
// capitals and inside a longer name: a host that compares names without
// folding case misses all but the first.
func Cases(si, base string) []Case {
	enc := strings.Replace(si, "-", "%2D", 1) // "-" percent-encoded: rule 4 refuses only %2f, %2e, %5c
	return []Case{
		{Name: "in the path", Path: base + si, Place: "the path"},
		{Name: "in the path, percent-encoded", Path: base + enc, Place: "the path"},
		{Name: "in the query", Path: base + "x?k=" + si, Place: "the query"},
		{Name: "in the query, percent-encoded", Path: base + "x?k=" + enc, Place: "the query"},
		{Name: "as a header name, as sent", Path: base + "x", Header: filter.Header{Name: si, Value: "1"}, Place: "a header name"},
		{Name: "as a header name, as Go's server canonicalises it", Path: base + "x",
			Header: filter.Header{Name: textproto.CanonicalMIMEHeaderKey(si), Value: "1"}, Place: "a header name"},
		{Name: "as a header name, in capitals", Path: base + "x", Header: filter.Header{Name: strings.ToUpper(si), Value: "1"}, Place: "a header name"},
		{Name: "inside a header name", Path: base + "x", Header: filter.Header{Name: "x-" + si, Value: "1"}, Place: "a header name"},
		{Name: "in a header value", Path: base + "x", Header: filter.Header{Name: "x-note", Value: "copy of " + si}, Place: "header x-note"},
	}
}

// Unbound are the places of si that hold toward a target no secret is bound
// to, beside Cases: there nothing is swapped and no credential header is
// removed, so a credential header goes upstream as sent and is searched too,
// a Basic pair decoded (toward a bound target rule 8 removes such a header).
func Unbound(si, base string) []Case {
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("agent:"+si))
	return []Case{
		{Name: "as a bearer", Path: base + "x", Header: filter.Header{Name: "authorization", Value: "Bearer " + si}, Place: "header authorization"},
		{Name: "as a Basic password", Path: base + "x", Header: filter.Header{Name: "authorization", Value: basic}, Place: "header authorization"},
		{Name: "alone in a credential header", Path: base + "x", Header: filter.Header{Name: "x-api-key", Value: si}, Place: "header x-api-key"},
	}
}

// Body is rule 10's answer naming the secret and the place, the same text
// in every host.
func Body(secret, place string) string {
	return "jr2 custodian: the stand-in of " + secret + " is in " + place +
		"; a stand-in rides only a header its secret is bound to, and is never sent upstream"
}
