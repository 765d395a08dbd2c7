package valuedirtest

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
)

// tsName is the timestamped directory: ..<UTC time>.<os.MkdirTemp's
// random suffix>.
var tsName = regexp.MustCompile(`^\.\.\d{4}_\d{2}_\d{2}_\d{2}_\d{2}_\d{2}\.\d+$`)

// entries are dir's names, sorted, the timestamped directory as "..TS".
func entries(t *testing.T, dir string) string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, de := range des {
		n := de.Name()
		if tsName.MatchString(n) {
			n = "..TS"
		}
		out = append(out, n)
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

func readlink(t *testing.T, p string) string {
	t.Helper()
	l, err := os.Readlink(p)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func lstat(t *testing.T, p string) os.FileInfo {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi
}

// TestWriteIsTheAtomicWritersLayout holds Write to the layout and the
// update atomic_writer.go documents: ..data -> a relative ..<timestamp>
// directory (0755 under any umask) holding each file at Mode, each name a
// link ..data/<name>; an update makes a new directory, renames ..data onto
// it, keeps a kept name's link, removes a name no longer written and the
// old directory; the same bytes again move nothing, yet a visible link
// that went missing is made again, as the kubelet does so a lost link does
// not stay lost while the data is current.
func TestWriteIsTheAtomicWritersLayout(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	dir := t.TempDir()
	Write(t, dir, map[string]string{"KEY": "one", "GONE": "x"})
	if got, want := entries(t, dir), "..TS ..data GONE KEY"; got != want {
		t.Fatalf("entries %q, want %q", got, want)
	}
	first := readlink(t, filepath.Join(dir, DataLink))
	if !tsName.MatchString(first) {
		t.Fatalf("..data -> %q, want a relative ..<timestamp> name", first)
	}
	if m := lstat(t, filepath.Join(dir, first)).Mode(); m != os.ModeDir|0o755 {
		t.Errorf("the timestamped directory's mode %v, want drwxr-xr-x", m)
	}
	if m := lstat(t, filepath.Join(dir, first, "KEY")).Mode(); m != Mode {
		t.Errorf("KEY's mode %v, want %v", m, Mode)
	}
	if l := readlink(t, filepath.Join(dir, "KEY")); l != "..data/KEY" {
		t.Errorf("KEY -> %q, want ..data/KEY", l)
	}
	keyLink := lstat(t, filepath.Join(dir, "KEY"))

	Write(t, dir, map[string]string{"KEY": "two", "NEW": "n"})
	second := readlink(t, filepath.Join(dir, DataLink))
	if second == first || !tsName.MatchString(second) {
		t.Fatalf("..data -> %q after the update, was %q; want a new timestamped directory", second, first)
	}
	if got, want := entries(t, dir), "..TS ..data KEY NEW"; got != want {
		t.Errorf("entries after the update %q, want %q (the old directory and GONE removed)", got, want)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "KEY")); err != nil || string(b) != "two" {
		t.Errorf("KEY reads %q, %v after the update; want two", b, err)
	}
	if !os.SameFile(lstat(t, filepath.Join(dir, "KEY")), keyLink) {
		t.Error("KEY's link was replaced; the kubelet keeps an existing link")
	}

	if err := os.Remove(filepath.Join(dir, "NEW")); err != nil {
		t.Fatal(err)
	}
	Write(t, dir, map[string]string{"KEY": "two", "NEW": "n"})
	if third := readlink(t, filepath.Join(dir, DataLink)); third != second {
		t.Errorf("..data moved %q -> %q for the same bytes", second, third)
	}
	if l := readlink(t, filepath.Join(dir, "NEW")); l != "..data/NEW" {
		t.Errorf("NEW -> %q, want ..data/NEW made again", l)
	}
}

// TestWriteRefusesNames: the writer's path rule, for a flat directory of
// values; a refused payload writes nothing.
func TestWriteRefusesNames(t *testing.T) {
	for _, n := range []string{"", "..data", "..x", "a/b", strings.Repeat("n", 256)} {
		dir := t.TempDir()
		if err := write(dir, map[string]string{n: "v"}); err == nil {
			t.Errorf("name %.20q: written, want refused", n)
		}
		if got := entries(t, dir); got != "" {
			t.Errorf("name %.20q: wrote %q", n, got)
		}
	}
}
