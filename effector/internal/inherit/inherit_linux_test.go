//go:build linux

package inherit

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// A descriptor opened without close-on-exec is not inherited after
// CloseOnExecAbove(2); before it, it is (so the test can fail).
func TestCloseOnExecAbove(t *testing.T) {
	fd, err := unix.Open("/dev/null", unix.O_RDONLY, 0) // no O_CLOEXEC
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	target := "/proc/self/fd/" + strconv.Itoa(fd)
	inherited := func() bool {
		out, err := exec.Command("/bin/sh", "-c", `[ -e "$0" ] && echo yes || echo no`, target).Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out)) == "yes"
	}
	if !inherited() {
		t.Fatalf("fd %d was not inherited before: the test proves nothing", fd)
	}
	if err := CloseOnExecAbove(2); err != nil {
		t.Fatal(err)
	}
	if inherited() {
		t.Errorf("fd %d is still inherited", fd)
	}
	if _, err := os.Stat("/proc/self/fd/2"); err != nil {
		t.Error(err)
	}
}
