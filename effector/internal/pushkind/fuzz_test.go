package pushkind

import (
	"bytes"
	"crypto/sha1"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"jr2.dev/boundary/effector/internal/wire"
)

// FuzzParseHead: a HEAD or ref file the agent wrote gives a sha, a ref
// git accepts, or an error; never both, never a panic.
func FuzzParseHead(f *testing.F) {
	for _, s := range []string{"ref: refs/heads/main\n", "0123456789abcdef0123456789abcdef01234567\n", "ref: ../../x\n", "", "ref: refs/heads/a..b"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		sha, ref, err := parseHead(b)
		switch {
		case err != nil && (sha != "" || ref != ""):
			t.Fatalf("an error with a result: %q %q", sha, ref)
		case err == nil && (sha == "") == (ref == ""):
			t.Fatalf("want exactly one of sha %q and ref %q", sha, ref)
		case sha != "" && !wire.ValidSHA(sha), ref != "" && wire.CheckRef(ref) != nil:
			t.Fatalf("accepted %q %q", sha, ref)
		}
	})
}

// FuzzLookupPacked: a packed-refs line gives only a full sha.
func FuzzLookupPacked(f *testing.F) {
	f.Add([]byte("# pack-refs with: peeled\n0123456789abcdef0123456789abcdef01234567 refs/heads/main\n^89abcdef0123456789abcdef0123456789abcdef\n"), "refs/heads/main")
	f.Fuzz(func(t *testing.T, b []byte, ref string) {
		if sha, err := lookupPacked(b, ref); err == nil && !wire.ValidSHA(sha) {
			t.Fatalf("accepted %q", sha)
		}
	})
}

// FuzzParseCommit: a commit the agent made is parsed without a panic; an
// unsigned commit's payload with its own parents is the commit itself, and
// a signed payload holds one gpgsig header and the same message.
func FuzzParseCommit(f *testing.F) {
	tree := "tree 0123456789abcdef0123456789abcdef01234567\n"
	f.Add([]byte(tree + "parent 89abcdef0123456789abcdef0123456789abcdef\nauthor A <a@x> 1 +0000\ncommitter C <c@x> 1 +0000\n\nmsg\n"))
	f.Add([]byte(tree + "author A <a@x> 1 +0000\ngpgsig -----BEGIN X-----\n \n abc\n -----END X-----\n\nmsg\n\nbody\n"))
	f.Add([]byte(tree + "mergetag object x\n type commit\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := parseCommit(b)
		if err != nil {
			return
		}
		p := c.payload(c.parents)
		if !bytes.Contains(b, []byte("gpgsig")) && bytes.Contains(b, []byte("\n\n")) && !bytes.Equal(p, b) {
			t.Fatalf("payload %q of %q", p, b)
		}
		signed := withSignature(p, []byte("-----BEGIN SIG-----\n\nxyz\n-----END SIG-----\n"))
		again, err := parseCommit(signed)
		if err != nil {
			t.Fatalf("a signed payload does not parse: %v\n%q", err, signed)
		}
		if !bytes.Equal(again.message, c.message) || again.tree != c.tree || strings.Join(again.parents, ",") != strings.Join(c.parents, ",") {
			t.Fatalf("signing changed the commit:\n%q\n%q", p, signed)
		}
	})
}

// FuzzAlternatesIn: a worktree's alternates file gives the push's own
// cache or nothing, and a refusal quotes none of the file's bytes.
func FuzzAlternatesIn(f *testing.F) {
	repos := f.TempDir()
	own := filepath.Join(repos, "w", ".git", "objects")
	bound := filepath.Join(repos, "h", "app.git", "objects")
	for _, s := range []string{bound + "\n", "../../../h/app.git/objects\n", "../..\n", "/\n", "\"x\"\n# c\n\r\n", "SECRETLINE\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, why := alternatesIn(b, own, "h/app.git", bound)
		if got != "" && (got != bound || why != "") {
			t.Fatalf("got %q, %q", got, why)
		}
		if why != "" && bytes.Contains(b, []byte("SECRETLINE")) && strings.Contains(why, "SECRETLINE") {
			t.Fatalf("the reason quotes the file: %q", why)
		}
	})
}

// FuzzCacheName: a url names a cache beneath the caches' root, in plain
// segments, or none; never a panic.
func FuzzCacheName(f *testing.F) {
	for _, s := range []string{"ssh://git@h/org/app.git", "git@h:org/app", "https://h:1/a/../b", "ssh://u@[::1]:2/x", "https://h/%2e%2e/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, url string) {
		name, err := CacheName(url)
		if err != nil {
			return
		}
		if !strings.HasSuffix(name, ".git") || filepath.IsAbs(name) || filepath.Clean(name) != name || strings.Contains(name, "%") {
			t.Fatalf("CacheName(%q) = %q", url, name)
		}
		for _, seg := range strings.Split(name, "/") {
			if seg == "" || seg == "." || seg == ".." || seg[0] == '-' {
				t.Fatalf("CacheName(%q) = %q", url, name)
			}
		}
	})
}

// FuzzNextWorktreeCommit: any answer gives a commit only with a name its
// bytes hash to, and what is left is a suffix of the input.
func FuzzNextWorktreeCommit(f *testing.F) {
	body := "tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\n\nm\n"
	h := sha1.Sum([]byte(fmt.Sprintf("commit %d\x00%s", len(body), body)))
	f.Add([]byte(fmt.Sprintf("%x commit %d\n%s\n", h, len(body), body)))
	f.Add([]byte("0123456789abcdef0123456789abcdef01234567 missing\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		name, rest, ok := nextWorktreeCommit(b)
		if !ok {
			return
		}
		if !bytes.HasSuffix(b, rest) || !wire.ValidSHA(name) {
			t.Fatalf("name %q rest %q", name, rest)
		}
		head, after, _ := bytes.Cut(b, []byte("\n"))
		n := len(after) - len(rest) - 1
		sum := sha1.Sum(append([]byte(fmt.Sprintf("commit %d\x00", n)), after[:n]...))
		if fmt.Sprintf("%x", sum) != name || !bytes.HasPrefix(head, []byte(name)) {
			t.Fatalf("%q does not hash to %s", after[:n], name)
		}
	})
}
