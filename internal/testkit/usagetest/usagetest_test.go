package usagetest

import (
	"flag"
	"slices"
	"testing"
)

// TestListed: the long flags of a text, each once, without --help and
// without a word that only contains "--".
func TestListed(t *testing.T) {
	for _, tc := range []struct {
		text string
		want []string
	}{
		{"usage: x --a FILE [--b-c] -- CMD", []string{"a", "b-c"}},
		{"--help and -h, --a=1, (--a)", []string{"a"}},
		{"x--y not-a--flag", nil},
	} {
		if got := Listed(tc.text); !slices.Equal(got, tc.want) {
			t.Errorf("Listed(%q) = %q; want %q", tc.text, got, tc.want)
		}
	}
}

// TestCheck: a missing and an extra flag each fail the check.
func TestCheck(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.String("a", "", "")
	fs.Bool("b", false, "")
	for _, tc := range []struct {
		text string
		fail bool
	}{
		{"x --a V [--b]", false},
		{"x --a V", true},
		{"x --a V [--b] [--c]", true},
	} {
		rec := &recorder{TB: t}
		Check(rec, "x", tc.text, Defined(fs))
		if rec.failed != tc.fail {
			t.Errorf("Check(%q) failed=%v; want %v", tc.text, rec.failed, tc.fail)
		}
	}
}

type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Errorf(string, ...any) { r.failed = true }
func (r *recorder) Helper()               {}
