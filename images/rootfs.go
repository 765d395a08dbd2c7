package images

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// Entry is one file of an image's root: a directory, a regular file or a
// symlink. Never a hardlink: a hardlink in a layer came out mode 0644
// after `ctr images import` in an earlier spike, so a hardlink in a
// Debian package becomes a regular file of its own.
type Entry struct {
	// Name is the path without its leading "/" ("usr/bin/curl").
	Name     string
	Type     byte // tar.TypeDir, tar.TypeReg or tar.TypeSymlink
	Mode     int64
	UID, GID int
	Link     string // a symlink's target, as written
	// A regular file's bytes are Data, or the file at Path on this
	// machine when Path is set.
	Data []byte
	Path string
	// Origin says where the entry comes from: "deb PKG", "source NAME" or
	// "generated".
	Origin string
}

// Epoch is every entry's modification time, so that the same inputs give
// the same layer bytes, hence the same image.
var Epoch = time.Unix(0, 0).UTC()

// Root is a whole root filesystem, by name.
type Root map[string]*Entry

// Add puts e in r, with any parent directory it lacks (0755, root). A
// second entry of the same name must be the same: a directory of the same
// mode and owner is kept once, anything else is a conflict.
func (r Root) Add(e *Entry) error {
	if e.Name == "" || path.Clean(e.Name) != e.Name || strings.HasPrefix(e.Name, "/") || strings.HasPrefix(e.Name, "../") {
		return fmt.Errorf("%s: entry %q: not a clean relative path", e.Origin, e.Name)
	}
	if d := path.Dir(e.Name); d != "." {
		if p, ok := r[d]; !ok {
			if err := r.Add(&Entry{Name: d, Type: tar.TypeDir, Mode: 0o755, Origin: e.Origin}); err != nil {
				return err
			}
		} else if p.Type != tar.TypeDir {
			return fmt.Errorf("%s: %s: its parent %s is not a directory (from %s)", e.Origin, e.Name, d, p.Origin)
		}
	}
	old, ok := r[e.Name]
	if !ok {
		r[e.Name] = e
		return nil
	}
	if old.Type == tar.TypeDir && e.Type == tar.TypeDir {
		if old.Mode != e.Mode || old.UID != e.UID || old.GID != e.GID {
			return fmt.Errorf("%s: directory /%s is %o %d:%d, and %o %d:%d in %s", e.Origin, e.Name, e.Mode, e.UID, e.GID, old.Mode, old.UID, old.GID, old.Origin)
		}
		return nil
	}
	if old.Type == e.Type && old.Mode == e.Mode && old.Link == e.Link && old.Path == "" && e.Path == "" && bytes.Equal(old.Data, e.Data) {
		return nil
	}
	return fmt.Errorf("%s: /%s is also in %s, and not the same", e.Origin, e.Name, old.Origin)
}

