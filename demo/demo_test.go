package demo

import (
	"bytes"
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from this run")

// build builds the module's custodian and controlplane into a temp dir.
func build(t *testing.T) Options {
	t.Helper()
	dir := t.TempDir()
	o := Options{Custodian: filepath.Join(dir, "custodian"), Controlplane: filepath.Join(dir, "controlplane")}
	for out, pkg := range map[string]string{o.Custodian: "./custodian", o.Controlplane: "./controlplane"} {
		cmd := exec.Command("go", "build", "-o", out, pkg)
		cmd.Dir = ".."
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, b)
		}
	}
	return o
}

// What varies from run to run: ports, the value's fingerprint, the time.
var (
	portRe  = regexp.MustCompile(`(127\.0\.0\.[12]):\d+`)
	printRe = regexp.MustCompile(`sha256:[0-9a-f]{16}`)
	timeRe  = regexp.MustCompile(`done in \d+\.\ds`)
)

func TestDemo(t *testing.T) {
	o := build(t)
	curl, _ := exec.LookPath("curl")
	for _, c := range []struct {
		name, curl string
	}{
		{"curl", curl},
		{"go-client", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "curl" && c.curl == "" {
				t.Fatal("curl is not installed (.ci/run installs it)")
			}
			o.Curl = c.curl
			var out bytes.Buffer
			if err := Run(context.Background(), o, &out); err != nil {
				t.Fatalf("%v\n%s", err, out.String())
			}
			got := out.String()
			// The value is never printed; its fingerprint is, twice: what the
			// Custodian holds and what the upstream received are one value.
			if strings.Contains(got, "sk-demo-") {
				t.Fatalf("the demo printed the value:\n%s", got)
			}
			if fps := printRe.FindAllString(got, -1); len(fps) != 2 || fps[0] != fps[1] {
				t.Errorf("fingerprints %v: want the held one and the received one, equal", fps)
			}
			got = portRe.ReplaceAllString(got, "$1:PORT")
			got = printRe.ReplaceAllString(got, "sha256:FINGERPRINT")
			got = timeRe.ReplaceAllString(got, "done in N.Ns")
			golden := filepath.Join("testdata", c.name+".golden")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./demo -update)", err)
			}
			if got != string(want) {
				t.Errorf("output differs from %s (go test ./demo -update rewrites it):\n%s", golden, got)
			}
		})
	}
}

// A Run that fails says why, and leaves nothing running: a custodian
// binary that does not exist stops it before anything is served.
func TestDemoFailsWithACause(t *testing.T) {
	o := build(t)
	o.Custodian = filepath.Join(t.TempDir(), "no-such-custodian")
	var out bytes.Buffer
	err := Run(context.Background(), o, &out)
	if err == nil || !strings.Contains(err.Error(), "no-such-custodian") {
		t.Fatalf("Run with no custodian: %v", err)
	}
}

// TestNodeLinesAreDocumented: every kubectl line the node demo runs is
// one docs/kubernetes.md shows, as written (the exec line with HOST:PORT
// for the upstream's address).
func TestNodeLinesAreDocumented(t *testing.T) {
	page, err := os.ReadFile(filepath.Join("..", "docs", "kubernetes.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range append(NodeLines, curlLine("HOST:PORT"), "kubectl logs "+nodePod+" -c custodian") {
		if !strings.Contains(string(page), "\n"+line+"\n") {
			t.Errorf("docs/kubernetes.md does not show the line %q", line)
		}
	}
}
