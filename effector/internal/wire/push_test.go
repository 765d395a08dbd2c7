package wire

import (
	"strings"
	"testing"
)

func TestParseRemote(t *testing.T) {
	for _, c := range []struct {
		url  string
		want Remote
	}{
		{"ssh://git@git.example.com/org/app.git", Remote{TransportSSH, "git.example.com", 0}},
		{"ssh://git.example.com:2222/org/app.git", Remote{TransportSSH, "git.example.com", 2222}},
		{"ssh://root@127.0.0.1:40022/srv/r.git", Remote{TransportSSH, "127.0.0.1", 40022}},
		{"ssh://git@[::1]:22/r.git", Remote{TransportSSH, "::1", 22}},
		{"git@github.com:org/app.git", Remote{TransportSSH, "github.com", 0}},
		{"https://git.example.com/org/app.git", Remote{TransportHTTPS, "git.example.com", 0}},
		{"https://127.0.0.1:8443/r.git", Remote{TransportHTTPS, "127.0.0.1", 8443}},
	} {
		got, err := ParseRemote(c.url)
		if err != nil || got != c.want {
			t.Errorf("ParseRemote(%q) = %+v, %v; want %+v", c.url, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "git.example.com:org/app.git", "ssh://git@/r.git", "ssh://git@h:/r.git", "ssh://h:99999/r.git",
		"ssh://u:p@h/r.git", "https://h", "git://h/r.git", "-x@h:r", "u@-h:r", "u@h:-r", "u@h/x:r", "ssh://h/r.git\n", "ssh://h/r\\x"} {
		if r, err := ParseRemote(bad); err == nil {
			t.Errorf("ParseRemote(%q) = %+v, accepted", bad, r)
		}
	}
}

func TestCheckRef(t *testing.T) {
	for _, ok := range []string{"refs/heads/main", "refs/heads/jr2/fix-1", "refs/tags/v1.0", "refs/heads/a.b"} {
		if err := CheckRef(ok); err != nil {
			t.Errorf("CheckRef(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"main", "refs/heads", "refs/heads/", "refs/heads/.x", "refs/heads/x.", "refs/heads/a..b", "refs/heads/a@{1}",
		"refs/heads//a", "refs/heads/a b", "refs/heads/a~1", "refs/heads/a^", "refs/heads/a:b", "refs/heads/a?", "refs/heads/a*", "refs/heads/a[",
		"refs/heads/a\\b", "refs/heads/x.lock", "refs/heads/\x01", "HEAD"} {
		if err := CheckRef(bad); err == nil {
			t.Errorf("CheckRef(%q) accepted", bad)
		}
	}
}

// FuzzParseRemote: what it accepts holds no byte git or ssh would read as
// an option or a separator where it stands.
func FuzzParseRemote(f *testing.F) {
	for _, s := range []string{"ssh://git@git.example.com/org/app.git", "git@h:r", "https://h:1/r", "ext::x", "ssh://-o/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRemote(s)
		if err != nil {
			return
		}
		if strings.HasPrefix(s, "-") || strings.HasPrefix(r.Host, "-") || strings.ContainsAny(s, " \t\r\n\x00\\") || reHelper.MatchString(s) {
			t.Fatalf("accepted %q as %+v", s, r)
		}
		if r.Transport != TransportSSH && r.Transport != TransportHTTPS {
			t.Fatalf("transport %q", r.Transport)
		}
	})
}

// FuzzCheckRef: what it accepts is under refs/ and holds nothing git
// reads as a refspec's separator or a revision's suffix.
func FuzzCheckRef(f *testing.F) {
	for _, s := range []string{"refs/heads/main", "refs/heads/a..b", "refs/heads/a:b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if CheckRef(s) != nil {
			return
		}
		if !strings.HasPrefix(s, "refs/") || strings.ContainsAny(s, ": ~^?*[\\\x00") || strings.Contains(s, "..") || strings.Contains(s, "@{") {
			t.Fatalf("accepted %q", s)
		}
	})
}
