// Package filter is the Custodian's engine: every credential decision lives
// here, once, with no knowledge of any host. Three hosts call it — Envoy
// with the dynamic module (filter/module), Envoy's Go filter
// (filter/envoyfilter), both through filter/stream, and `custodian serve` —
// and so does the mediator of `custodian run`; a host only moves bytes and
// applies the plain values the engine decides.
//
// Invariants:
//   - No value leaves the package except in a Decision's Set headers, which
//     a host puts only on the outbound request to the bound target (or the
//     Orchestrator), and an OAuth secret's parts, which go only to its token
//     endpoint through the transport the host gave Live.Mint. Replies,
//     reasons, errors and log fields carry names, targets and rule words:
//     never a value, a stand-in, a path, a query, a header value or a body.
//   - The engine holds no value an agent could guess: LoadValues, New and
//     every reload of a Live refuse a value below package strength's floor,
//     because the scrubber is a membership oracle (values.go says why the
//     check is at load).
//   - Config is read once into read-only structs; a request is decided
//     wholly with one engine (Engine.Latest, live.go), and the common pass
//     path allocates nothing (Decision; TestDecideRequestAllocs).
//
// The entry points are Engine's Decide* methods, AllowDial, DialAllowed,
// NewBody and NewFrames; each one's doc gives its rules.
package filter
