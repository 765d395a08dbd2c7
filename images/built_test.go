package images_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"crypto/x509"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"jr2.dev/boundary/images"
	"jr2.dev/boundary/internal/testkit/imagestest"
)

// TestBuiltImages holds every tarball `make images` built to the
// description, read back as a runtime would read it (the docker-archive's
// manifest, config and layers, by the standard library alone):
//
//   - the config: the ref, the user, env, entrypoint, cmd and ports images.json
//     gives, and labels naming each Debian package's version;
//   - the contents: exactly the files of the image's Debian packages, users
//     and sources, each with its bytes, mode and owner, nothing else of this
//     machine; no hardlink, device or whiteout;
//   - the users: /etc/passwd and /etc/group hold exactly the image's users,
//     each home is theirs;
//   - the entrypoint exists and the config's user may run it;
//   - every ELF's interpreter and every library it needs, with every
//     symbol version it needs, is in the image; the static sources are
//     static;
//   - each Debian package's copyright file, and a CA bundle of the
//     package's certificates;
//   - run, as root: each image's programs start in a chroot of its root as
//     the image's user (curl, node with its modules, dash and id in the
//     agent; envoy and custodian; the Effector; pause ends on SIGTERM).
func TestBuiltImages(t *testing.T) {
	found := imagestest.Find(t)
	ix, d, root, err := imagestest.Index()
	if err != nil {
		t.Fatal(err)
	}
	for _, img := range d.Images {
		t.Run(img.Name, func(t *testing.T) {
			built := ix.Images[img.Name]
			r := readArchive(t, found[img.Name].Tar, t.TempDir())
			if want := []string{found[img.Name].Ref}; !slices.Equal(r.tags, want) {
				t.Errorf("RepoTags %q; want %q", r.tags, want)
			}
			if r.configDigest != built.Config || images.Ref(img.Name, strings.TrimPrefix(r.configDigest, "sha256:")) != built.Ref {
				t.Errorf("config %s; the index says %s (%s)", r.configDigest, built.Config, built.Ref)
			}
			want, err := expected(d, &img, ix, root)
			if err != nil {
				t.Fatal(err)
			}
			for _, check := range []struct {
				what     string
				problems []string
			}{
				{"config", checkConfig(&img, r.config, ix)},
				{"contents", checkContents(want, r.fs)},
				{"users", checkUsers(d, &img, r.fs)},
				{"entrypoint", checkEntrypoint(&img, r.fs)},
				{"ELF", checkELFs(d, &img, r.fs)},
				{"Debian", checkDebian(&img, r.fs)},
			} {
				for i, p := range check.problems {
					if i == 20 {
						t.Errorf("%s: … and %d more", check.what, len(check.problems)-i)
						break
					}
					t.Errorf("%s: %s", check.what, p)
				}
			}
			runImage(t, &img, r.fs)
		})
	}
}

// archive is a docker-archive read back, its layers unpacked in order
// into one root.
type archive struct {
	tags         []string
	configDigest string
	config       configFile
	fs           *rootFS
}

type configFile struct {
	OS           string `json:"os"`
	Architecture string `json:"architecture"`
	Config       struct {
		User         string              `json:"User"`
		Env          []string            `json:"Env"`
		Entrypoint   []string            `json:"Entrypoint"`
		Cmd          []string            `json:"Cmd"`
		ExposedPorts map[string]struct{} `json:"ExposedPorts"`
		Labels       map[string]string   `json:"Labels"`
	} `json:"config"`
	RootFS struct {
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
}

// rootFS is an unpacked root: each entry's header as the layer gave it,
// each regular file's sha256, the files themselves under dir.
type rootFS struct {
	dir  string
	hdr  map[string]*tar.Header
	sums map[string]string
}

func readArchive(t *testing.T, file, dir string) *archive {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	blobs := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		blobs[h.Name] = b
	}
	var manifest []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	if err := json.Unmarshal(blobs["manifest.json"], &manifest); err != nil || len(manifest) != 1 {
		t.Fatalf("%s: manifest.json %v: want one image", file, err)
	}
	m := manifest[0]
	a := &archive{tags: m.RepoTags, fs: &rootFS{dir: dir, hdr: map[string]*tar.Header{}, sums: map[string]string{}}}
	cb := blobs[m.Config]
	sum := sha256.Sum256(cb)
	a.configDigest = "sha256:" + hex.EncodeToString(sum[:])
	if err := json.Unmarshal(cb, &a.config); err != nil {
		t.Fatalf("%s: config: %v", file, err)
	}
	if len(a.config.RootFS.DiffIDs) != len(m.Layers) {
		t.Fatalf("%s: %d layers, %d diff_ids", file, len(m.Layers), len(a.config.RootFS.DiffIDs))
	}
	for i, l := range m.Layers {
		zr, err := gzip.NewReader(bytes.NewReader(blobs[l]))
		if err != nil {
			t.Fatalf("layer %s: %v", l, err)
		}
		h := sha256.New()
		if err := a.fs.unpack(io.TeeReader(zr, h)); err != nil {
			t.Fatalf("layer %d (%s): %v", i, l, err)
		}
		if _, err := io.Copy(h, zr); err != nil {
			t.Fatal(err)
		}
		if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != a.config.RootFS.DiffIDs[i] {
			t.Errorf("layer %d's diff ID %s; the config says %s", i, got, a.config.RootFS.DiffIDs[i])
		}
	}
	return a
}

