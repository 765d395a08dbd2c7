// Package usagetest holds every command's usage text to the flags the
// command defines (a flag the README named was once missing from --help):
// each flag a flag set defines is
// named in the usage as --NAME, and the usage names no flag the command
// does not define. controlplane, custodian and effector test each command
// and subcommand with it.
//
// Invariant: only tests import it.
package usagetest

import (
	"flag"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var longFlag = regexp.MustCompile(`(^|[^A-Za-z0-9-])--([a-z][a-z0-9-]*)`)

// Listed returns the long flags text names (--NAME), sorted, once each.
// --help is left out: every command accepts it.
func Listed(text string) []string {
	var out []string
	for _, m := range longFlag.FindAllStringSubmatch(text, -1) {
		if m[2] != "help" && !slices.Contains(out, m[2]) {
			out = append(out, m[2])
		}
	}
	slices.Sort(out)
	return out
}

// Defined returns the names of fs's flags, sorted.
func Defined(fs *flag.FlagSet) []string {
	var out []string
	fs.VisitAll(func(f *flag.Flag) { out = append(out, f.Name) })
	slices.Sort(out)
	return out
}

// Section is the part of text from the first line holding start up to
// the next line holding end (the rest of text when end is "" or absent).
func Section(t testing.TB, text, start, end string) string {
	t.Helper()
	i := strings.Index(text, start)
	if i < 0 {
		t.Fatalf("the usage has no section %q", start)
		return ""
	}
	rest := text[i:]
	if end != "" {
		if j := strings.Index(rest[len(start):], end); j >= 0 {
			return rest[:len(start)+j]
		}
	}
	return rest
}

// Check fails t unless text lists exactly the flags defined.
func Check(t testing.TB, command, text string, defined []string) {
	t.Helper()
	listed := Listed(text)
	defined = slices.Sorted(slices.Values(defined))
	for _, d := range defined {
		if !slices.Contains(listed, d) {
			t.Errorf("%s: --%s is a flag the usage does not name", command, d)
		}
	}
	for _, l := range listed {
		if !slices.Contains(defined, l) {
			t.Errorf("%s: the usage names --%s, which the command does not define", command, l)
		}
	}
}
