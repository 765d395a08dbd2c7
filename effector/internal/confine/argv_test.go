package confine

import (
	"os"
	"path/filepath"
	"testing"
)

// The small binary is run when it lies beside the Effector, executable;
// otherwise the Effector's own `confine`.
func TestArgv(t *testing.T) {
	dir := t.TempDir()
	self := filepath.Join(dir, "effector")
	small := filepath.Join(dir, Binary)
	if got := Argv(self); len(got) != 2 || got[0] != self || got[1] != "confine" {
		t.Errorf("no small binary: %q", got)
	}
	os.WriteFile(small, []byte("x"), 0o644)
	if got := Argv(self); len(got) != 2 || got[0] != self {
		t.Errorf("a small binary that is not executable: %q", got)
	}
	os.Chmod(small, 0o755)
	if got := Argv(self); len(got) != 1 || got[0] != small {
		t.Errorf("the small binary: %q", got)
	}
	os.Remove(small)
	os.Mkdir(small, 0o755)
	if got := Argv(self); len(got) != 2 {
		t.Errorf("a directory of that name: %q", got)
	}
}
