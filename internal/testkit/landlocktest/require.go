package landlocktest

import (
	"os"
	"testing"

	"jr2.dev/boundary/internal/landlock"
)

// Require returns the kernel's Landlock ABI, or skips the test loudly when
// the kernel offers less than min: the test cannot prove anything there.
// With JR2_REQUIRE_ALL=1 it fails instead.
func Require(t testing.TB, min int) int {
	t.Helper()
	notRun := t.Skipf
	if os.Getenv("JR2_REQUIRE_ALL") == "1" {
		notRun = t.Fatalf // in CI (.ci/run) a kernel without it fails, not skips
	}
	abi, err := landlock.Probe()
	if err != nil {
		notRun("SKIPPED, NOT PROVEN: this kernel has no Landlock: %v", err)
	}
	if abi < min {
		notRun("SKIPPED, NOT PROVEN: this kernel offers Landlock ABI %d, the test needs %d", abi, min)
	}
	return abi
}
