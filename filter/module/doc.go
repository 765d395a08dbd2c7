// Package module is the Custodian inside core Envoy: the hooks of Envoy's
// dynamic-module ABI (abi.h), exported by the c-shared custodian-module,
// translated into the stream machine (package filter/stream) and the
// machine's answers translated back into the ABI's callbacks. It decides
// nothing itself; every rule is the machine's and the engine's.
//
// Invariant: Envoy holds numbers, never Go pointers: a config is a
// runtime/cgo handle, a stream a slot of the filter table (filters). Every
// hook recovers every panic: a config hook rejects its config, a stream
// hook fails its stream closed (no mark, the fixed 502 or 500, nothing more
// of it passed on). No hook keeps a view of Envoy's memory past its return:
// header maps and body chunks are copied into the filter's own memory
// before anything reads them (headerCopy), and whatever the module hands
// Envoy (a header, a chunk, a line) Envoy copies before the callback
// returns. No value reaches a log line. A stream's filter and its memory
// are reused, zeroed, by a later stream (moduleFilter, filters).
package module
