// Package module is the Custodian inside core Envoy: the hooks of Envoy's
// dynamic-module ABI (abi.h), exported by the c-shared custodian-module,
// translated into the stream machine (package filter/stream) and the
// machine's answers translated back into the ABI's callbacks. It decides
// nothing itself; every rule is the machine's and the engine's.
//
// # Invariant
//
// Envoy holds numbers, never Go pointers: a config is a runtime/cgo handle,
// a stream a slot of the filter table. Every hook recovers every panic: a
// config hook rejects its config, a stream hook fails its stream closed (no
// mark, the fixed 502 or 500, nothing more of it passed on). No hook keeps a
// view of Envoy's memory past its return: header maps and body chunks are
// copied into the filter's own memory before anything reads them, and
// whatever the module hands Envoy (a header, a chunk, a line) Envoy copies
// before the callback returns. No value reaches a log line.
//
// # Memory
//
// A passed request and its answer allocate nothing on the module's side
// (TestPassedRequestAllocatesNothing): a stream's filter, its machine
// (stream.Stream.Reset) and its copies of Envoy's maps and chunks are kept
// in the filter table when the stream is destroyed, zeroed (no byte of the
// stream and no engine stays reachable), and serve a later stream; the
// destroyed stream's handle then finds nothing. At most keepSlots idle
// filters are kept, each buffer at most stream.KeepCap bytes. The
// strings of a header copy live as long as their stream, which is why a
// filter is emptied only at destroy, and why nothing of a stream (the
// engine keeps nothing per request) outlives it.
package module
