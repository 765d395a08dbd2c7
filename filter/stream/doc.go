// Package stream is the Custodian's per-stream machine for Envoy: what an
// Envoy HTTP filter does with one request and its response, written once
// and driven by both Envoy hosts — the golang-filter adapter
// (filter/envoyfilter, envoy-contrib) and the dynamic module
// (filter/module, core Envoy). An adapter only translates its SDK or ABI
// into the small interfaces here (Headers, Body, Host); every rule of the
// stream lives in this package, so a rule cannot differ between the two.
// Both adapters run one conformance suite (package streamtest) over their
// own fakes of Envoy, so a translation cannot differ either.
//
// # Invariant
//
// The machine decides nothing itself: it reads a request or a response into
// the engine's plain values (package filter), applies the engine's verdict,
// and marks a request (dynamic metadata jr2.custodian/decided = true) only
// when that verdict was to forward it. No value leaves it except in the Set
// headers of a forwarded request; log lines, local replies and errors carry
// names, targets and rule words only.
//
// # Per stream
//
//   - RequestHeaders: by the route's role — control: DecideControl; egress:
//     DecideConnect; intercept: DecideRequest toward the route's target
//     (the connection's, when the route config names none: the host gives
//     it with Config.ForConnection before the stream starts). A
//     reply is sent as a local reply (text/plain); a forward sets :path
//     (and, toward a bound target, :authority to contract.UpstreamHost),
//     removes and sets headers, then marks the request, the last thing it
//     does.
//   - ResponseHeaders: DecideResponse (intercept and control roles) on the
//     headers exactly as the upstream sent them: scrubbed header values,
//     content-length and content-encoding dropped, or the 502 of an
//     encoding the Custodian cannot read. The action=intercept line is
//     written here, with the status the agent gets.
//   - ResponseData: each chunk passes through the engine's streaming Body
//     and goes on at once (never buffered whole); the scrubber holds the
//     tail that could begin a value. A gzip body that turns out broken ends
//     the response with a local reply, which Envoy turns into a stream reset
//     once headers went out: a cut body never looks complete.
//   - ResponseTrailers: the held tail is appended before the trailers, and
//     the trailers are decided as headers are: a name that holds a value is
//     removed, every value scrubbed.
//   - A WebSocket upgrade: RequestHeaders decides it with
//     filter.Engine.DecideUpgrade (UpgradeOf reads the upgrade header
//     Envoy keeps on an upgrade); a 101 to it is decided by DecideSwitch
//     (its 502 a local reply), and every chunk of the upgraded bytes
//     Envoy passes as response data goes through the engine's frame
//     scrubber (package filter/wsframe); malformed framing passes the
//     Custodian's close frame and drops what follows. The agent's bytes
//     (request data) pass unchanged.
//   - A request whose decision needs its body (filter.Decision.NeedBody:
//     a SigV4 signature over the body's hash, sigv4.go): RequestHeadersEnd
//     holds it (Held: the adapter stops the headers), RequestData takes
//     each chunk into the machine's buffer (at most filter.MaxSignedBody;
//     past it the engine's 413) and, at the last, decides with
//     DecideRequestBody, applies the decision to the held headers and lets
//     the whole body go on in that chunk. A held request that ends in
//     trailers is refused (RequestTrailers): its body cannot go before
//     them. A forwarded signed aws-chunked body (Decision.Chunks) goes
//     through the engine's chunk re-signer chunk by chunk; one that does
//     not verify is answered 403 and Envoy cuts the request upstream. Any
//     other request's body passes untouched.
//   - Done: the scrubber is released, and a forwarded request that ended
//     before any response gets its action=intercept line (status=0).
//
// A stream's calls run one after another on one Envoy worker thread; the
// machine starts no goroutine, so a Stream needs no lock. A Config and its
// engine are shared by every stream and are read-only. A Stream takes the
// newest engine of its Config's lineage when it is made
// (filter.Engine.Latest) and decides its request and its response with it
// to the end: a rotation of the values (Engines' watcher) changes only the
// streams that begin after it.
//
// # Memory
//
// A Stream keeps the memory it grew (the sorted header lists, the body's
// scrubber and the chunk it scrubs into, a log line) and Reset makes it the
// machine of a later stream with that memory emptied: an adapter that
// reuses its Streams (the module does) passes a request and its answer
// without allocating. Nothing the machine hands out (a log line, a scrubbed
// chunk) outlives the call it is handed out in.
//
// # Failing closed
//
// Every entry point recovers a panic of its own: the request is answered
// 500 (or, once response headers went out, the stream is reset), the mark
// is overwritten with false, what follows of the response is dropped, and
// one line with reason=internal is logged. A Config that is broken (see
// Merge) answers every request 500 and never marks.
package stream
