// Package envoyfilter runs the Custodian's engine (package filter) inside
// Envoy's Go HTTP filter. It imports only the SDK's pure-Go api package, so
// every line of it runs in ordinary tests against fakes of the SDK's
// interfaces; the cgo registration lives in filter/plugin.
//
// # Invariant
//
// The adapter decides nothing: it reads a request or a response into the
// engine's plain values, applies the engine's verdict, and marks a request
// only when that verdict was to forward it. No value leaves this package
// except in the Set headers of a forwarded request; log lines, local replies
// and errors carry names, targets and rule words only.
//
// # Config: once per distinct custodian.json
//
// The golang filter's filter-level plugin config is a
// google.protobuf.StringValue holding custodian.json; each route's config is
// a StringValue holding a pluginconf.RouteConfig. Parser.Parse tells them
// apart by shape, not by guessing: a JSON object with a top-level "role" key
// is a RouteConfig (custodian.json has no such key, and its strict decoder
// refuses one); anything else must be custodian.json. Engines are cached by
// the SHA-256 of the config bytes, so the many listeners that share one
// custodian.json build one engine and read the value directory once. Merge
// joins the filter-level engine with a route's role; whatever it cannot
// merge becomes a config that answers every request 500 and never marks.
//
// # Per stream
//
//   - DecodeHeaders: by the route's role — control: DecideControl; egress:
//     DecideConnect; intercept: DecideRequest toward the route's target. A
//     reply is sent as a local reply (text/plain); a forward sets :path
//     (and, toward a bound target, :authority to filter.UpstreamHost),
//     removes and sets headers, then marks the request (dynamic metadata
//     jr2.custodian/decided = true) that the RBAC filter after this one
//     requires.
//   - EncodeHeaders: DecideResponse (intercept and control roles): scrubbed
//     header values, content-length and content-encoding dropped, or the
//     502 of an encoding the Custodian cannot read. The action=intercept line
//     is written here, with the status the agent gets.
//   - EncodeData: each chunk passes through the engine's streaming Body and
//     goes on at once (never buffered whole). A gzip body that turns out
//     broken ends the response with a local reply, which Envoy turns into a
//     stream reset once headers went out: a cut body never looks complete.
//   - EncodeTrailers: the scrubber's held tail is added before the trailers
//     (AddData), and the trailers are decided as headers are: a name that
//     holds a value is removed, every value scrubbed.
//
// A stream's callbacks run one after another on the Envoy worker thread:
// the filter never returns Running and starts no goroutine, so a stream's
// state needs no lock. A config and its engine are shared by every stream
// and are read-only.
//
// # Failing closed
//
// Every callback recovers a panic of its own: the request is answered 500
// (or, once response headers went out, the stream is reset), the mark is
// overwritten with false, and one line with reason=internal is logged.
//
// # Not covered here
//
// Whether Envoy really requires the mark is the rendered RBAC filter's job
// (controlplane). Everything Envoy does around these callbacks — local
// replies in the encode phase, AddData in trailers, route caching — is
// modelled by this package's fakes from the SDK's and Envoy's sources and
// has not been run in an Envoy binary here; envoy/README.md lists it.
package envoyfilter
