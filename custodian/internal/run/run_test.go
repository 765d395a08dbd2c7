package run

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"jr2.dev/boundary/custodian/internal/launcher"
	"jr2.dev/boundary/internal/testkit/usagetest"
)

// modeEnv makes the test binary play a part in a subprocess: "probe" (the
// contained command reporting what it can do) or "runner" (custodian run
// itself, for a test to kill).
const (
	modeEnv = "JR2_RUN_TEST_MODE"
	argsEnv = "JR2_RUN_TEST_ARGS"
)

func TestMain(m *testing.M) {
	launcher.MaybeChild()
	switch os.Getenv(modeEnv) {
	case "":
		os.Exit(m.Run())
	case "probe":
		os.Exit(probe())
	case "attempts":
		os.Exit(attemptsChild())
	case "argv":
		os.Exit(argvChild())
	case "runner":
		var args []string
		if err := json.Unmarshal([]byte(os.Getenv(argsEnv)), &args); err != nil {
			os.Exit(99)
		}
		os.Exit(Main(args, os.Stdout, os.Stderr))
	}
	os.Exit(98)
}

// TestRefusals: a run that cannot be what was asked does not start, and
// says what to fix. None of these needs privilege: each is refused before
// a namespace is made.
func TestRefusals(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ok := write("ok.toml", `allow_hosts = ["api.example.com"]
read_paths = ["/usr"]
write_paths = ["`+dir+`"]
[secrets]
EXAMPLE_TOKEN = { env = "EXAMPLE_TOKEN", hosts = ["api.example.com"] }
`)
	dns := write("dns.toml", `allow_hosts = ["ns.example.com:53"]`)
	missing := write("missing.toml", `read_paths = ["/usr"]
write_paths = ["/nonexistent-jr2-project"]
`)
	existing := filepath.Join(t.TempDir(), "existing.jsonl")
	os.WriteFile(existing, nil, 0o600)
	env := []string{"EXAMPLE_TOKEN=sk-a-long-enough-value"}
	for _, tc := range []struct {
		name string
		o    Options
		code int
		want string
	}{
		{"mode", Options{Policy: ok, Bundle: "/tmp/x.jsonl", Mode: "rerun", Argv: []string{"true"}, Environ: env},
			2, `--mode "rerun": the modes are: [live read-only replay faults preflight]`},
		{"no command", Options{Policy: ok, Bundle: "/tmp/x.jsonl", Environ: env}, 2, "no command; write it after --"},
		{"no policy", Options{Policy: filepath.Join(dir, "none.toml"), Bundle: "/tmp/x.jsonl", Argv: []string{"true"}, Environ: env},
			1, "no such file"},
		{"bundle in a write path", Options{Policy: ok, Bundle: filepath.Join(dir, "out.jsonl"), Argv: []string{"true"}, Environ: env},
			1, `write_paths[0]: "` + dir + `" would let the child reach`},
		{"secret unset", Options{Policy: ok, Bundle: "/tmp/x.jsonl", Argv: []string{"true"}, Environ: []string{}},
			1, "secrets.EXAMPLE_TOKEN: the runner's variable EXAMPLE_TOKEN is unset or empty"},
		{"secret short", Options{Policy: ok, Bundle: "/tmp/x.jsonl", Argv: []string{"true"}, Environ: []string{"EXAMPLE_TOKEN=short"}},
			1, "held secret EXAMPLE_TOKEN: the value is shorter than"},
		{"port 53", Options{Policy: dns, Bundle: "/tmp/x.jsonl", Argv: []string{"true"}}, 1, "allow_hosts[0]: ns.example.com:53: port 53 is the mediator's DNS"},
		{"bundle exists", Options{Policy: ok, Bundle: existing, Argv: []string{"true"}, Environ: env}, 1,
			"--bundle " + existing + " exists, and a bundle is never overwritten: pass another --bundle, or move it away (custodian verify " + existing + " says what it holds)"},
		{"missing write path", Options{Policy: missing, Bundle: "/tmp/x.jsonl", Argv: []string{"true"}}, 1,
			`policy: write_paths[0]: "/nonexistent-jr2-project": no such file or directory; create it, or take it out of the policy`},
	} {
		code, err := Run(context.Background(), tc.o)
		if code != tc.code || err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: exit %d, %v; want %d and %q", tc.name, code, err, tc.code, tc.want)
		}
		// A refusal past the usage, before the bundle, says nothing ran and
		// nothing was written (docs/run.md); an existing bundle is its own.
		if code == 1 && tc.name != "bundle exists" && err != nil && !strings.HasSuffix(err.Error(), "; the command did not start, and no bundle was written") {
			t.Errorf("%s: %q does not say the command did not start and no bundle was written", tc.name, err)
		}
		if err != nil && strings.Contains(err.Error(), "sk-a-long-enough-value") {
			t.Errorf("%s: the error holds the value", tc.name)
		}
	}
	if _, err := os.Stat("/tmp/x.jsonl"); err == nil {
		t.Error("a refused run created its bundle")
	}
	if b, _ := os.ReadFile(existing); len(b) != 0 {
		t.Error("a refused run wrote into an existing file")
	}
}

// TestMainUsage: the CLI's own refusals and their exit codes.
func TestMainUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, "usage: custodian run --policy"},
		{[]string{"--policy", "p.toml", "--bundle", "b.jsonl"}, 2, "usage: custodian run --policy"},
		{[]string{"--policy", "p.toml", "--bundle", "b.jsonl", "--mode", "rerun", "--", "true"}, 2, `--mode "rerun": the modes are: [live read-only replay faults preflight]`},
		{[]string{"--nope"}, 2, "flag provided but not defined"},
		{[]string{"--help"}, 0, ""},
	} {
		var stdout, stderr bytes.Buffer
		code := Main(tc.args, &stdout, &stderr)
		if code == 0 && (stdout.String() != Usage || stderr.Len() != 0) {
			t.Errorf("%q: stdout %q, stderr %q; want the usage on stdout", tc.args, stdout.String(), stderr.String())
		}
		if code != tc.code || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q", tc.args, code, stderr.String(), tc.code, tc.want)
		}
	}
}

// TestUsageListsEveryFlag: Usage names exactly the flags Main parses.
func TestUsageListsEveryFlag(t *testing.T) {
	fs, _ := Flags()
	usagetest.Check(t, "custodian run", Usage, usagetest.Defined(fs))
}
