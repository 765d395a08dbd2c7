package landlocktest

import (
	"testing"

	"jr2.dev/boundary/internal/landlock"
)

// Require returns the kernel's Landlock ABI, or skips the test loudly when
// the kernel offers less than min: the test cannot prove anything there.
func Require(t testing.TB, min int) int {
	t.Helper()
	abi, err := landlock.Probe()
	if err != nil {
		t.Skipf("SKIPPED, NOT PROVEN: this kernel has no Landlock: %v", err)
	}
	if abi < min {
		t.Skipf("SKIPPED, NOT PROVEN: this kernel offers Landlock ABI %d, the test needs %d", abi, min)
	}
	return abi
}
