package cli_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"jr2.dev/boundary/controlplane/internal/cli"
)

// TestRenderDataPlane: --data-plane module renders the dynamic-modules
// filter loading --module by its path; a wrong plane, or the other plane's
// object flag, is a usage error that names the fix and writes nothing.
func TestRenderDataPlane(t *testing.T) {
	roots(t)
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca")
	if code, _, errOut := run("ca", "init", "--dir", ca); code != 0 {
		t.Fatal(errOut)
	}
	held := filepath.Join("..", "..", "testdata", "manifests", "small.json")
	out := filepath.Join(dir, "module")
	code, _, stderr := run("render", "--manifest", held, "--ca", ca, "--out", out, "--data-plane", "module", "--module", "/opt/m/custodian-module.so")
	if code != cli.ExitOK {
		t.Fatal(stderr)
	}
	envoy, _ := os.ReadFile(filepath.Join(out, "envoy.json"))
	for _, want := range []string{
		`"@type":"type.googleapis.com/envoy.extensions.filters.http.dynamic_modules.v3.DynamicModuleFilter"`,
		`"@type":"type.googleapis.com/envoy.extensions.filters.http.dynamic_modules.v3.DynamicModuleFilterPerRoute"`,
		`"filename":"/opt/m/custodian-module.so"`,
	} {
		if !bytes.Contains(envoy, []byte(want)) {
			t.Errorf("--data-plane module: envoy.json lacks %s", want)
		}
	}
	if bytes.Contains(envoy, []byte("golang")) {
		t.Error("--data-plane module: envoy.json still names the golang filter")
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--data-plane", "contrib"}, `controlplane render: --data-plane "contrib": want golang (the contrib golang filter, --plugin) or module (core Envoy's dynamic module, --module)` + "\n"},
		{[]string{"--data-plane", "module", "--plugin", "/opt/x.so"}, "controlplane render: --plugin is not read with --data-plane module, which loads --module; drop it or choose the other data plane\n"},
		{[]string{"--module", "/opt/m.so"}, "controlplane render: --module is not read with --data-plane golang, which loads --plugin; drop it or choose the other data plane\n"},
		{[]string{"--data-plane", "module", "--module", "lib/m.so"}, `controlplane render: bootstrap: --mount-dir "` + filepath.Join(dir, "refused") + `" and --module "lib/m.so" must be absolute paths in the Custodian container; nothing was written` + "\n"},
	} {
		refused := filepath.Join(dir, "refused")
		code, stdout, stderr := run(append([]string{"render", "--manifest", held, "--ca", ca, "--out", refused}, tc.args...)...)
		if code == cli.ExitOK || stdout != "" || stderr != tc.want {
			t.Errorf("%v: exit %d, %q\n got: %q\nwant: %q", tc.args, code, stdout, stderr, tc.want)
		}
		if _, err := os.Stat(refused); err == nil {
			t.Errorf("%v: DIR was created", tc.args)
		}
	}
}