// Names are r's names in the order a layer holds them: sorted, so every
// directory comes before what is in it.
func (r Root) Names() []string {
	names := make([]string, 0, len(r))
	for n := range r {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// WriteTar writes r as one layer: every entry at Epoch, no user or group
// names, directories named with a trailing "/".
func (r Root) WriteTar(w io.Writer) error {
	tw := tar.NewWriter(w)
	for _, n := range r.Names() {
		e := r[n]
		h := &tar.Header{Typeflag: e.Type, Name: n, Mode: e.Mode, Uid: e.UID, Gid: e.GID, ModTime: Epoch, Linkname: e.Link}
		var body io.Reader
		switch e.Type {
		case tar.TypeDir:
			h.Name += "/"
		case tar.TypeReg:
			if e.Path == "" {
				h.Size, body = int64(len(e.Data)), bytes.NewReader(e.Data)
				break
			}
			f, err := os.Open(e.Path)
			if err != nil {
				return err
			}
			defer f.Close()
			st, err := f.Stat()
			if err != nil {
				return err
			}
			h.Size, body = st.Size(), f
		}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("/%s: %w", n, err)
		}
		if body != nil {
			if n, err := io.Copy(tw, body); err != nil || n != h.Size {
				return fmt.Errorf("/%s: wrote %d of %d bytes: %v", e.Name, n, h.Size, err)
			}
		}
	}
	return tw.Close()
}

// What of a Debian package is not copied: the documentation, manual pages,
// info files, translations, lintian overrides and menu entries, none of
// which a container runs. Each package's copyright file stays (and a
// documentation directory that is a symlink to another package's, which
// holds it), as distroless keeps them.
var dropped = []string{"usr/share/doc/", "usr/share/man/", "usr/share/info/", "usr/share/locale/", "usr/share/lintian/", "usr/share/menu/"}

func keep(e *Entry) bool {
	for _, p := range dropped {
		if e.Name+"/" == p || strings.HasPrefix(e.Name, p) {
			rest, doc := strings.CutPrefix(e.Name, "usr/share/doc/")
			parts := strings.Split(rest, "/")
			return doc && (len(parts) == 2 && parts[1] == "copyright" && e.Type == tar.TypeReg ||
				len(parts) == 1 && e.Type == tar.TypeSymlink)
		}
	}
	return true
}

// ReadDeb reads the files of a Debian package (`dpkg-deb --fsys-tarfile`:
// the files dpkg would unpack, not its maintainer scripts) that an image
// keeps. A hardlink becomes a regular file with its target's bytes.
func ReadDeb(file, pkg string) ([]*Entry, error) {
	cmd := exec.Command("dpkg-deb", "--fsys-tarfile", file)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("dpkg-deb: %w (dpkg-deb is Debian's dpkg package)", err)
	}
	entries, rerr := readTar(out, "deb "+pkg)
	_, _ = io.Copy(io.Discard, out)
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("dpkg-deb --fsys-tarfile %s: %v: %s", file, err, strings.TrimSpace(stderr.String()))
	}
	if rerr != nil {
		return nil, fmt.Errorf("%s: %w", file, rerr)
	}
	return entries, nil
}

func readTar(r io.Reader, origin string) ([]*Entry, error) {
	tr := tar.NewReader(r)
	data := map[string][]byte{}
	var out []*Entry
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		name := path.Clean(strings.TrimPrefix(h.Name, "./"))
		if name == "." {
			continue
		}
		// The permission, setuid, setgid and sticky bits.
		e := &Entry{Name: name, Mode: h.Mode & 0o7777, UID: h.Uid, GID: h.Gid, Origin: origin}
		switch h.Typeflag {
		case tar.TypeDir:
			e.Type = tar.TypeDir
		case tar.TypeSymlink:
			e.Type, e.Link = tar.TypeSymlink, h.Linkname
		case tar.TypeReg:
			b, err := io.ReadAll(tr)
			if err != nil {
				return nil, err
			}
			e.Type, e.Data = tar.TypeReg, b
			data[name] = b
		case tar.TypeLink:
			b, ok := data[path.Clean(strings.TrimPrefix(h.Linkname, "./"))]
			if !ok {
				return nil, fmt.Errorf("hardlink %s to %s, which is not an earlier file", name, h.Linkname)
			}
			e.Type, e.Data = tar.TypeReg, b
		default:
			return nil, fmt.Errorf("%s: entry of type %q, which an image here does not hold", name, h.Typeflag)
		}
		if keep(e) {
			out = append(out, e)
		}
	}
}

// Base is the root an image's Debian packages and users make: every kept
// file of each package (debs maps a name to its .deb), /etc/passwd and
// /etc/group with the image's users, each user's home, /etc/nsswitch.conf,
// and, with ca-certificates, the bundle update-ca-certificates would write.
func (d *Description) Base(img *Image, debs map[string]string) (Root, error) {
	r := Root{}
	for _, p := range img.Debs {
		file, ok := debs[p]
		if !ok {
			return nil, fmt.Errorf("image %s: no .deb for package %s", img.Name, p)
		}
		entries, err := ReadDeb(file, p)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if err := r.Add(e); err != nil {
				return nil, err
			}
		}
	}
	if len(img.Users) > 0 {
		var passwd, group strings.Builder
		for _, name := range img.Users {
			u, _ := d.User(name)
			fmt.Fprintf(&passwd, "%s:x:%d:%d:%s:%s:%s\n", u.Name, u.UID, u.UID, u.Name, u.Home, u.Shell)
			fmt.Fprintf(&group, "%s:x:%d:\n", u.Name, u.UID)
			if _, ok := r[u.Home[1:]]; !ok && u.Home != "/nonexistent" {
				if err := r.Add(&Entry{Name: u.Home[1:], Type: tar.TypeDir, Mode: 0o700, UID: u.UID, GID: u.UID, Origin: "generated"}); err != nil {
					return nil, err
				}
			}
		}
		for _, f := range []struct{ name, body string }{
			{"etc/passwd", passwd.String()},
			{"etc/group", group.String()},
			{"etc/nsswitch.conf", NSSwitch},
		} {
			if err := r.Add(&Entry{Name: f.name, Type: tar.TypeReg, Mode: 0o644, Data: []byte(f.body), Origin: "generated"}); err != nil {
				return nil, err
			}
		}
	}
	if slices.Contains(img.Debs, "ca-certificates") {
		b, err := caBundle(r)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", img.Name, err)
		}
		if err := r.Add(&Entry{Name: CABundle[1:], Type: tar.TypeReg, Mode: 0o644, Data: b, Origin: "generated"}); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// NSSwitch is /etc/nsswitch.conf: users, groups and hosts from files,
