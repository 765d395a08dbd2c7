package commandkind

import (
	"errors"
	"strings"
	"syscall"
	"testing"

	"jr2.dev/boundary/effector/internal/effect"
	"jr2.dev/boundary/effector/internal/wire"
)

const (
	sentinel = "S3nt/in+el=&?<>\"-cmd~"
	other    = "other-value-1234"
)

func values(name string) ([]byte, bool) {
	switch name {
	case "TOKEN":
		return []byte(sentinel), true
	case "OTHER":
		return []byte(other), true
	}
	return nil, false
}

func testKind(o Options) *Kind {
	if o.Values == nil {
		o.Values = values
	}
	if o.SecretsDir == "" {
		o.SecretsDir = "/run/jr2/secrets"
	}
	o.Node = "node-a"
	return New(o)
}

func cmdStart(c *wire.Command) *wire.Start { return &wire.Start{Kind: wire.KindCommand, Command: c} }

// TestPrepareRefuses: each way a command start is refused, with its 400
// reason, and no plan.
func TestPrepareRefuses(t *testing.T) {
	on := Options{Commands: true}
	argv := []string{"true"}
	cases := []struct {
		name string
		o    Options
		c    *wire.Command
		want string
	}{
		{"no Landlock", Options{Commands: true, Probe: syscall.ENOSYS}, &wire.Command{Argv: argv},
			"landlock: unavailable on node node-a (ENOSYS: not supported by kernel or not enabled at boot time)"},
		{"no Landlock, commands false", Options{Probe: errors.New("probe failed")}, &wire.Command{Argv: argv},
			"landlock: unavailable on node node-a (probe failed)"},
		{"commands false", Options{}, &wire.Command{Argv: argv}, "effector.json has commands false"},
		{"dir absolute", on, &wire.Command{Argv: argv, Dir: "/etc"}, `command.dir: "/etc" is absolute`},
		{"dir leaves", on, &wire.Command{Argv: argv, Dir: "../x"}, `command.dir: "../x" leaves the checkout`},
		{"dir dot-dot", on, &wire.Command{Argv: argv, Dir: ".."}, `command.dir: ".." leaves the checkout`},
		{"dir not clean", on, &wire.Command{Argv: argv, Dir: "a/../b"}, `command.dir: "a/../b" is not clean; write it "b"`},
		{"dir trailing slash", on, &wire.Command{Argv: argv, Dir: "a/"}, `write it "a"`},
		{"pin short", on, &wire.Command{Argv: argv, Pin: "abc123"}, `command.pin: "abc123" is not a commit sha`},
		{"pin upper case", on, &wire.Command{Argv: argv, Pin: strings.Repeat("AB", 20)}, "40 lowercase hex"},
		{"pin a ref", on, &wire.Command{Argv: argv, Pin: "main"}, `command.pin: "main"`},
		{"HOME named", on, &wire.Command{Argv: argv, Env: map[string]wire.Value{"HOME": {wire.Text("/")}}}, "command.env.HOME: the Effector sets it"},
		{"TMPDIR named", on, &wire.Command{Argv: argv, Env: map[string]wire.Value{"TMPDIR": {wire.Text("/tmp")}}}, "command.env.TMPDIR: the Effector sets it"},
		{"LD_PRELOAD named", on, &wire.Command{Argv: argv, Env: map[string]wire.Value{"LD_PRELOAD": {wire.Text("/work/x.so")}}},
			"command.env.LD_PRELOAD: read by the dynamic loader of the Effector's keeper and confiner"},
		{"GLIBC_TUNABLES named", on, &wire.Command{Argv: argv, Env: map[string]wire.Value{"GLIBC_TUNABLES": {wire.Text("x")}}}, "command.env.GLIBC_TUNABLES: read by the dynamic loader"},
		{"secret not held", on, &wire.Command{Argv: argv, Env: map[string]wire.Value{"A": {wire.Secret("NOPE")}}}, `secret "NOPE": this Effector holds no secret`},
		{"secretPath not held", on, &wire.Command{Argv: argv, Env: map[string]wire.Value{"A": {wire.SecretPath("NOPE")}}}, `secret "NOPE": this Effector holds no secret`},
		{"NUL in env", on, &wire.Command{Argv: argv, Env: map[string]wire.Value{"A": {wire.Text("a\x00b")}}}, "command.env.A: holds a NUL byte"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			plan, err := testKind(c.o).Prepare("c1", cmdStart(c.c))
			if plan != nil || err == nil {
				t.Fatalf("plan %v, err %v", plan, err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("reason %q does not say %q", err, c.want)
			}
			if strings.Contains(err.Error(), sentinel) {
				t.Errorf("the reason holds the value: %q", err)
			}
		})
	}
}

