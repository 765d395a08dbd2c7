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
// Each stream's work — the header decision, the body hold and scrub, the
// trailers, local replies, log fields and the fail-closed recovery — is
// package stream's machine, the same one the dynamic module (filter/module)
// drives in core Envoy. This package only translates: DecodeHeaders,
// EncodeHeaders, EncodeData, EncodeTrailers and OnDestroy call the machine
// with the SDK's header maps and buffers, and the machine's Host becomes
// the SDK's callbacks (dynamic metadata for the mark, SendLocalReply,
// AddData from the trailers phase, api.LogInfo).
//
// # Not covered here
//
// Whether Envoy really requires the mark is the rendered RBAC filter's job
// (controlplane), proven in core Envoy (TestMarkInEnvoy). What the golang
// filter itself does around these callbacks is modelled by this package's
// fakes from the SDK's sources and has not run in an envoy-contrib binary
// here (envoy/README.md); the same machine runs in core Envoy through the
// module in every make test.
package envoyfilter
