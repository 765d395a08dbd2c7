package confine

import (
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"jr2.dev/boundary/internal/landlock"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from what the code renders")

// fakeImage builds an image's top level under a temp root: the usual
// system trees, links into them and out of them, the Effector's own paths
// nested at several depths, and entries that are neither file nor
// directory.
func fakeImage(t *testing.T) string {
	t.Helper()
	r := t.TempDir()
	for _, f := range []string{
		"usr/bin/sh", "usr/lib/libc.so", "etc/passwd", "opt/tool/bin/t", "opt/jr2/bin/effector",
		"etc/jr2/effector-ca/ca.pem", "srv/x", "proc/1/environ", "tmp/x", "run/jr2/effector/key",
		"var/lib/x", "home/u/.ssh/id", "work/src/main.go", "repos/cache/HEAD",
		"data/deep/deny-me/secret", "data/deep/ok/file", "data/other/file",
		"scratch/e1/tmp/.keep", "scratch/e2/tmp/.keep", "secrets/a", "secrets/b",
		"file.json", "nix/store/x",
	} {
		p := filepath.Join(r, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{
		"bin":               "usr/bin",    // followed, covered by usr: no rule of its own
		"hostbin":           "/usr/bin",   // followed, outside the image's rules: a rule of its own
		"lib":               "usr/lib",    // followed
		"escape":            "run/jr2",    // names a denied tree
		"tolink":            "data",       // holds a denied path
		"rootlink":          "/",          // holds everything
		"dangling":          "nowhere",    // names nothing
		"data/deep/alias":   "deny-me",    // a link to a denied path, one level down
		"data/deep/ok-link": "ok",         // a harmless link one level down
		"worklink":          "work/src",   // beneath a --deny path
		"etc/os-release":    "../usr/lib", // inside an allowed tree: not looked at
	} {
		if err := os.Symlink(target, filepath.Join(r, link)); err != nil {
			t.Fatal(err)
		}
	}
	l, err := net.Listen("unix", filepath.Join(r, "sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return r
}

func effectorOptions(r string) Options {
	return Options{
		Scratch: []string{filepath.Join(r, "scratch/e1")},
		Read:    []string{filepath.Join(r, "secrets/a")},
		Deny: []string{
			filepath.Join(r, "work"), filepath.Join(r, "repos"), filepath.Join(r, "scratch"),
			filepath.Join(r, "secrets"), filepath.Join(r, "data/deep/deny-me"),
			filepath.Join(r, "not/there"),
		},
	}
}

func render(r string, rules []Rule) string {
	var b strings.Builder
	for _, x := range rules {
		rel := "/" + strings.TrimPrefix(strings.TrimPrefix(x.Path, r), "/")
		fmt.Fprintf(&b, "%-8s %-26s %v\n", x.Why, rel, x.Access)
	}
	return b.String()
}

// The plan for a whole image, against testdata/plan.golden (-update
// rewrites it).
func TestPlanGolden(t *testing.T) {
	r := fakeImage(t)
	rules, err := Plan(r, effectorOptions(r))
	if err != nil {
		t.Fatal(err)
	}
	got := render(r, rules)
	golden := filepath.Join("testdata", "plan.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("plan:\n%s\nwant (testdata/plan.golden):\n%s", got, want)
	}
}

// No rule of the plan grants making a device node: not the scratch, not a
// device, not the system tree (a confined child once made kmsg and loop0
// in its TMPDIR and opened them).
// Fifos and sockets only in the scratch.
func TestPlanMakesNoDevice(t *testing.T) {
	r := fakeImage(t)
	rules, err := Plan(r, effectorOptions(r))
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range rules {
		if x.Access&landlock.MakeDevice != 0 {
			t.Errorf("%s %s grants %v", x.Why, x.Path, x.Access&landlock.MakeDevice)
		}
		if x.Why != "scratch" && x.Access&(landlock.MakeFifo|landlock.MakeSock) != 0 {
			t.Errorf("%s %s grants %v", x.Why, x.Path, x.Access&(landlock.MakeFifo|landlock.MakeSock))
		}
	}
}

// No rule of the plan reaches a denied path, whatever its kind.
func TestPlanReachesNothingDenied(t *testing.T) {
	r := fakeImage(t)
	o := effectorOptions(r)
	rules, err := Plan(r, o)
	if err != nil {
		t.Fatal(err)
	}
	var denied []string
	for _, n := range DeniedNames {
		denied = append(denied, filepath.Join(r, n))
	}
	denied = append(denied, o.Deny...)
	for _, x := range rules {
		if x.Why != "system" {
			continue
		}
		real, err := filepath.EvalSymlinks(x.Path)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range denied {
			if within(d, real) || within(real, d) || within(d, x.Path) || within(x.Path, d) {
				t.Errorf("rule %s (%s) reaches the denied %s", x.Path, real, d)
			}
		}
	}
}

func TestPlanRefuses(t *testing.T) {
	tests := []struct {
		name string
		o    func(r string) Options
		want string
	}{
		{"scratch missing", func(r string) Options { return Options{Scratch: []string{r + "/nope"}} },
			"--scratch R/nope: lstat R/nope: no such file or directory"},
		{"scratch is a file", func(r string) Options { return Options{Scratch: []string{r + "/file.json"}} },
			"--scratch R/file.json: not a directory"},
		{"read is a directory", func(r string) Options { return Options{Read: []string{r + "/secrets"}} },
			"--read R/secrets: not a regular file; name each secret file"},
		{"scratch holds a deny path", func(r string) Options {
			return Options{Scratch: []string{r + "/data"}, Deny: []string{r + "/data/deep/deny-me"}}
		}, "--scratch R/data: the denied path R/data/deep/deny-me is in it; give a path that holds nothing denied"},
		{"scratch is the root", func(r string) Options { return Options{Scratch: []string{r}} },
			"--scratch R: the denied path R/proc is in it; give a path that holds nothing denied"},
		{"scratch is a denied name", func(r string) Options { return Options{Scratch: []string{r + "/tmp"}} },
			"--scratch R/tmp: the denied path R/tmp is in it; give a path that holds nothing denied"},
		{"read-tree is a file", func(r string) Options { return Options{Trees: []string{r + "/file.json"}} },
			"--read-tree R/file.json: not a directory"},
		{"read-tree holds a deny path", func(r string) Options {
			return Options{Trees: []string{r + "/data"}, Deny: []string{r + "/data/deep/deny-me"}}
		}, "--read-tree R/data: the denied path R/data/deep/deny-me is in it; give a path that holds nothing denied"},
		{"read is denied too", func(r string) Options {
			return Options{Read: []string{r + "/secrets/a"}, Deny: []string{r + "/secrets/a"}}
		}, "--read R/secrets/a: the denied path R/secrets/a is in it; give a path that holds nothing denied"},
		{"scratch through a link to a denied tree", func(r string) Options {
			return Options{Scratch: []string{r + "/tolink"}, Deny: []string{r + "/data/deep/deny-me"}}
		}, "--scratch R/tolink: the denied path R/data/deep/deny-me is in it; give a path that holds nothing denied"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := fakeImage(t)
			rules, err := Plan(r, tt.o(r))
			if err == nil {
				t.Fatalf("planned %d rules, want the refusal %q", len(rules), tt.want)
			}
			if got := strings.ReplaceAll(err.Error(), r, "R"); got != tt.want {
				t.Errorf("refusal %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParseArgs(t *testing.T) {
	tests := []struct {
		args []string
		o    Options
		argv []string
		err  string
	}{
		{args: []string{"--scratch", "/s/e1", "--read=/r/a", "--deny", "/w/", "--deny=/k", "--node", "n1", "--", "make", "--deny", "x"},
			o:    Options{Scratch: []string{"/s/e1"}, Read: []string{"/r/a"}, Deny: []string{"/w", "/k"}, Node: "n1"},
			argv: []string{"make", "--deny", "x"}},
		{args: []string{"--read-tree", "/w/", "--read-tree=/x", "--", "git"}, o: Options{Trees: []string{"/w", "/x"}}, argv: []string{"git"}},
		{args: []string{"--", "/bin/true"}, argv: []string{"/bin/true"}},
		{args: []string{"--keep-dac-read-search", "--", "git", "--keep-dac-read-search"}, o: Options{KeepDACReadSearch: true},
			argv: []string{"git", "--keep-dac-read-search"}},
		{args: []string{"--keep-dac-read-search=1", "--", "git"}, err: `unknown argument "--keep-dac-read-search=1"; ` + usage},
		{args: []string{"--scratch", "rel/dir", "--", "x"}, err: `--scratch "rel/dir": the path must be absolute`},
		{args: []string{"--read"}, err: "--read needs a value; " + usage},
		{args: []string{"--secret", "x", "--", "y"}, err: `unknown argument "--secret"; ` + usage},
		{args: []string{"/bin/true"}, err: `unknown argument "/bin/true"; ` + usage},
		{args: []string{"--scratch", "/s"}, err: "no -- before the program; " + usage},
		{args: []string{"--"}, err: "no program after --; " + usage},
		{args: []string{"--", ""}, err: "no program after --; " + usage},
	}
	for _, tt := range tests {
		o, argv, err := parseArgs(tt.args)
		if tt.err != "" {
			if err == nil || err.Error() != tt.err {
				t.Errorf("parseArgs(%q) error %v, want %q", tt.args, err, tt.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(o, tt.o) || !reflect.DeepEqual(argv, tt.argv) {
			t.Errorf("parseArgs(%q) = %+v, %q, %v; want %+v, %q", tt.args, o, argv, err, tt.o, tt.argv)
		}
	}
}

func TestDeviceRulesAreFileRights(t *testing.T) {
	if got := landlock.ReadWrite & landlock.FileRights; got != landlock.FileRights {
		t.Errorf("device access %v, want %v", got, landlock.FileRights)
	}
}

// FuzzParseArgs: the words after `--` are the author's; whatever the
// words, every accepted path is absolute and clean, a program is named,
// the one kept capability is asked for only before `--` (never by the
// author's words), and nothing panics.
func FuzzParseArgs(f *testing.F) {
	f.Add("--scratch\x00/s/e1\x00--read=/r/a\x00--\x00make\x00deploy")
	f.Add("--deny\x00/w/../x\x00--node\x00n\x00--\x00--\x00--deny")
	f.Add("--\x00")
	f.Add("--keep-dac-read-search\x00--\x00git\x00--keep-dac-read-search")
	f.Add("--\x00sh\x00--keep-dac-read-search")
	f.Fuzz(func(t *testing.T, joined string) {
		words := strings.Split(joined, "\x00")
		o, argv, err := parseArgs(words)
		if err != nil {
			return
		}
		if len(argv) == 0 || argv[0] == "" {
			t.Fatalf("accepted no program: %q", joined)
		}
		flags := words[:len(words)-len(argv)]
		if o.KeepDACReadSearch && !slices.Contains(flags, "--keep-dac-read-search") {
			t.Fatalf("kept CAP_DAC_READ_SEARCH from the program's words: %q", joined)
		}
		for _, p := range append(append(append(append([]string{}, o.Scratch...), o.Read...), o.Trees...), o.Deny...) {
			if !filepath.IsAbs(p) || filepath.Clean(p) != p {
				t.Fatalf("accepted the path %q from %q", p, joined)
			}
		}
	})
}