// then hosts from DNS, as distroless has it.
const NSSwitch = `passwd:   files
group:    files
shadow:   files
hosts:    files dns
networks: files
protocols: files
services: files
`

// CABundle is where ca-certificates' update-ca-certificates writes the
// bundle curl, OpenSSL and Go read.
const CABundle = "/etc/ssl/certs/ca-certificates.crt"

// caBundle concatenates every certificate ca-certificates ships, in the
// order of the /etc/ca-certificates.conf its postinst writes (sorted), each
// ended by a newline, as update-ca-certificates does with every
// certificate enabled.
func caBundle(r Root) ([]byte, error) {
	var b bytes.Buffer
	for _, n := range r.Names() {
		e := r[n]
		if !strings.HasPrefix(n, "usr/share/ca-certificates/") || !strings.HasSuffix(n, ".crt") || e.Type != tar.TypeReg {
			continue
		}
		b.Write(e.Data)
		if len(e.Data) > 0 && e.Data[len(e.Data)-1] != '\n' {
			b.WriteByte('\n')
		}
	}
	if b.Len() == 0 {
		return nil, errors.New("ca-certificates has no certificate under /usr/share/ca-certificates")
	}
	return b.Bytes(), nil
}

// Added is the root an image's files make: each source at its path.
// sources maps a source's name to its file (or, for a tree, its
// directory) on this machine. A regular file is 0755 if its owner may run
// it, else 0644; everything is root's.
func (d *Description) Added(img *Image, sources map[string]string) (Root, error) {
	r := Root{}
	for _, f := range img.Files {
		src, ok := sources[f.Source]
		if !ok {
			return nil, fmt.Errorf("image %s: %s: no file for source %s", img.Name, f.Path, f.Source)
		}
		origin := "source " + f.Source
		s := d.Sources[f.Source]
		if s.Tree == "" {
			e, err := regular(f.Path[1:], src, origin)
			if err != nil {
				return nil, err
			}
			if err := r.Add(e); err != nil {
				return nil, err
			}
			continue
		}
		for _, nm := range s.Names {
			err := filepath.WalkDir(filepath.Join(src, nm), func(p string, de fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				rel, _ := filepath.Rel(src, p)
				name := path.Join(f.Path[1:], filepath.ToSlash(rel))
				switch {
				case de.IsDir():
					return r.Add(&Entry{Name: name, Type: tar.TypeDir, Mode: 0o755, Origin: origin})
				case de.Type().IsRegular():
					e, err := regular(name, p, origin)
					if err != nil {
						return err
					}
					return r.Add(e)
				}
				return fmt.Errorf("%s: %s is neither a directory nor a regular file; a tree source holds only those", origin, p)
			})
			if err != nil {
				return nil, err
			}
		}
	}
	return r, nil
}

func regular(name, file, origin string) (*Entry, error) {
	st, err := os.Stat(file)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %s is not a regular file", origin, file)
	}
	mode := int64(0o644)
	if st.Mode()&0o100 != 0 {
		mode = 0o755
	}
	return &Entry{Name: name, Type: tar.TypeReg, Mode: mode, Path: file, Origin: origin}, nil
}
