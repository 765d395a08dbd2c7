package cliflag

import (
	"bytes"
	"flag"
	"testing"
)

// TestParse: help on stdout with 0, a bad flag on stderr with 2 and the
// usage, a good one parsed.
func TestParse(t *testing.T) {
	for _, tc := range []struct {
		args           []string
		ok             bool
		code           int
		stdout, stderr string
	}{
		{[]string{"--a", "x"}, true, 0, "", ""},
		{[]string{"--help"}, false, 0, "USAGE\n", ""},
		{[]string{"-h"}, false, 0, "USAGE\n", ""},
		{[]string{"--b=secret-ish"}, false, 2, "", "cmd: flag provided but not defined: -b\nUSAGE\n"},
	} {
		fs := flag.NewFlagSet("cmd", flag.ContinueOnError)
		a := fs.String("a", "", "")
		var stdout, stderr bytes.Buffer
		ok, code := Parse(fs, tc.args, "USAGE\n", &stdout, &stderr)
		if ok != tc.ok || code != tc.code || stdout.String() != tc.stdout || stderr.String() != tc.stderr {
			t.Errorf("%q: %v %d %q %q; want %v %d %q %q", tc.args, ok, code, stdout.String(), stderr.String(), tc.ok, tc.code, tc.stdout, tc.stderr)
		}
		if tc.ok && *a != "x" {
			t.Errorf("%q: --a is %q", tc.args, *a)
		}
	}
}
