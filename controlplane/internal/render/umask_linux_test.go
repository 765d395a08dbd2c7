package render_test

import (
	"maps"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"jr2.dev/boundary/controlplane/internal/render"
)

// TestModesWhateverTheUmask: under a umask that takes bits of render's
// modes (027 takes the other-read of 0644, 077 the group's too), every
// file has the mode it has under 022, and a re-render writes nothing. Not
// parallel: the umask is the whole process's.
func TestModesWhateverTheUmask(t *testing.T) {
	f := newFixture(t)
	m := read(t, filepath.Join(testdata, "manifests", "large.json"))
	modes := func(umask int) (map[string]string, string) {
		old := unix.Umask(umask)
		defer unix.Umask(old)
		out := filepath.Join(t.TempDir(), "out")
		if _, err := render.Render(f.options(t, m, out)); err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for p, s := range stamps(t, out) {
			if s.mode.IsRegular() {
				got[p] = s.mode.Perm().String()
			}
		}
		return got, out
	}
	want, _ := modes(0o022)
	if len(want) == 0 {
		t.Fatal("render wrote no file")
	}
	for _, umask := range []int{0o027, 0o077} {
		got, out := modes(umask)
		for _, p := range slices.Sorted(maps.Keys(want)) {
			if got[p] != want[p] {
				t.Errorf("umask %03o: %s has mode %s, under 022 %s", umask, p, got[p], want[p])
			}
		}
		old := unix.Umask(umask)
		again, err := render.Render(f.options(t, m, out))
		unix.Umask(old)
		if err != nil {
			t.Fatal(err)
		}
		if len(again.Written) != 0 {
			t.Errorf("umask %03o: a re-render of the same inputs wrote %v", umask, again.Written)
		}
	}
}
