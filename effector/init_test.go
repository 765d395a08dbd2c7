package main

import (
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestInitAllocatesLittle: starting any effector process (here `effector
// confine`, which runs for every command) runs the packages' init, and no
// init of the project's own packages allocates more than a few hundred
// times — no regular expression compiled, no table built, before the
// process does its work. A count, read from the runtime's init trace.
func TestInitAllocatesLittle(t *testing.T) {
	cmd := exec.Command(binary, "confine", "--help")
	cmd.Env = []string{"GODEBUG=inittrace=1"}
	out, _ := cmd.CombinedOutput() // --help exits 2; the trace is what counts
	line := regexp.MustCompile(`(?m)^init (jr2\.dev/\S+) @\S+ ms, \S+ ms clock, (\d+) bytes, (\d+) allocs$`)
	found := 0
	for _, m := range line.FindAllStringSubmatch(string(out), -1) {
		found++
		allocs, _ := strconv.Atoi(m[3])
		if allocs > 300 {
			t.Errorf("init of %s: %s allocations, %s bytes (want at most 300)", m[1], m[3], m[2])
		}
	}
	if found == 0 || !strings.Contains(string(out), "init jr2.dev/boundary/effector/internal/wire ") {
		t.Fatalf("no init trace of the project's packages:\n%s", out)
	}
}
