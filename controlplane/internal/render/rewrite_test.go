package render_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"jr2.dev/boundary/controlplane/internal/bootstrap"
	"jr2.dev/boundary/controlplane/internal/render"
)

// stamp is what a write would change about a file: its inode, its mtime
// and its change time (a chmod moves ctime).
type stamp struct {
	ino          uint64
	mtime, ctime int64
	mode         fs.FileMode
}

// stamps is the stamp of DIR itself and of every file and directory under
// it, by slash path relative to DIR ("." for DIR).
func stamps(t *testing.T, dir string) map[string]stamp {
	t.Helper()
	out := map[string]stamp{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		st := info.Sys().(*syscall.Stat_t)
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = stamp{st.Ino, st.Mtim.Nano(), st.Ctim.Nano(), info.Mode()}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// touched lists the paths whose stamp differs, or that one side lacks.
func touched(a, b map[string]stamp) []string {
	var out []string
	for p, s := range a {
		if b[p] != s {
			out = append(out, p)
		}
	}
	for p := range b {
		if _, ok := a[p]; !ok {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// TestReRenderTouchesNothing: rendering a directory again with the same
// inputs writes no file — every inode, mtime and ctime under DIR (DIR's
// own included) stays, nothing is created beside it, and Result.Written is
// empty. A change writes exactly the files it changes: a file whose bytes
// or mode were altered in DIR is put back alone; a new target writes its
// leaf and the files that name it, and every other leaf stays put.
func TestReRenderTouchesNothing(t *testing.T) {
	f := newFixture(t)
	parent := t.TempDir()
	out := filepath.Join(parent, "out")
	m := read(t, filepath.Join(testdata, "manifests", "large.json"))
	first, err := render.Render(f.options(t, m, out))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(first.Written, first.Files) {
		t.Errorf("a fresh render wrote %v, not every file %v", first.Written, first.Files)
	}
	before := stamps(t, out)
	beside := stamps(t, parent)

	again, err := render.Render(f.options(t, m, out))
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Written) != 0 || !slices.Equal(again.Files, first.Files) {
		t.Errorf("a re-render of the same inputs wrote %v", again.Written)
	}
	if d := touched(before, stamps(t, out)); len(d) != 0 {
		t.Errorf("a re-render of the same inputs touched %v", d)
	}
	if d := touched(beside, stamps(t, parent)); len(d) != 0 {
		t.Errorf("a re-render of the same inputs touched %v beside DIR", d)
	}

	// One file's bytes (same size) and another's mode altered in DIR:
	// each is put back, and nothing else is touched.
	envoy := filepath.Join(out, render.EnvoyFile)
	b := read(t, envoy)
	b[len(b)-2] = ' '
	if err := os.WriteFile(envoy, b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, key := bootstrap.LeafFiles("github.com:443")
	if err := os.Chmod(filepath.Join(out, filepath.FromSlash(key)), 0o644); err != nil {
		t.Fatal(err)
	}
	altered := stamps(t, out)
	fixed, err := render.Render(f.options(t, m, out))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{render.EnvoyFile, key}; !slices.Equal(fixed.Written, want) {
		t.Errorf("after altering two files, render wrote %v; want %v", fixed.Written, want)
	}
	now := stamps(t, out)
	for _, p := range touched(altered, now) {
		if p != render.EnvoyFile && p != key && p != "." && p != filepath.ToSlash(filepath.Dir(key)) {
			t.Errorf("putting two files back touched %s", p)
		}
	}
	if now[key].mode.Perm() != 0o600 || !slices.Equal(read(t, envoy), tree(t, out)[render.EnvoyFile]) {
		t.Errorf("key mode %v after the re-render", now[key].mode.Perm())
	}

	// A new bound target (of a secret in x-api-key, so no git helper and
	// harness.env unchanged): its leaf and the two files that name it are
	// written, and the objects that carry them (the pod's ConfigMap, the
	// leaves Secret, the Pod's and the patch's projected items); every
	// other leaf keeps its inode, and jr2-ca is not written.
	m2 := []byte(strings.Replace(string(m), `"hosts": [`, `"hosts": ["new.example.com", `, 1))
	if string(m2) == string(m) {
		t.Fatal("the manifest edit did not apply")
	}
	grown, err := render.Render(f.options(t, m2, out))
	if err != nil {
		t.Fatal(err)
	}
	cert, key2 := bootstrap.LeafFiles("new.example.com:443")
	if want := []string{render.CustodianFile, render.EnvoyFile, cert, key2,
		"kubernetes/configmap-instance-custodian.yaml", "kubernetes/secret-instance-custodian-tls-0.yaml",
		"kubernetes/pod-instance.yaml", "kubernetes-patch/pod-template-instance.yaml"}; !slices.Equal(grown.Written, sorted(want)) {
		t.Errorf("a new target wrote %v; want %v", grown.Written, sorted(want))
	}
	after := stamps(t, out)
	for p, s := range now {
		if strings.HasPrefix(p, "tls/") && p != "tls" && after[p] != s {
			t.Errorf("a new target touched the leaf %s", p)
		}
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
