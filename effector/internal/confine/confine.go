// Package confine is `effector confine -- ARGV`: it confines itself with
// Landlock and then executes ARGV; nothing runs unconfined.
//
// PLACEHOLDER: being written.
package confine

import (
	"fmt"
	"os"
)

// Main runs `effector confine` with args (the words after "confine") and
// returns the exit code; on success it does not return (execve).
func Main(args []string) int {
	fmt.Fprintln(os.Stderr, "effector confine: not built yet")
	return 126
}
