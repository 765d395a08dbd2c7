package wire

import (
	"regexp"
	"strings"
	"testing"
)

// The expressions the hand-written checks replace: each check must accept
// exactly what its expression matches.
var nameOracles = []struct {
	name  string
	re    *regexp.Regexp
	check func(string) bool
}{
	{"secret name", regexp.MustCompile(`^[A-Za-z0-9._-]{1,253}$`), ValidSecretName},
	{"header name", regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,256}$"), validHeaderName},
	{"env name", regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,255}$`), validEnvName},
	{"sha", regexp.MustCompile(`^[0-9a-f]{40}$`), ValidSHA},
}

func TestNamesAsTheExpressions(t *testing.T) {
	inputs := []string{"", "a", "A_b", "_x", "9x", "x-y", "x.y", "x y", "x\n", "\nx", "é", "a\x00", "x:y", "X-Api-Key",
		"tok!#$%&'*+.^_`|~", "a(b)", "a/b", strings.Repeat("a", 253), strings.Repeat("a", 254), strings.Repeat("a", 256),
		strings.Repeat("a", 257), strings.Repeat("0", 40), strings.Repeat("f", 39), strings.Repeat("F", 40), strings.Repeat("0", 41),
		"0123456789abcdef0123456789abcdef0123456\n"}
	for i := 0; i < 256; i++ {
		inputs = append(inputs, string([]byte{byte(i)}), "a"+string([]byte{byte(i)}), "_"+string([]byte{byte(i)})+"b")
	}
	for _, o := range nameOracles {
		for _, in := range inputs {
			if got, want := o.check(in), o.re.MatchString(in); got != want {
				t.Errorf("%s %q: %v, the expression says %v", o.name, in, got, want)
			}
		}
	}
}

// FuzzNamesAsTheExpressions: a name from the agent is accepted by a
// hand-written check exactly when its expression matches it.
func FuzzNamesAsTheExpressions(f *testing.F) {
	for _, s := range []string{"", "a", "X-Token", "_A9", strings.Repeat("0", 40), "a b", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		for _, o := range nameOracles {
			if got, want := o.check(in), o.re.MatchString(in); got != want {
				t.Fatalf("%s %q: %v, the expression says %v", o.name, in, got, want)
			}
		}
	})
}

// TestLazyExpression: an expression is compiled at its first use, and
// matches as regexp does (effector's TestInitCompilesNothing counts the
// whole binary's init).
func TestLazyExpression(t *testing.T) {
	fresh := lazy(`^a+$`)
	if fresh.re != nil {
		t.Fatal("compiled before use")
	}
	if !fresh.MatchString("aa") || fresh.MatchString("b") || fresh.re == nil {
		t.Fatal("the lazy expression does not match as regexp does")
	}
}
