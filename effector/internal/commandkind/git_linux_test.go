package commandkind

import (
	"slices"
	"testing"

	"jr2.dev/boundary/effector/internal/gitrun"
)

// TestGitArgv: a git of the checkout is confined (the worktree read, not
// denied; the Effector's other paths denied), then runs by its path with
// gitrun's hardening before the call's own args: the one hardening, not
// one of the kind's.
func TestGitArgv(t *testing.T) {
	r := &runner{k: &Kind{o: Options{Self: "/e", Node: "n", Work: "/w/", Deny: []string{"/w", "/k"}}, git: "/usr/bin/git"}, dir: "/s"}
	argv := r.gitArgv([]string{"status", "--porcelain"})
	i := slices.Index(argv, "--")
	if i < 0 {
		t.Fatalf("no -- in %q", argv)
	}
	want := append(append([]string{"/usr/bin/git"}, gitrun.Hardening()...), "status", "--porcelain")
	if !slices.Equal(argv[i+1:], want) {
		t.Errorf("git's argv = %q\nwant %q", argv[i+1:], want)
	}
	confine := argv[:i]
	has := func(flag, val string) bool {
		for j := 0; j+1 < len(confine); j++ {
			if confine[j] == flag && confine[j+1] == val {
				return true
			}
		}
		return false
	}
	for _, w := range [][2]string{{"--read-tree", "/w"}, {"--scratch", "/s"}, {"--deny", "/k"}, {"--node", "n"}} {
		if !has(w[0], w[1]) {
			t.Errorf("confinement %q lacks %s %s", confine, w[0], w[1])
		}
	}
	if has("--deny", "/w") {
		t.Errorf("the worktree is denied to the git that reads it: %q", confine)
	}
}
