// Package wire is the Effector's wire, by hand: the JSON shapes of a start,
// a state, an error answer and an outcome (docs/effector.md), their strict
// decoders, and the signing lines of a request and of an answer.
//
// Invariant: a decoder here accepts only the pinned shapes. An unknown
// field, a field spelled in another case, a field given twice, a null where
// a value belongs, a wrong type or trailing data is refused with a reason
// that names the field (`http.headers.host: …`). Nothing here reads a
// secret's value: a start names secrets, and only the Effector's kinds turn
// a name into a value.
//
// The golden fixtures in effector/testdata/wire/ are read by this package's
// tests; an Orchestrator in another language implements its side from
// docs/effector.md and those files.
package wire
