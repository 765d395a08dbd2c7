// Package stream is the Custodian's per-stream machine for Envoy: what an
// Envoy HTTP filter does with one request and its response, written once
// and driven by both Envoy hosts — the Go filter (filter/envoyfilter,
// envoy-contrib) and the dynamic module (filter/module, core Envoy). An
// adapter only translates its SDK or ABI into the small interfaces here
// (Headers, Body, Host), and both run one conformance suite (package
// streamtest) over their own fakes of Envoy, so neither a rule nor a
// translation can differ between them.
//
// Invariant: the machine decides nothing itself. It reads a request or a
// response into the engine's plain values (package filter), applies the
// engine's verdict, and marks a request (dynamic metadata
// jr2.custodian/decided = true) only when that verdict was to forward it,
// after every header change. No value leaves it except in the Set headers
// of a forwarded request; log lines, local replies and errors carry names,
// targets and rule words only. It fails closed: a panic or a broken Config
// refuses the request (500, or a reset once response headers went out) and
// never marks (Stream).
//
// Each entry point's doc says what it does in its phase; Stream says how
// streams share engines and threads, and Reset how memory is reused so the
// module passes a request and its answer without allocating.
package stream
