// Package readmewalk is a test: it follows the README's by-hand section
// and its `custodian run` section literally, so that a user who has only
// this repository can run them as pasted. Each shell block
// the README marks with a "<!-- readme-walk: NAME" line just before it
// is run as written, by bash with -e, from a copy of examples/, with the
// built controlplane, custodian and example-upstream first on PATH, in a
// network namespace of its own (only loopback: no network is needed, and
// the default listen addresses are free whatever else runs). The
// core-Envoy block runs after the by-hand block in the same shell, as a
// reader pastes it, with the pinned Envoy the e2e suite finds
// (internal/testkit/envoybin) on PATH as envoy and the module built where `make
// module` puts it; the modes block runs twice in one directory, and once
// more with a run refused, which must fail the block. It also starts an
// Effector from examples/effector.json, so every file of examples/ is
// used by a test.
//
// Invariant: the test asserts outcomes, not output shapes alone — the
// upstream received the value (its fingerprint), the agent's side held
// and saw only the stand-in and scrubbed echoes, no form of a value is in
// any output or in the run's bundle, the bundle verifies — and it leaves
// no file (everything is under t.TempDir) and no process (each block runs
// in a process group of its own, killed when the block ends).
package readmewalk