// TestPrepareEnv: the child's env is what the start names, a secret's
// value and a secret file's path filled in; what was built from a secret
// is named for the scrubber; the plan logs no method or host and keeps a
// stop as "did not run".
func TestPrepareEnv(t *testing.T) {
	k := testKind(Options{Commands: true})
	start := &wire.Start{Kind: wire.KindCommand, TimeoutMs: 1500, Command: &wire.Command{
		Argv: []string{"make", "deploy"}, Dir: "services/api", MaxOutputBytes: 99,
		Env: map[string]wire.Value{
			"AUTH":  {wire.Text("Bearer "), wire.Secret("TOKEN")},
			"RAW":   {wire.Secret("TOKEN")},
			"FILE":  {wire.SecretPath("OTHER")},
			"FILE2": {wire.SecretPath("OTHER")},
			"PATH":  {wire.Text("/opt/bin:/usr/bin")},
		}}}
	plan, err := k.Prepare("c1", start)
	if err != nil {
		t.Fatal(err)
	}
	if plan.Method != "-" || plan.Host != "-" || plan.KeptStop != effect.DidNotRun || plan.Stop == nil || plan.Pinned != "" {
		t.Errorf("plan %+v", plan)
	}
	if b := plan.Built["TOKEN"]; len(b) != 1 || string(b[0]) != "Bearer "+sentinel || len(plan.Built) != 1 {
		t.Errorf("built %q", plan.Built)
	}
	p, _, err := k.prepare("c1", start)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"AUTH=Bearer " + sentinel, "FILE=/run/jr2/secrets/OTHER", "FILE2=/run/jr2/secrets/OTHER",
		"PATH=/opt/bin:/usr/bin", "RAW=" + sentinel}
	if strings.Join(p.env, "\n") != strings.Join(want, "\n") {
		t.Errorf("env %q, want %q", p.env, want)
	}
	if len(p.reads) != 1 || p.reads[0] != "/run/jr2/secrets/OTHER" {
		t.Errorf("reads %q", p.reads)
	}
	if p.dir != "services/api" || p.pin != "" || p.max != 99 || p.timeout.Milliseconds() != 1500 {
		t.Errorf("prepared %+v", p)
	}
	base := baseEnv(p.env, "/s/home", "/s/tmp")
	if got := strings.Join(base[len(p.env):], " "); got != "HOME=/s/home TMPDIR=/s/tmp LANG=C.UTF-8" {
		t.Errorf("the Effector's part of the env: %q (PATH named by the start)", got)
	}
	if got := strings.Join(baseEnv(nil, "/h", "/t"), " "); got != "HOME=/h TMPDIR=/t PATH="+FixedPath+" LANG=C.UTF-8" {
		t.Errorf("base env %q", got)
	}
}

func TestCheckDirAndPin(t *testing.T) {
	for in, want := range map[string]string{"": ".", ".": ".", "a": "a", "a/b": "a/b", "a..b": "a..b", "..a": "..a"} {
		if got, err := CheckDir(in); err != nil || got != want {
			t.Errorf("CheckDir(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := CheckPin(strings.Repeat("0a", 20)); err != nil {
		t.Error(err)
	}
}
