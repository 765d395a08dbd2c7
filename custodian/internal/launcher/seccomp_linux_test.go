//go:build linux

package launcher

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestFilterAssembles(t *testing.T) {
	prog, err := assemble(filter())
	if err != nil {
		t.Fatal(err)
	}
	if len(prog) > 255 {
		t.Fatalf("%d instructions: jumps may not reach", len(prog))
	}
	if last := prog[len(prog)-1]; last.K != unix.SECCOMP_RET_KILL_PROCESS {
		t.Errorf("last instruction returns %#x, want KILL_PROCESS", last.K)
	}
	seen := map[uintptr]bool{}
	for _, d := range Denied {
		if seen[d.Nr] {
			t.Errorf("syscall %d listed twice", d.Nr)
		}
		seen[d.Nr] = true
	}
	for _, bad := range [][]insn{
		{jeq(1, "nowhere", ""), ret(0)},
		{at("back", ret(0)), jeq(1, "back", "")},
	} {
		if _, err := assemble(bad); err == nil || !strings.Contains(err.Error(), "bug") {
			t.Errorf("assemble(%v) = %v; want a bug error", bad, err)
		}
	}
}
