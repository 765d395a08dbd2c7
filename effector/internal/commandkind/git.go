package commandkind

import (
	"errors"
	"strings"

	"jr2.dev/boundary/effector/internal/wire"
)

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