// unpack adds one layer to the root. A layer here holds only directories,
// regular files and symlinks, each under a directory of the root: a
// hardlink (which came out mode 0644 after `ctr images import` in an
// earlier spike), a device, a whiteout or a path through a symlink is
// refused.
func (r *rootFS) unpack(rd io.Reader) error {
	tr := tar.NewReader(rd)
	root := os.Geteuid() == 0
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := strings.TrimSuffix(h.Name, "/")
		if name == "" || path.Clean(name) != name || strings.HasPrefix(name, "/") || strings.HasPrefix(name, "../") || strings.Contains(path.Base(name), ".wh.") {
			return fmt.Errorf("entry %q: not a clean relative path (or a whiteout)", h.Name)
		}
		if p := path.Dir(name); p != "." && (r.hdr[p] == nil || r.hdr[p].Typeflag != tar.TypeDir) {
			return fmt.Errorf("/%s: its parent is not a directory of the image", name)
		}
		disk := filepath.Join(r.dir, filepath.FromSlash(name))
		if old := r.hdr[name]; old != nil && !(old.Typeflag == tar.TypeDir && h.Typeflag == tar.TypeDir) {
			if err := os.RemoveAll(disk); err != nil {
				return err
			}
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(disk, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			f, err := os.OpenFile(disk, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
			if err != nil {
				return err
			}
			s := sha256.New()
			_, err = io.Copy(io.MultiWriter(f, s), tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
			r.sums[name] = hex.EncodeToString(s.Sum(nil))
		case tar.TypeSymlink:
			if err := os.Symlink(h.Linkname, disk); err != nil {
				return err
			}
		case tar.TypeLink:
			return fmt.Errorf("/%s: a hardlink to %s; the images hold none", name, h.Linkname)
		default:
			return fmt.Errorf("/%s: entry of type %q; the images hold directories, regular files and symlinks only", name, h.Typeflag)
		}
		if h.Typeflag != tar.TypeSymlink {
			if err := os.Chmod(disk, os.FileMode(h.Mode&0o777)); err != nil {
				return err
			}
		}
		if root {
			if err := os.Lchown(disk, h.Uid, h.Gid); err != nil {
				return err
			}
		}
		r.hdr[name] = h
	}
}

// resolve follows symlinks inside the image (an absolute target is the
// image's root) and returns the name of what p is, or "" if it is not in
// the image.
func (r *rootFS) resolve(p string) string {
	split := func(p string) []string {
		if p = strings.Trim(path.Clean("/"+p), "/"); p == "" {
			return nil
		}
		return strings.Split(p, "/")
	}
	todo, cur := split(p), ""
	for hops := 0; len(todo) > 0; {
		next := path.Join(cur, todo[0])
		todo = todo[1:]
		h := r.hdr[next]
		if h == nil {
			return ""
		}
		if h.Typeflag != tar.TypeSymlink {
			cur = next
			continue
		}
		if hops++; hops > 40 {
			return ""
		}
		target := h.Linkname
		if !strings.HasPrefix(target, "/") {
			target = path.Join("/", cur, target)
		}
		todo, cur = append(split(target), todo...), ""
	}
	return cur
}

func checkConfig(img *images.Image, c configFile, ix *images.Index) []string {
	var out []string
	if c.OS != "linux" || c.Architecture != "amd64" {
		out = append(out, fmt.Sprintf("platform %s/%s; want linux/amd64", c.OS, c.Architecture))
	}
	cc := c.Config
	if cc.User != img.User || !slices.Equal(cc.Env, img.Env) || !slices.Equal(cc.Entrypoint, img.Entrypoint) || !slices.Equal(cc.Cmd, img.Cmd) {
		out = append(out, fmt.Sprintf("user %q env %q entrypoint %q cmd %q; images.json says %q %q %q %q", cc.User, cc.Env, cc.Entrypoint, cc.Cmd, img.User, img.Env, img.Entrypoint, img.Cmd))
	}
	var ports []string
	for p := range cc.ExposedPorts {
		ports = append(ports, p)
	}
	var want []string
	for _, p := range img.Expose {
		want = append(want, strconv.Itoa(p)+"/tcp")
	}
	if !sameSet(ports, want) {
		out = append(out, fmt.Sprintf("exposed ports %q; images.json says %q", ports, want))
	}
	var debs []string
	for _, p := range img.Debs {
		debs = append(debs, p+"="+ix.Debs[p].Version)
	}
	if got := cc.Labels[images.LabelDebs]; got != strings.Join(debs, " ") {
		out = append(out, fmt.Sprintf("label %s %q; want %q", images.LabelDebs, got, strings.Join(debs, " ")))
	}
	return out
}

// expected is the root an image's Debian packages, users and sources make
// (images.Base, images.Added over it, as the layers are ordered).
func expected(d *images.Description, img *images.Image, ix *images.Index, root string) (images.Root, error) {
	debs := map[string]string{}
	for p, deb := range ix.Debs {
		debs[p] = filepath.Join(images.DebsDir(root), deb.File)
	}
	base, err := d.Base(img, debs)
	if err != nil {
		return nil, err
	}
	added, err := d.Added(img, ix.Sources)
	if err != nil {
		return nil, err
	}
	for n, e := range added {
		base[n] = e
	}
	return base, nil
}

// checkContents: the image's root is exactly want, with the same bytes,
// modes and owners.
func checkContents(want images.Root, fs *rootFS) []string {
	var out []string
	for n, e := range want {
		h := fs.hdr[n]
		if h == nil {
			out = append(out, fmt.Sprintf("/%s (%s) is not in the image", n, e.Origin))
			continue
		}
		if h.Typeflag != e.Type || h.Mode != e.Mode || h.Uid != e.UID || h.Gid != e.GID || h.Linkname != e.Link {
			out = append(out, fmt.Sprintf("/%s: type %q mode %o owner %d:%d link %q; %s gives %q %o %d:%d %q", n, h.Typeflag, h.Mode, h.Uid, h.Gid, h.Linkname, e.Origin, e.Type, e.Mode, e.UID, e.GID, e.Link))
		}
		if e.Type != tar.TypeReg {
			continue
		}
		sum := sha256.Sum256(e.Data)
		ws := hex.EncodeToString(sum[:])
		if e.Path != "" {
			var err error
			if ws, err = images.FileSHA256(e.Path); err != nil {
				out = append(out, err.Error())
			}
		}
		if fs.sums[n] != ws {
			out = append(out, fmt.Sprintf("/%s: sha256 %s; %s is %s (run `make images` after a change)", n, fs.sums[n], e.Origin, ws))
		}
	}
	for n := range fs.hdr {
		if want[n] == nil {
			out = append(out, fmt.Sprintf("/%s is in the image, and none of its Debian packages, users or sources gives it", n))
		}
	}
	slices.Sort(out)
	return out
}

func checkUsers(d *images.Description, img *images.Image, fs *rootFS) []string {
	var out []string
	passwd, group := readText(fs, "etc/passwd"), readText(fs, "etc/group")
	if len(img.Users) == 0 {
		if passwd != "" || group != "" {
			out = append(out, "an image with no users has /etc/passwd or /etc/group")
		}
		return out
	}
	var wantP, wantG []string
	for _, n := range img.Users {
		u, _ := d.User(n)
		wantP = append(wantP, fmt.Sprintf("%s:x:%d:%d:%s:%s:%s", u.Name, u.UID, u.UID, u.Name, u.Home, u.Shell))
		wantG = append(wantG, fmt.Sprintf("%s:x:%d:", u.Name, u.UID))
		if u.Home == "/nonexistent" {
			continue
		}
		h := fs.hdr[fs.resolve(u.Home)]
		if h == nil || h.Typeflag != tar.TypeDir || h.Uid != u.UID || h.Gid != u.UID {
			out = append(out, fmt.Sprintf("user %s's home %s: %v; want a directory of %d:%d", u.Name, u.Home, describe(h), u.UID, u.UID))
		}
	}
	if got := strings.Split(strings.TrimSuffix(passwd, "\n"), "\n"); !slices.Equal(got, wantP) {
		out = append(out, fmt.Sprintf("/etc/passwd %q; want %q", got, wantP))
	}
	if got := strings.Split(strings.TrimSuffix(group, "\n"), "\n"); !slices.Equal(got, wantG) {
		out = append(out, fmt.Sprintf("/etc/group %q; want %q", got, wantG))
	}
	if !strings.Contains(passwd, fmt.Sprintf(":x:%d:", img.UID())) {
		out = append(out, fmt.Sprintf("the config's user %s is not in /etc/passwd", img.User))
	}
	return out
}

// checkEntrypoint: the entrypoint is a regular file the config's user may
// run (its mode's execute bit for its owner, group or others).
func checkEntrypoint(img *images.Image, fs *rootFS) []string {
	h := fs.hdr[fs.resolve(img.Entrypoint[0])]
	if h == nil || h.Typeflag != tar.TypeReg {
		return []string{fmt.Sprintf("%s: %v; want a regular file", img.Entrypoint[0], describe(h))}
	}
	uid := img.UID()
	bit := int64(0o001)
	switch {
	case uid == h.Uid:
		bit = 0o100
	case uid == h.Gid:
		bit = 0o010
	}
	if h.Mode&bit == 0 {
		return []string{fmt.Sprintf("%s: mode %o, owner %d:%d: %s may not run it", img.Entrypoint[0], h.Mode, h.Uid, h.Gid, img.User)}
	}
	return nil
}

// The directories the dynamic loader of Debian 12's glibc searches with no
// /etc/ld.so.cache (the images have none), after an object's RUNPATH.
var libDirs = []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"}

// checkELFs: every ELF file's interpreter is in the image, every library
// it needs is found in its RUNPATH (or RPATH) or the loader's directories,
// and each symbol version it needs is one that library defines. A static
// go source (no cgo) has no interpreter and needs no library.
func checkELFs(d *images.Description, img *images.Image, fs *rootFS) []string {
	var out []string
	static := map[string]bool{}
	for _, f := range img.Files {
		if s := d.Sources[f.Source]; s.Go != "" && !s.CGO {
			static[f.Path[1:]] = true
		}
	}
	n := 0
	for _, name := range slices.Sorted(maps.Keys(fs.hdr)) {
		h := fs.hdr[name]
		if h.Typeflag != tar.TypeReg {
			continue
		}
		f, err := elf.Open(filepath.Join(fs.dir, name))
		if err != nil {
			continue // not an ELF
		}
		n++
		for _, p := range elfProblems(f, name, fs, static[name]) {
			out = append(out, fmt.Sprintf("/%s: %s", name, p))
		}
		f.Close()
	}
	for p := range static {
		if fs.sums[p] == "" {
			out = append(out, fmt.Sprintf("/%s, a static go source, is not in the image", p))
		}
	}
	if n == 0 {
		out = append(out, "no ELF file at all")
	}
	return out
}

func elfProblems(f *elf.File, name string, fs *rootFS, static bool) []string {
	var out []string
	interp := ""
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b, _ := io.ReadAll(p.Open())
			interp = strings.TrimRight(string(b), "\x00")
		}
	}
	var needed, runpath []string
	if f.Section(".dynamic") != nil {
		needed, _ = f.DynString(elf.DT_NEEDED)
		runpath, _ = f.DynString(elf.DT_RUNPATH)
		if len(runpath) == 0 {
			runpath, _ = f.DynString(elf.DT_RPATH)
		}
	}
	if static {
		if interp != "" || len(needed) > 0 {
			return []string{fmt.Sprintf("a static go source has interpreter %q and needs %q", interp, needed)}
		}
		return nil
	}
	if interp != "" && !isELF(fs, fs.resolve(interp)) {
		out = append(out, fmt.Sprintf("its interpreter %s is not an ELF file of the image", interp))
	}
	var dirs []string
	for _, rp := range runpath {
		for _, dir := range strings.Split(rp, ":") {
			dir = strings.ReplaceAll(strings.ReplaceAll(dir, "${ORIGIN}", "$ORIGIN"), "$ORIGIN", path.Join("/", path.Dir(name)))
			dirs = append(dirs, dir)
		}
	}
	dirs = append(dirs, libDirs...)
	find := func(lib string) string {
		if strings.Contains(lib, "/") {
			return fs.resolve(lib)
		}
		for _, dir := range dirs {
			if p := fs.resolve(path.Join(dir, lib)); p != "" && isELF(fs, p) {
				return p
			}
		}
		return ""
	}
	for _, lib := range needed {
		if find(lib) == "" {
			out = append(out, fmt.Sprintf("needs %s, which is in none of %q", lib, dirs))
		}
	}
	vn, _ := f.DynamicVersionNeeds()
	for _, need := range vn {
		p := find(need.Name)
		if p == "" {
			out = append(out, fmt.Sprintf("needs versions of %s, which is not in the image", need.Name))
			continue
		}
		lf, err := elf.Open(filepath.Join(fs.dir, p))
		if err != nil {
			out = append(out, err.Error())
			continue
		}
		defs, _ := lf.DynamicVersions()
		lf.Close()
		for _, dep := range need.Needs {
			if !slices.ContainsFunc(defs, func(v elf.DynamicVersion) bool { return v.Name == dep.Dep }) {
				out = append(out, fmt.Sprintf("needs %s from %s (/%s), which does not define it", dep.Dep, need.Name, p))
			}
		}
	}
	return out
}

