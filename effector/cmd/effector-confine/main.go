// Command effector-confine is `effector confine` as a binary of its own:
// Landlock, every capability dropped, then execve ARGV. It links only what
// confinement needs, so it starts in about half the time of the whole
// Effector binary, a start every confined command pays; the Effector runs
// it when it lies beside the Effector's own binary, and `effector confine`
// otherwise. The two are one
// code path (effector/internal/confine).
package main

import (
	"os"

	"jr2.dev/boundary/effector/internal/confine"
)

func main() { os.Exit(confine.Main(os.Args[1:])) }
