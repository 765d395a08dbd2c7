package confine

import (
	"os"
	"path/filepath"
)

// Binary is the name of the small confine binary make effector builds
// beside the Effector.
const Binary = "effector-confine"

// Argv is how the Effector at self runs confinement: Binary when it lies
// beside self (a regular, executable file), else `self confine`. Both run
// Main; the small binary only starts sooner.
func Argv(self string) []string {
	small := filepath.Join(filepath.Dir(self), Binary)
	if st, err := os.Stat(small); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
		return []string{small}
	}
	return []string{self, "confine"}
}