func isELF(fs *rootFS, name string) bool {
	h := fs.hdr[name]
	if name == "" || h == nil || h.Typeflag != tar.TypeReg {
		return false
	}
	f, err := elf.Open(filepath.Join(fs.dir, name))
	if err != nil {
		return false
	}
	f.Close()
	return true
}

// checkDebian: each Debian package's copyright file is in the image (the
// licence of what it ships), and with ca-certificates, the bundle holds
// exactly its certificates.
func checkDebian(img *images.Image, fs *rootFS) []string {
	var out []string
	for _, p := range img.Debs {
		if n := fs.resolve("/usr/share/doc/" + p + "/copyright"); n == "" || fs.hdr[n].Typeflag != tar.TypeReg {
			out = append(out, fmt.Sprintf("no /usr/share/doc/%s/copyright", p))
		}
	}
	if !slices.Contains(img.Debs, "ca-certificates") {
		return out
	}
	crts := 0
	for n := range fs.hdr {
		if strings.HasPrefix(n, "usr/share/ca-certificates/") && strings.HasSuffix(n, ".crt") {
			crts++
		}
	}
	b, err := os.ReadFile(filepath.Join(fs.dir, images.CABundle))
	if err != nil {
		return append(out, err.Error())
	}
	certs := 0
	for {
		var blk *pem.Block
		if blk, b = pem.Decode(b); blk == nil {
			break
		}
		if _, err := x509.ParseCertificate(blk.Bytes); err != nil {
			out = append(out, fmt.Sprintf("%s: certificate %d: %v", images.CABundle, certs, err))
		}
		certs++
	}
	if certs == 0 || certs != crts || len(bytes.TrimSpace(b)) != 0 {
		out = append(out, fmt.Sprintf("%s: %d certificates (and %d bytes after); ca-certificates ships %d", images.CABundle, certs, len(b), crts))
	}
	return out
}

// describe names what a header is, for a message.
func describe(h *tar.Header) string {
	if h == nil {
		return "missing"
	}
	return fmt.Sprintf("type %q mode %o owner %d:%d", h.Typeflag, h.Mode, h.Uid, h.Gid)
}

func readText(fs *rootFS, name string) string {
	if fs.hdr[name] == nil {
		return ""
	}
	b, _ := os.ReadFile(filepath.Join(fs.dir, name))
	return string(b)
}
