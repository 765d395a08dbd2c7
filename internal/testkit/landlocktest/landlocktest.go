// Package landlocktest makes Landlock fail for real, for tests of the
// fail-closed paths. It is imported by tests only.
//
// Invariant: what it installs cannot be undone and applies to the whole
// process and every program it executes, so a test calls it only in a
// subprocess of its own (re-exec the test binary with an env sentinel).
package landlocktest
