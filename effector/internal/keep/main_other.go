//go:build !linux

package keep

import (
	"fmt"
	"os"
)

// Main fails outside Linux: the keeper needs the subreaper and /proc.
func Main(args []string) int {
	fmt.Fprintln(os.Stderr, "effector keep: Linux-only (it needs PR_SET_CHILD_SUBREAPER and /proc)")
	return 126
}
