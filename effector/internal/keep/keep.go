// Package keep is `effector keep`: a keeper between the Effector and the
// confiner that outlives nothing its child left behind.
//
// PLACEHOLDER: being written.
package keep

import (
	"fmt"
	"os"
)

// Main runs `effector keep` with args (the words after "keep") and returns
// the exit code.
func Main(args []string) int {
	fmt.Fprintln(os.Stderr, "effector keep: not built yet")
	return 126
}
