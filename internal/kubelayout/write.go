package kubelayout

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// File is one file of a volume: its bytes and its permission bits.
type File struct {
	Data []byte
	Mode os.FileMode
}

// The names the atomic writer reserves in a volume's directory.
const (
	// DataLink is the symlink to the timestamped directory that holds the
	// current files; every visible name is a symlink through it.
	DataLink = "..data"
	// dataLinkTmp is the new DataLink before the rename that publishes it.
	dataLinkTmp = "..data_tmp"
	// tsLayout is the timestamped directory's name before os.MkdirTemp's
	// random suffix, in UTC.
	tsLayout = "..2006_01_02_15_04_05."
)

// Write lays files out in dir (which must exist) as the kubelet's atomic
// writer does, and is also how the kubelet updates a mounted ConfigMap or
// Secret: calling it again on the same dir rotates the volume's contents.
//
// A first Write, or one whose files differ from the current ones:
//  1. makes a new directory ..<UTC timestamp>.<random> (mode 0755) and
//     writes every file into it with its mode (no umask applies), making
//     the parent directories of a nested path;
//  2. with fsGroup set, gives the whole volume to that group and adds the
//     read-only group bits (the kubelet's SetVolumeOwnership);
//  3. makes the symlink ..data_tmp to the new directory and renames it over
//     ..data — the one atomic step a reader can observe;
//  4. makes each top-level name a symlink ..data/<name> (kept when it
//     already exists), removes visible names no longer in files, and
//     removes the previous timestamped directory.
//
// When the files equal the current ones, nothing is rewritten, but missing
// visible symlinks are still made (kubernetes#121472). A path must be
// relative, hold no ".." element, not begin with "..", and keep to 255
// bytes a name and 4096 in all.
func Write(dir string, files map[string]File, fsGroup *int64) error {
	clean := make(map[string]File, len(files))
	for p, f := range files {
		if err := checkPath(p); err != nil {
			return err
		}
		clean[filepath.Clean(p)] = f
	}
	dataLink := filepath.Join(dir, DataLink)
	oldTS, err := os.Readlink(dataLink)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("kubelayout: read %s: %w", dataLink, err)
	}
	var stale []string
	rewrite := true
	if oldTS != "" {
		old := filepath.Join(dir, oldTS)
		if stale, err = staleNames(old, clean); err != nil {
			return err
		}
		same, err := sameFiles(old, clean)
		if err != nil {
			return err
		}
		if same && len(stale) == 0 {
			rewrite, oldTS = false, ""
		}
	}
	if rewrite {
		ts, err := os.MkdirTemp(dir, time.Now().UTC().Format(tsLayout))
		if err != nil {
			return fmt.Errorf("kubelayout: %w", err)
		}
		if err := os.Chmod(ts, 0o755); err != nil {
			return fmt.Errorf("kubelayout: %w", err)
		}
		if err := writeFiles(ts, clean); err != nil {
			os.RemoveAll(ts)
			return err
		}
		if fsGroup != nil {
			if err := setOwnership(dir, *fsGroup); err != nil {
				os.RemoveAll(ts)
				return err
			}
		}
		tmp := filepath.Join(dir, dataLinkTmp)
		if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
			os.RemoveAll(ts)
			return fmt.Errorf("kubelayout: %w", err)
		}
		if err := os.Rename(tmp, dataLink); err != nil {
			os.Remove(tmp)
			os.RemoveAll(ts)
			return fmt.Errorf("kubelayout: publish %s: %w", dataLink, err)
		}
	}
	for _, name := range topNames(clean) {
		link := filepath.Join(dir, name)
		if _, err := os.Readlink(link); err == nil {
			continue
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("kubelayout: %w", err)
		}
		if err := os.Symlink(filepath.Join(DataLink, name), link); err != nil {
			return fmt.Errorf("kubelayout: %w", err)
		}
		if fsGroup != nil {
			if err := os.Lchown(link, -1, int(*fsGroup)); err != nil {
				return fmt.Errorf("kubelayout: %w", err)
			}
		}
	}
	for _, name := range stale {
		if strings.Contains(name, "/") {
			continue // only the volume's own top-level links are visible
		}
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("kubelayout: %w", err)
		}
	}
	if oldTS != "" {
		if err := os.RemoveAll(filepath.Join(dir, oldTS)); err != nil {
			return fmt.Errorf("kubelayout: %w", err)
		}
	}
	return nil
}

