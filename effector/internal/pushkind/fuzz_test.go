package pushkind

import (
	"bytes"
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
