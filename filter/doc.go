// Package filter is the Custodian's engine: every credential decision of
// every host (`custodian serve`, Envoy with the dynamic module or the Go
// filter, and the contained run's mediator) lives here, once, with no
// knowledge of any host.
//
// The engine reads the engine config (custodian.json: the held table of
// names, stand-ins, targets, headers and paths, and the value directory)
// once into read-only structs, and the values at start; a Live then follows
// the value directory (internal/valuedir) and swaps in a whole new engine
// when the values rotate, so a request is decided wholly with one set (Engine.Latest
// is the engine a new request takes; see live.go). An engine decides plain
// values that any host applies:
//
//   - DecideConnect: what the egress listener does with a CONNECT target —
//     intercept a bound host:port, tunnel another after the spelled half of
//     the dial guard, or answer.
//   - DecideRequest: an intercepted request, by the spec's rules 1–11 in
//     order: the headers to set and remove, the path that goes upstream, or a
//     local reply.
//   - DecideAllowed and DialAllowed: a request, and a dial, of a host that
//     reads every target it allows, bound or not (the contained run's
//     mediator): a bound target's by DecideUpgrade (over TLS only), any
//     other's by the rules that keep a stand-in from going upstream (allowed.go).
//   - DecideControl: a request on the control listener: one of the four
//     routes with the bearer swapped, or a local reply.
//   - DecideResponse and NewBody: a response from a bound target or the
//     Orchestrator: scrubbed header values, the headers to drop, and a
//     streaming body scrubber (gzip read first when the body is gzip);
//     DecideTrailers holds its trailers to the same rule as its headers.
//   - AllowDial: the resolved half of the dial guard, on the address a host
//     actually dials.
//   - DecideUpgrade, DecideControlUpgrade, DecideSwitch and NewFrames: a
//     WebSocket upgrade (any other upgrade refused), its 101, and the
//     scrubber of every frame the upstream sends after it (package
//     filter/wsframe); the agent's frames are not read.
//
// Invariant: no value leaves this package except in a Decision's Set
// headers, which a host puts only on the outbound request to the bound
// target (or the Orchestrator), and an OAuth secret's parts, which go only
// to its token endpoint, through the transport its host gave Live.Mint
// (oauth.go: the minter gets access tokens, and a token is then a value
// like any other). Replies, reasons, errors and log fields
// carry names, targets and rule words — never a value, a stand-in, a path,
// a query, a header value or a body. A Reply's Headers are fixed text the
// engine wrote (rule 9's WWW-Authenticate challenge, Challenge), never
// anything the agent sent; a host writes them on the answer as given.
//
// Invariant: DecideRequest and DecideControl decide in one pass over the
// request without allocating on the pass path (a swap of the stand-in
// alone or "Bearer <stand-in>", a path that normalising leaves as it is,
// no header removed): what depends only on the config — each target's
// host, port and (secret, header) slots, each value as a string, the Set
// and Secrets of a one-swap decision — is built once in New and shared,
// read-only, by the Decisions (see Decision). TestDecideRequestAllocs pins
// the counts; TestDecideRequestSame and FuzzDecideRequestSame hold every
// decision to the engine as it was before (ref_test.go).
//
// Invariant: the engine holds no value an agent could guess. LoadValues,
// New and every reload of a Live refuse, naming the secret, a value below the guess floor of package
// strength (2^64 candidates), because the scrubber is a membership oracle
// for whatever an agent can make a bound host echo. The check is at load:
// neither controlplane render nor the contained run's policy sees a value.
package filter
