package commandkind

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"jr2.dev/boundary/effector/internal/wire"
)

// LookFixed finds one of jr2's own programs in FixedPath, never in the
// PATH the image set, and returns its absolute path.
func LookFixed(name string) (string, error) {
	for _, dir := range strings.Split(FixedPath, ":") {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("no %s in %s", name, FixedPath)
}

// parseHead reads `git ls-remote <repo> HEAD`: "<sha>\tHEAD".
func parseHead(out []byte) (string, error) {
	for _, line := range strings.Split(string(out), "\n") {
		sha, ref, ok := strings.Cut(line, "\t")
		if ok && ref == "HEAD" && wire.ValidSHA(sha) {
			return sha, nil
		}
	}
	return "", errors.New("the worktree has no commit to check out (its HEAD names none)")
}
