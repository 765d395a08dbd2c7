package commandkind

import (
	"path"
	"regexp"
	"strings"
	"testing"
)

// FuzzCheckDir: a dir CheckDir accepts stays inside the checkout when
// joined to it, and is clean; one it refuses gives a reason naming the
// field.
func FuzzCheckDir(f *testing.F) {
	for _, s := range []string{"", ".", "services/api", "../x", "/etc", "a/../b", "a//b", "..a", "a/..", "a\x00b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, dir string) {
		got, err := CheckDir(dir)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "command.dir: ") {
				t.Fatalf("reason %q", err)
			}
			return
		}
		joined := path.Join("/checkout", got)
		if joined != "/checkout" && !strings.HasPrefix(joined, "/checkout/") {
			t.Fatalf("CheckDir(%q) = %q leaves the checkout: %q", dir, got, joined)
		}
		if got != path.Clean(got) || strings.IndexByte(got, 0) >= 0 {
			t.Fatalf("CheckDir(%q) = %q", dir, got)
		}
	})
}

// FuzzParseHead: what git ls-remote prints of the agent's repository
// (whose refs the agent names) gives a 40-hex sha or an error.
func FuzzParseHead(f *testing.F) {
	f.Add([]byte("0123456789abcdef0123456789abcdef01234567\tHEAD\n"))
	f.Add([]byte("0123456789abcdef0123456789abcdef01234567\trefs/heads/HEAD\nzz\tHEAD\n"))
	f.Add([]byte(""))
	sha40 := regexp.MustCompile(`^[0-9a-f]{40}$`) // an oracle beside wire.ValidSHA
	f.Fuzz(func(t *testing.T, out []byte) {
		sha, err := parseHead(out)
		if err == nil && !sha40.MatchString(sha) {
			t.Fatalf("parseHead(%q) = %q", out, sha)
		}
	})
}
