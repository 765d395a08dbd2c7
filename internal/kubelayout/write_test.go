package kubelayout

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// tsName is the atomic writer's timestamped directory: ..<UTC time>.<the
// random suffix os.MkdirTemp adds>.
var tsName = regexp.MustCompile(`^\.\.\d{4}_\d{2}_\d{2}_\d{2}_\d{2}_\d{2}\.\d+$`)

// entries lists dir's names, sorted, with the timestamped directory shown
// as "..TS".
func entries(t *testing.T, dir string) []string {
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
	return out
}

func readlink(t *testing.T, p string) string {
	t.Helper()
	l, err := os.Readlink(p)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func mode(t *testing.T, p string) os.FileMode {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode()
}

// TestWriteLayout holds Write to the layout atomic_writer.go documents:
// for podName, user/labels and k8s/annotations, the visible names are
// podName -> ..data/podName, user -> ..data/user, k8s -> ..data/k8s, and
// ..data -> ..<timestamp>, a 0755 directory holding the files at their
// modes, whatever the umask.
func TestWriteLayout(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	dir := t.TempDir()
	files := map[string]File{
		"podName":         {Data: []byte("pod-a"), Mode: 0o644},
		"user/labels":     {Data: []byte("a=b"), Mode: 0o400},
		"k8s/annotations": {Data: []byte("c=d"), Mode: 0o440},
	}
	if err := Write(dir, files, nil); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(entries(t, dir), " "), "..TS ..data k8s podName user"; got != want {
		t.Fatalf("entries: %s, want %s", got, want)
	}
	ts := readlink(t, filepath.Join(dir, DataLink))
	if !tsName.MatchString(ts) || filepath.IsAbs(ts) {
		t.Fatalf("..data -> %q, want a relative ..<timestamp> name", ts)
	}
	if m := mode(t, filepath.Join(dir, ts)); m != os.ModeDir|0o755 {
		t.Errorf("timestamped directory mode %v, want drwxr-xr-x", m)
	}
	for _, name := range []string{"podName", "user", "k8s"} {
		if l := readlink(t, filepath.Join(dir, name)); l != filepath.Join(DataLink, name) {
			t.Errorf("%s -> %q, want ..data/%s", name, l, name)
		}
	}
	for p, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil || string(b) != string(f.Data) {
			t.Errorf("%s through the links: %q, %v; want %q", p, b, err, f.Data)
		}
		if m := mode(t, filepath.Join(dir, ts, p)); m != f.Mode {
			t.Errorf("%s: mode %v, want %v", p, m, f.Mode)
		}
	}
}

// TestWriteRotate: writing new contents is the kubelet's update — a new
// timestamped directory, ..data renamed onto it, the old directory and
// the names no longer projected gone, a kept name's link untouched.
func TestWriteRotate(t *testing.T) {
	dir := t.TempDir()
	if err := Write(dir, map[string]File{"KEY": {Data: []byte("one"), Mode: 0o400}, "gone": {Data: []byte("x"), Mode: 0o644}}, nil); err != nil {
		t.Fatal(err)
	}
	before := readlink(t, filepath.Join(dir, DataLink))
	keyLink, err := os.Lstat(filepath.Join(dir, "KEY"))
	if err != nil {
		t.Fatal(err)
	}
	if err := Write(dir, map[string]File{"KEY": {Data: []byte("two"), Mode: 0o400}, "new/file": {Data: []byte("n"), Mode: 0o644}}, nil); err != nil {
		t.Fatal(err)
	}
	after := readlink(t, filepath.Join(dir, DataLink))
	if after == before || !tsName.MatchString(after) {
		t.Fatalf("..data -> %q after the update, was %q: want a new timestamped directory", after, before)
	}
	if got, want := strings.Join(entries(t, dir), " "), "..TS ..data KEY new"; got != want {
		t.Errorf("entries after the update: %s, want %s (the old directory and gone removed)", got, want)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "KEY")); string(b) != "two" {
		t.Errorf("KEY reads %q after the update, want two", b)
	}
	if fi, err := os.Lstat(filepath.Join(dir, "KEY")); err != nil || !os.SameFile(fi, keyLink) {
		t.Errorf("KEY's link was replaced (%v); the kubelet keeps an existing link", err)
	}
}

