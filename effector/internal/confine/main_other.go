//go:build !linux

package confine

import (
	"fmt"
	"os"
)

// Main fails outside Linux: Landlock is Linux-only, and nothing runs
// unconfined.
func Main(args []string) int {
	fmt.Fprintln(os.Stderr, "effector confine: Landlock is Linux-only; nothing ran")
	return 126
}
