package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRenderNotes: after a render, stderr names every value file the
// Custodian needs at start, the Sandbox token's included (a user who
// supplied only the held secrets' values met it first as serve's stop),
// and with --allow-local-targets which clients go around the Custodian to
// each loopback target; stdout stays the one summary line.
func TestRenderNotes(t *testing.T) {
	dir, ca := newCA(t)
	for i, tc := range []struct {
		name, host string
		want       string // the line about the target; "" for none
	}{
		{"NO_PROXY address", "127.0.0.1:8443", "127.0.0.1:8443 is in harness.env's NO_PROXY: every client (curl, Python, Node, Go) goes to it directly"},
		{"NO_PROXY name", "localhost:8443", "localhost:8443 is in harness.env's NO_PROXY"},
		{"IPv6 loopback", "[::1]:8443", "[::1]:8443 is in harness.env's NO_PROXY"},
		{"other loopback", "127.0.0.2:8443", "127.0.0.2:8443 is loopback: curl, Python and Node go through the Custodian to it, but a Go client goes directly"},
		{"link-local", "169.254.10.1:443", "169.254.10.1:443 is link-local"},
		{"not guarded", "api.example.com:443", ""},
	} {
		held := filepath.Join(dir, "held.json")
		os.WriteFile(held, []byte(`{"pod":"p","orchestrator":"o:1","secrets":[{"name":"K","hosts":["`+tc.host+`"]}]}`), 0o644)
		code, out, errOut := run("render", "--manifest", held, "--ca", ca, "--out", filepath.Join(dir, "out", string(rune('a'+i))), "--values-dir", "/v", "--allow-local-targets")
		if code != 0 || out != "pod p: Custodian holds K; 1 bound target\n" {
			t.Fatalf("%s: %d %q %q", tc.name, code, out, errOut)
		}
		var lines []string // the notes of the files; the objects' (kubeNotes) have their own test
		for _, l := range strings.Split(strings.TrimSuffix(errOut, "\n"), "\n") {
			if !strings.Contains(l, "kubernetes/") {
				lines = append(lines, l)
			}
		}
		if want := "controlplane render: the Custodian starts only with one value file per held secret in /v: K, JR2_SANDBOX_TOKEN ("; !strings.HasPrefix(lines[0], want) {
			t.Errorf("%s: the first note is %q; want it to begin %q", tc.name, lines[0], want)
		}
		switch {
		case tc.want == "" && len(lines) != 1:
			t.Errorf("%s: notes %q; want none about the target", tc.name, lines[1:])
		case tc.want != "" && (len(lines) != 2 || !strings.HasPrefix(lines[1], "controlplane render: --allow-local-targets: "+tc.want)):
			t.Errorf("%s: notes %q; want one beginning %q", tc.name, lines[1:], tc.want)
		}
	}
}

// newCA is a test directory holding a CA made by ca init, with the
// system roots made in code.
func newCA(t *testing.T) (dir, ca string) {
	roots(t)
	dir = t.TempDir()
	ca = filepath.Join(dir, "ca")
	if code, _, errOut := run("ca", "init", "--dir", ca); code != 0 {
		t.Fatal(errOut)
	}
	return dir, ca
}