// checkPath is the atomic writer's rule for a file's path in a volume.
func checkPath(p string) error {
	switch {
	case p == "":
		return errors.New("kubelayout: a volume path must not be empty")
	case filepath.IsAbs(p):
		return fmt.Errorf("kubelayout: volume path %q must be relative", p)
	case len(p) > 4096:
		return fmt.Errorf("kubelayout: volume path %q is longer than 4096 bytes", p)
	}
	parts := strings.Split(p, "/")
	for _, part := range parts {
		if part == ".." {
			return fmt.Errorf("kubelayout: volume path %q must not contain '..'", p)
		}
		if len(part) > 255 {
			return fmt.Errorf("kubelayout: volume path %q has a name longer than 255 bytes", p)
		}
	}
	if strings.HasPrefix(parts[0], "..") {
		return fmt.Errorf("kubelayout: volume path %q must not start with '..' (the atomic writer's own names)", p)
	}
	return nil
}

// staleNames are the paths under the old timestamped directory that files
// no longer hold, nor hold beneath.
func staleNames(old string, files map[string]File) ([]string, error) {
	keep := map[string]bool{}
	for p := range files {
		for q := p; q != "." && q != ""; q = filepath.Dir(q) {
			keep[q] = true
		}
	}
	var stale []string
	err := filepath.WalkDir(old, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(old, p)
		if rel != "." && !keep[rel] {
			stale = append(stale, rel)
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("kubelayout: %w", err)
	}
	return stale, nil
}

// sameFiles reports whether every file already has these bytes under old.
func sameFiles(old string, files map[string]File) (bool, error) {
	for p, f := range files {
		b, err := os.ReadFile(filepath.Join(old, p))
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("kubelayout: %w", err)
		}
		if !bytes.Equal(b, f.Data) {
			return false, nil
		}
	}
	return true, nil
}

func writeFiles(ts string, files map[string]File) error {
	for p, f := range files {
		full := filepath.Join(ts, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o777); err != nil {
			return fmt.Errorf("kubelayout: %w", err)
		}
		if err := os.WriteFile(full, f.Data, f.Mode.Perm()); err != nil {
			return fmt.Errorf("kubelayout: %w", err)
		}
		// WriteFile's mode passed through the umask; the volume's does not.
		if err := os.Chmod(full, f.Mode.Perm()); err != nil {
			return fmt.Errorf("kubelayout: %w", err)
		}
	}
	return nil
}

// setOwnership is the kubelet's SetVolumeOwnership for a read-only volume
// (ConfigMap, Secret, projected): every entry goes to group gid; a file
// gains 0440, a directory 0440|0110 and setgid; a symlink keeps its mode.
func setOwnership(dir string, gid int64) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("kubelayout: %w", err)
		}
		if err := os.Lchown(p, -1, int(gid)); err != nil {
			return fmt.Errorf("kubelayout: fsGroup %d: %w", gid, err)
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return fmt.Errorf("kubelayout: %w", err)
		}
		add := os.FileMode(0o440)
		if fi.IsDir() {
			add |= 0o110 | os.ModeSetgid
		}
		if err := os.Chmod(p, fi.Mode()&(os.ModePerm|os.ModeSetgid|os.ModeSticky)|add); err != nil {
			return fmt.Errorf("kubelayout: %w", err)
		}
		return nil
	})
}

// topNames are the first elements of the paths, sorted, once each.
func topNames(files map[string]File) []string {
	seen := map[string]bool{}
	var out []string
	for p := range files {
		name, _, _ := strings.Cut(p, "/")
		if !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}
