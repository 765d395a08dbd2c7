//go:build linux

package launcher

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestFilterAssembles(t *testing.T) {
	for _, unixSockets := range []bool{false, true} {
		prog, err := assemble(filter(unixSockets))
		if err != nil {
			t.Fatal(err)
		}
		if len(prog) > 255 {
			t.Fatalf("%d instructions: jumps may not reach", len(prog))
		}
		if last := prog[len(prog)-1]; last.K != unix.SECCOMP_RET_KILL_PROCESS {
			t.Errorf("last instruction returns %#x, want KILL_PROCESS", last.K)
		}
	}
	// The two programs differ by one instruction: AF_UNIX among the
	// families allowed.
	without, with := filter(false), filter(true)
	extra := -1
	for i := range without {
		if without[i] != with[i] {
			extra = i
			break
		}
	}
	if len(with) != len(without)+1 || extra < 0 || with[extra].k != unix.AF_UNIX || with[extra].jt != "allow" {
		t.Errorf("filter(true) is not filter(false) with AF_UNIX allowed:\n%v\n%v", without, with)
	}
	for abi, want := range map[int]bool{2: false, 7: false, 8: false, 9: true} {
		if got := UnixSockets(abi); got != want {
			t.Errorf("UnixSockets(%d) = %v, want %v", abi, got, want)
		}
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
