// Package envoyfilter runs the Custodian's engine (package filter) inside
// Envoy's Go HTTP filter. It imports only the SDK's pure-Go api package, so
// every line of it runs in ordinary tests against fakes of the SDK's
// interfaces; the cgo registration lives in filter/plugin.
//
// Invariant: the adapter decides nothing and holds no rule. Each stream's
// work is package stream's machine, the one the dynamic module
// (filter/module) drives in core Envoy; this package only translates the
// SDK's callbacks and header maps into the machine's calls, and the
// machine's Host into the SDK's (dynamic metadata for the mark,
// SendLocalReply, AddData from the trailers phase, api.LogInfo). No value
// leaves it except in the Set headers of a forwarded request. A config it
// cannot parse is rejected (Parser.Parse); one it cannot merge answers
// every request 500 and never marks (Parser.Merge).
//
// Not covered here: whether Envoy really requires the mark is the rendered
// RBAC filter's job, proven in core Envoy (TestMarkInEnvoy). This
// package's fakes model the golang filter from the SDK's sources; it has
// not run in an envoy-contrib binary here (envoy/README.md), while the same
// machine runs in core Envoy through the module.
package envoyfilter
