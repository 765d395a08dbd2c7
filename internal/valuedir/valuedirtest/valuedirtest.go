// Package valuedirtest updates a value directory on disk the way the
// kubelet's atomic writer updates a mounted Secret, so the watchers of
// package valuedir (the engine's Live, the Effector's secrets) can be held,
// fast and under -race, to following a rotation while requests run.
//
// Invariant: Write is the kubelet's AtomicWriter.Write, step for step on
// disk, for a payload of top-level files at mode 0400, and its own test
// holds it to those steps; it is no more (no Pod, no volume kinds, no
// projection rules). Why it stays beside the node tests
// (internal/testkit/nodetest), which run the real kubelet: a node takes a
// minute and runs one at a time, while the watchers' consistency under
// many rotations and many requests is a property to check on every
// `go test`, with the race detector.
package valuedirtest

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// The atomic writer's own names in a volume's directory.
const (
	// DataLink is the symlink to the timestamped directory of the current
	// files; every visible name is a symlink through it.
	DataLink = "..data"
	// dataLinkTmp is the new DataLink before the rename that publishes it.
	dataLinkTmp = "..data_tmp"
	// tsLayout is the timestamped directory's name before os.MkdirTemp's
	// random suffix, in UTC.
	tsLayout = "..2006_01_02_15_04_05."
)

// Mode is each file's mode: render's defaultMode for a values volume.
const Mode os.FileMode = 0o400

// Write lays files (name to bytes) out in dir, which must exist, as the
// kubelet's atomic writer does; calling it again on dir is the kubelet's
// update of the mounted Secret. It fails t on any error.
//
// It is the kubelet's AtomicWriter.Write (k8s.io/kubernetes
// pkg/volume/util/atomic_writer.go, v1.37.2, the release the node tests
// run) for a payload of top-level files, one per value, each at mode 0400:
// the mode render gives the Custodian's values volume and the Effector's
// secrets volume (defaultMode). Its steps are that file's, numbered as it
// numbers them:
//
//  1. the payload is checked: a name is not empty, holds no '/', does not
//     begin with ".." and has at most 255 bytes;
//  2. the current timestamped directory is read from the symlink ..data;
//  3. the names it holds that the payload no longer holds are noted;
//  4. when every file already has its bytes and none is to go, nothing is
//     written and ..data stays; only step 10 runs;
//  5. a new directory ..<UTC time 2006_01_02_15_04_05>.<random> is made,
//     mode 0755 whatever the umask;
//  6. each file is written into it and chmod-ed to its mode;
//  7. (setPerms: the pod's fsGroup, which these tests do not give);
//  8. the symlink ..data_tmp is made to the new directory's name;
//  9. ..data_tmp is renamed over ..data — the one atomic step a reader
//     sees;
//  10. each name without a visible entry gets the symlink ..data/<name>
//     (an existing one is kept);
//  11. the visible names noted in step 3 are removed;
//  12. the previous timestamped directory is removed.
func Write(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	if err := write(dir, files); err != nil {
		t.Fatalf("valuedirtest: %s: %v", dir, err)
	}
}

func write(dir string, files map[string]string) error {
	names := make([]string, 0, len(files))
	for n := range files { // (1)
		if n == "" || strings.Contains(n, "/") || strings.HasPrefix(n, "..") || len(n) > 255 {
			return errors.New("a value's name must be one path element of at most 255 bytes, not beginning with '..'")
		}
		names = append(names, n)
	}
	sort.Strings(names)
	dataLink := filepath.Join(dir, DataLink)
	oldTS, err := os.Readlink(dataLink) // (2)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	var stale []string
	rewrite := true
	if oldTS != "" {
		old := filepath.Join(dir, oldTS)
		des, err := os.ReadDir(old) // (3)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		for _, de := range des {
			if _, ok := files[de.Name()]; !ok {
				stale = append(stale, de.Name())
			}
		}
		same := true // (4)
		for _, n := range names {
			b, err := os.ReadFile(filepath.Join(old, n))
			if errors.Is(err, fs.ErrNotExist) {
				same = false
				break
			}
			if err != nil {
				return err
			}
			if !bytes.Equal(b, []byte(files[n])) {
				same = false
				break
			}
		}
		if same && len(stale) == 0 {
			rewrite, oldTS = false, ""
		}
	}
	if rewrite {
		ts, err := os.MkdirTemp(dir, time.Now().UTC().Format(tsLayout)) // (5)
		if err != nil {
			return err
		}
		if err := os.Chmod(ts, 0o755); err != nil {
			return err
		}
		for _, n := range names { // (6)
			p := filepath.Join(ts, n)
			if err := os.WriteFile(p, []byte(files[n]), Mode); err != nil {
				return err
			}
			if err := os.Chmod(p, Mode); err != nil { // WriteFile's mode went through the umask
				return err
			}
		}
		tmp := filepath.Join(dir, dataLinkTmp) // (8)
		if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
			os.RemoveAll(ts)
			return err
		}
		if err := os.Rename(tmp, dataLink); err != nil { // (9)
			os.Remove(tmp)
			os.RemoveAll(ts)
			return err
		}
	}
	for _, n := range names { // (10)
		link := filepath.Join(dir, n)
		if _, err := os.Readlink(link); !errors.Is(err, fs.ErrNotExist) {
			continue // an entry that is there is kept, link or not
		}
		if err := os.Symlink(filepath.Join(DataLink, n), link); err != nil {
			return err
		}
	}
	for _, n := range stale { // (11)
		if err := os.Remove(filepath.Join(dir, n)); err != nil {
			return err
		}
	}
	if oldTS != "" { // (12)
		return os.RemoveAll(filepath.Join(dir, oldTS))
	}
	return nil
}
