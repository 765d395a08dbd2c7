package images_test

import (
	"archive/tar"
	"bytes"
	"os"
	"strings"
	"testing"

	"jr2.dev/boundary/images"
)

// layer writes a tar of hs, each regular file's body its Linkname's bytes
// when it has no link (a test's shorthand).
func layer(t *testing.T, hs ...tar.Header) *bytes.Buffer {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, h := range hs {
		var body []byte
		if h.Typeflag == tar.TypeReg {
			body, h.Linkname = []byte(h.Linkname), ""
			h.Size = int64(len(body))
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return &b
}

func dir(n string) tar.Header { return tar.Header{Name: n + "/", Typeflag: tar.TypeDir, Mode: 0o755} }
func reg(n, body string, mode int64) tar.Header {
	return tar.Header{Name: n, Typeflag: tar.TypeReg, Mode: mode, Linkname: body}
}

// TestUnpackRefuses: what the layer check refuses, each with its reason.
func TestUnpackRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		hs   []tar.Header
		want string
	}{
		{"hardlink", []tar.Header{dir("bin"), reg("bin/a", "x", 0o755), {Name: "bin/b", Typeflag: tar.TypeLink, Linkname: "bin/a"}}, "/bin/b: a hardlink to bin/a; the images hold none"},
		{"device", []tar.Header{dir("dev"), {Name: "dev/kmsg", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 11, Mode: 0o600}}, "/dev/kmsg: entry of type '3'"},
		{"whiteout", []tar.Header{dir("etc"), reg("etc/.wh.passwd", "", 0o644)}, "not a clean relative path (or a whiteout)"},
		{"escape", []tar.Header{reg("../x", "", 0o644)}, `entry "../x": not a clean relative path`},
		{"through a symlink", []tar.Header{{Name: "lib", Typeflag: tar.TypeSymlink, Linkname: "/tmp"}, reg("lib/x", "", 0o644)}, "/lib/x: its parent is not a directory of the image"},
		{"no parent", []tar.Header{reg("usr/bin/x", "", 0o755)}, "/usr/bin/x: its parent is not a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := &rootFS{dir: t.TempDir(), hdr: map[string]*tar.Header{}, sums: map[string]string{}}
			err := fs.unpack(layer(t, tc.hs...))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("unpack: %v; want %q", err, tc.want)
			}
		})
	}
}

// TestChecksFail: each check of the built images finds what is wrong in a
// root made to be wrong: a dynamic ELF without its loader or libc, a file
// no source gives and one missing, users that are not the description's,
// an entrypoint nobody may run.
func TestChecksFail(t *testing.T) {
	d, err := images.Load("..")
	if err != nil {
		t.Fatal(err)
	}
	img := *d.Image("agent")
	img.Debs = nil
	truth, err := os.ReadFile("/bin/true")
	if err != nil {
		t.Fatalf("/bin/true (coreutils) stands for a dynamic ELF here: %v", err)
	}
	fs := &rootFS{dir: t.TempDir(), hdr: map[string]*tar.Header{}, sums: map[string]string{}}
	err = fs.unpack(layer(t, dir("etc"), reg("etc/passwd", "root:x:0:0:root:/root:/bin/sh\n", 0o644),
		dir("opt"), dir("opt/jr2"), dir("opt/jr2/bin"), reg("opt/jr2/bin/pause", string(truth), 0o700),
		reg("stray", "of this machine", 0o644),
		tar.Header{Name: "lib64", Typeflag: tar.TypeSymlink, Linkname: "lib"}))
	if err != nil {
		t.Fatal(err)
	}
	want := images.Root{}
	for _, e := range []*images.Entry{
		{Name: "etc/passwd", Type: tar.TypeReg, Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/bin/sh\n"), Origin: "generated"},
		{Name: "opt/jr2/bin/pause", Type: tar.TypeReg, Mode: 0o755, Data: truth, Origin: "source pause"},
		{Name: "usr/local/bin/node", Type: tar.TypeReg, Mode: 0o755, Data: []byte("node"), Origin: "source node"},
		{Name: "lib64", Type: tar.TypeSymlink, Mode: 0o777, Link: "lib", Origin: "deb libc6"},
	} {
		if err := want.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		what     string
		problems []string
		want     []string
	}{
		{"contents", checkContents(want, fs), []string{
			"/opt/jr2/bin/pause: type '0' mode 700 owner 0:0 link \"\"; source pause gives '0' 755 0:0 \"\"",
			"/stray is in the image, and none of its Debian packages, users or sources gives it",
			"/usr/local/bin/node (source node) is not in the image",
		}},
		{"users", checkUsers(d, &img, fs), []string{"user nonroot's home /home/nonroot: missing", "/etc/passwd [\"root:x:0:0:root:/root:/bin/sh\"]", "the config's user 1000:1000 is not in /etc/passwd"}},
		{"entrypoint", checkEntrypoint(&img, fs), []string{"/opt/jr2/bin/pause: mode 700, owner 0:0: 1000:1000 may not run it"}},
		{"ELF", checkELFs(d, &img, fs), []string{"/opt/jr2/bin/pause: a static go source has interpreter \"/lib64/ld-linux-x86-64.so.2\""}},
	} {
		all := strings.Join(tc.problems, "\n")
		for _, w := range tc.want {
			if !strings.Contains(all, w) {
				t.Errorf("%s: problems\n%s\nwant one saying %q", tc.what, all, w)
			}
		}
	}
	// The same ELF, not a static source: its loader and libc are missing.
	img.Files = nil
	all := strings.Join(checkELFs(d, &img, fs), "\n")
	for _, w := range []string{"its interpreter /lib64/ld-linux-x86-64.so.2 is not an ELF file of the image", "needs libc.so.6, which is in none of", "needs versions of libc.so.6, which is not in the image"} {
		if !strings.Contains(all, w) {
			t.Errorf("ELF: problems\n%s\nwant one saying %q", all, w)
		}
	}
}