// TestWriteUnchanged: the same contents write nothing new, but a visible
// link that went missing is made again (kubernetes#121472).
func TestWriteUnchanged(t *testing.T) {
	dir := t.TempDir()
	files := map[string]File{"a": {Data: []byte("1"), Mode: 0o644}, "b": {Data: []byte("2"), Mode: 0o644}}
	if err := Write(dir, files, nil); err != nil {
		t.Fatal(err)
	}
	before := readlink(t, filepath.Join(dir, DataLink))
	if err := os.Remove(filepath.Join(dir, "b")); err != nil {
		t.Fatal(err)
	}
	if err := Write(dir, files, nil); err != nil {
		t.Fatal(err)
	}
	if after := readlink(t, filepath.Join(dir, DataLink)); after != before {
		t.Errorf("..data moved %q -> %q for unchanged contents", before, after)
	}
	if l := readlink(t, filepath.Join(dir, "b")); l != "..data/b" {
		t.Errorf("b -> %q, want ..data/b again", l)
	}
}

// TestWriteRefusesPaths holds the atomic writer's path rule; a refused
// payload writes nothing.
func TestWriteRefusesPaths(t *testing.T) {
	for _, tc := range []struct{ path, want string }{
		{"", "must not be empty"},
		{"/etc/passwd", "must be relative"},
		{"a/../../b", "must not contain '..'"},
		{"..data", "must not start with '..'"},
		{"..x/y", "must not start with '..'"},
		{strings.Repeat("n", 256), "longer than 255"},
		{strings.Repeat("d/", 2049), "longer than 4096"},
	} {
		dir := t.TempDir()
		err := Write(dir, map[string]File{tc.path: {Data: []byte("v"), Mode: 0o644}}, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("path %.20q: %v, want an error with %q", tc.path, err, tc.want)
		}
		if got := entries(t, dir); len(got) != 0 {
			t.Errorf("path %.20q: wrote %v", tc.path, got)
		}
	}
}

// TestWriteFSGroup: with the pod's fsGroup, every entry goes to the group,
// a file gains 0440 (a Secret item at 0400 becomes 0440), a directory
// 0550 and setgid, as SetVolumeOwnership does for a read-only volume.
func TestWriteFSGroup(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	gid := int64(os.Getgid())
	if os.Getuid() == 0 {
		gid = 4242 // root may give any group; others only their own
	}
	if err := Write(dir, map[string]File{"KEY": {Data: []byte("v"), Mode: 0o400}, "d/f": {Data: []byte("w"), Mode: 0o600}}, &gid); err != nil {
		t.Fatal(err)
	}
	ts := readlink(t, filepath.Join(dir, DataLink))
	for _, c := range []struct {
		path string
		want os.FileMode
	}{
		{".", os.ModeDir | os.ModeSticky | os.ModeSetgid | 0o777},
		{ts, os.ModeDir | os.ModeSetgid | 0o755},
		{filepath.Join(ts, "KEY"), 0o440},
		{filepath.Join(ts, "d"), os.ModeDir | os.ModeSetgid | 0o755}, // made under the umask, as the kubelet's
		{filepath.Join(ts, "d/f"), 0o640},
		{"KEY", os.ModeSymlink | 0o777},
	} {
		p := filepath.Join(dir, c.path)
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != c.want {
			t.Errorf("%s: mode %v, want %v", c.path, fi.Mode(), c.want)
		}
		if g := fi.Sys().(*syscall.Stat_t).Gid; int64(g) != gid {
			t.Errorf("%s: group %d, want the fsGroup %d", c.path, g, gid)
		}
	}
}

// TestWriteNeverMixes: a reader that resolves ..data once and reads every
// file from that directory sees one whole set or, when a later rotation
// removed the directory it resolved, no file — never files of two sets.
// That is what the rename over ..data buys a consumer that follows it.
func TestWriteNeverMixes(t *testing.T) {
	dir := t.TempDir()
	set := func(v string) map[string]File {
		return map[string]File{"a": {Data: []byte(v), Mode: 0o400}, "b/c": {Data: []byte(v), Mode: 0o400}}
	}
	if err := Write(dir, set("0"), nil); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	mixed := make(chan string, 1)
	go func() {
		defer close(mixed)
		for {
			select {
			case <-done:
				return
			default:
			}
			ts, err := os.Readlink(filepath.Join(dir, DataLink))
			if err != nil {
				mixed <- "..data unreadable: " + err.Error()
				return
			}
			a, errA := os.ReadFile(filepath.Join(dir, ts, "a"))
			c, errC := os.ReadFile(filepath.Join(dir, ts, "b/c"))
			if errA == nil && errC == nil && string(a) != string(c) {
				mixed <- "a=" + string(a) + " b/c=" + string(c)
				return
			}
		}
	}()
	for i := 1; i <= 200; i++ {
		if err := Write(dir, set(strconv.Itoa(i)), nil); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	if m, ok := <-mixed; ok {
		t.Fatalf("a reader saw %s", m)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "b", "c")); string(b) != "200" {
		t.Errorf("b/c through the links: %q, want the last set's", b)
	}
}
