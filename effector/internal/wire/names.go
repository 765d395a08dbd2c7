package wire

import (
	"regexp"
	"sync"

	"jr2.dev/boundary/internal/tchar"
)

// Names are checked by hand, not by regular expressions: every effector
// process, `effector confine` and `effector keep` included, links this
// package, and compiling three expressions at init cost each of them
// about 2.8 ms and 10,000 allocations before it did anything.

// charset is a set of ASCII bytes.
type charset [256]bool

func chars(s string) *charset {
	var c charset
	for i := 0; i < len(s); i++ {
		c[s[i]] = true
	}
	return &c
}

const (
	alnum    = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	lowerHex = "0123456789abcdef"
)

var (
	secretNameChars = chars(alnum + "._-")
	envFirst        = chars(alnum[:52] + "_")
	envChars        = chars(alnum + "_")
	shaChars        = chars(lowerHex)
)

// all reports whether s is from 1 to max bytes, each in c.
func (c *charset) all(s string, max int) bool {
	if len(s) == 0 || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !c[s[i]] {
			return false
		}
	}
	return true
}

// validHeaderName: 1–256 tchar, a field name HTTP can carry.
func validHeaderName(name string) bool { return len(name) <= 256 && tchar.Token(name) }

// validEnvName: a letter or "_", then up to 255 letters, digits or "_".
func validEnvName(name string) bool {
	return name != "" && envFirst[name[0]] && envChars.all(name, 256)
}

// validSHA: 40 lowercase hex characters.
func validSHA(s string) bool { return len(s) == 40 && shaChars.all(s, 40) }

// lazyRegexp compiles its expression on first use, not at init.
type lazyRegexp struct {
	expr string
	once sync.Once
	re   *regexp.Regexp
}

func lazy(expr string) *lazyRegexp { return &lazyRegexp{expr: expr} }

// MatchString is regexp.Regexp.MatchString.
func (l *lazyRegexp) MatchString(s string) bool {
	l.once.Do(func() { l.re = regexp.MustCompile(l.expr) })
	return l.re.MatchString(s)
}
