package main

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"jr2.dev/boundary/effector/internal/call"
	"jr2.dev/boundary/effector/internal/pushkind"
	"jr2.dev/boundary/internal/testkit/usagetest"
)

// literals returns the string constants in the non-test Go files of dir
// that match re, sorted, once each: the flags a hand-written parser
// compares against, or the names of the env variables a package declares.
func literals(t *testing.T, dir string, re *regexp.Regexp) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files in %s: %v", dir, err)
	}
	var out []string
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil && re.MatchString(s) && !slices.Contains(out, s) {
					out = append(out, s)
				}
			}
			return true
		})
	}
	slices.Sort(out)
	return out
}

// TestUsageListsEveryFlag: the usage's confine and keep sections name
// exactly the flags their parsers compare arguments against, and its
// serve section every variable package config reads (a flag the README
// named was once missing from --help).
// The parsers are written by hand, so their flags are read from their
// source.
func TestUsageListsEveryFlag(t *testing.T) {
	flagRe := regexp.MustCompile(`^--[a-z][a-z0-9-]*$`)
	for _, tc := range []struct{ section, next, dir string }{
		{"effector confine", "effector keep", "internal/confine"},
		{"effector keep", "effector call", "internal/keep"},
	} {
		var flags []string
		for _, l := range literals(t, tc.dir, flagRe) {
			if l != "--help" { // every command takes it; usagetest leaves it out
				flags = append(flags, strings.TrimPrefix(l, "--"))
			}
		}
		if len(flags) == 0 {
			t.Fatalf("%s: no flag found in %s", tc.section, tc.dir)
		}
		usagetest.Check(t, tc.section, usagetest.Section(t, usage, tc.section, tc.next), flags)
	}
	cfs, _ := call.Flags()
	usagetest.Check(t, "effector call", usagetest.Section(t, usage, "effector call", "effector help"), usagetest.Defined(cfs))
	usagetest.Check(t, "effector call --help", call.Usage, usagetest.Defined(cfs))
	fs, _, _, _ := pushkind.CredentialFlags()
	usagetest.Check(t, "effector credential", usagetest.Section(t, usage, "effector credential", "effector confine"), usagetest.Defined(fs))
	serveSection := usagetest.Section(t, usage, "  effector\n", "effector credential")
	envs := literals(t, "internal/config", regexp.MustCompile(`^(JR2_[A-Z_]+|POD_NAME|POD_IP|NODE_NAME)$`))
	if len(envs) < 10 {
		t.Fatalf("found only %q in package config", envs)
	}
	for _, e := range envs {
		if !regexp.MustCompile(`\b` + e + `\b`).MatchString(serveSection) {
			t.Errorf("effector's usage does not name %s, which package config reads", e)
		}
	}
}

// TestHelp: help, -h and --help print the usage on stdout and exit 0; an
// unknown sub-command is a usage error.
func TestHelp(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
	}{{[]string{"help"}, 0}, {[]string{"-h"}, 0}, {[]string{"--help"}, 0}, {[]string{"serve"}, 2}} {
		var stdout, stderr bytes.Buffer
		code := dispatch(tc.args, func(string) string { return "" }, &stdout, &stderr)
		if code != tc.code || (code == 0) != (stdout.String() == usage) || (code == 0) != (stderr.Len() == 0) {
			t.Errorf("%q: exit %d, stdout %d bytes, stderr %q; want %d", tc.args, code, stdout.Len(), stderr.String(), tc.code)
		}
	}
}

// TestSubcommandHelp: each sub-command, and effector-confine beside the
// binary, prints its usage on stdout for --help and -h and exits 0; a
// --help after "--" is the program's, not the usage.
func TestSubcommandHelp(t *testing.T) {
	confineBin := filepath.Join(filepath.Dir(binary), "effector-confine")
	for _, tc := range []struct {
		argv []string
		want string
	}{
		{[]string{binary, "confine", "--help"}, "usage: effector confine "},
		{[]string{binary, "keep", "-h"}, "usage: effector keep "},
		{[]string{binary, "credential", "--help"}, "usage: effector credential "},
		{[]string{confineBin, "--help"}, "usage: effector confine "},
	} {
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(tc.argv[0], tc.argv[1:]...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if err != nil || !strings.HasPrefix(stdout.String(), tc.want) || stderr.Len() != 0 {
			t.Errorf("%q: %v, stdout %q, stderr %q; want exit 0 and %q on stdout", tc.argv[1:], err, stdout.String(), stderr.String(), tc.want)
		}
	}
	// After "--", --help is ARGV: confine runs it (here: not found, 127 or 126).
	cmd := exec.Command(confineBin, "--", "--help")
	out, _ := cmd.CombinedOutput()
	if cmd.ProcessState.ExitCode() == 0 || strings.HasPrefix(string(out), "usage:") {
		t.Errorf("effector-confine -- --help printed the usage (%q, exit %d); want --help run as the program", out, cmd.ProcessState.ExitCode())
	}
}
