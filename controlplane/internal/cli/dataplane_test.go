package cli_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"jr2.dev/boundary/controlplane/internal/cli"
)

// TestRenderDataPlane: --data-plane module renders the dynamic-modules
// filter loading --module by its path; a wrong plane, or the other plane's
// object flag, is a usage error that names the fix and writes nothing; a
// --module that is not a readable file here is refused, naming the flag
// and the fix, unless --module-in-pod says the path is the container's
// (otherwise Envoy, not render, is the first to fail, on a path it
// cannot load).
func TestRenderDataPlane(t *testing.T) {
	roots(t)
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca")
	if code, _, errOut := run("ca", "init", "--dir", ca); code != 0 {
		t.Fatal(errOut)
	}
	held := filepath.Join("..", "..", "testdata", "manifests", "small.json")
	out := filepath.Join(dir, "module")
	code, _, stderr := run("render", "--manifest", held, "--ca", ca, "--out", out, "--data-plane", "module", "--module", "/opt/m/custodian-module.so", "--module-in-pod")
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

	module := filepath.Join(dir, "custodian-module.so")
	os.WriteFile(module, []byte("an ELF stands here"), 0o644)
	if code, _, stderr := run("render", "--manifest", held, "--ca", ca, "--out", filepath.Join(dir, "here"), "--data-plane", "module", "--module", module); code != cli.ExitOK {
		t.Errorf("--module naming a file on this machine: %s", stderr)
	}
	const moduleFix = "; build it (make module writes bin/custodian-module.so) and name its absolute path, or add --module-in-pod if the path is where the Custodian container sees it, not a file on this machine; nothing was written\n"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--data-plane", "module", "--module", filepath.Join(dir, "examples", "bin", "custodian-module.so")}, "controlplane render: --module: open " + filepath.Join(dir, "examples", "bin", "custodian-module.so") + ": no such file or directory" + moduleFix},
		{[]string{"--module", "/opt/jr2/lib/custodian-module.so"}, "controlplane render: --module: open /opt/jr2/lib/custodian-module.so: no such file or directory" + moduleFix},
		{[]string{"--data-plane", "module", "--module", dir}, "controlplane render: --module: " + dir + " is not a regular file" + moduleFix},
		{[]string{"--data-plane", "golang", "--module-in-pod"}, "controlplane render: --module-in-pod is read only with --data-plane module; drop it\n"},
		{[]string{"--data-plane", "contrib"}, `controlplane render: --data-plane "contrib": want module (core Envoy's dynamic module, --module; the default) or golang (the contrib golang filter, --plugin)` + "\n"},
		{[]string{"--data-plane", "module", "--plugin", "/opt/x.so"}, "controlplane render: --plugin is not read with --data-plane module, which loads --module; drop it or choose the other data plane\n"},
		{[]string{"--plugin", "/opt/x.so"}, "controlplane render: --plugin is not read with --data-plane module, which loads --module; drop it or choose the other data plane\n"},
		{[]string{"--data-plane", "golang", "--module", "/opt/m.so"}, "controlplane render: --module is not read with --data-plane golang, which loads --plugin; drop it or choose the other data plane\n"},
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

// TestDefaultDataPlaneIsThePods: a render that names no data plane writes
// the module's envoy.json, loading the module where the Custodian image
// holds it, and the Pod of the same render runs core Envoy on that same
// envoy.json: with --mount-dir the pod's config directory, DIR's file and
// the ConfigMap's are the same bytes. The usage says which is the default.
func TestDefaultDataPlaneIsThePods(t *testing.T) {
	dir, ca := newCA(t)
	held := filepath.Join("..", "..", "testdata", "manifests", "small.json")
	out := filepath.Join(dir, "out")
	if code, _, stderr := run("render", "--manifest", held, "--ca", ca, "--out", out, "--mount-dir", "/etc/jr2/custodian/config"); code != cli.ExitOK {
		t.Fatal(stderr)
	}
	envoy, err := os.ReadFile(filepath.Join(out, "envoy.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(envoy, []byte(`"filename":"/opt/jr2/lib/custodian-module.so"`)) || bytes.Contains(envoy, []byte("golang")) {
		t.Error("a render with no --data-plane: envoy.json does not load the module from the Custodian image's path, or names the golang filter")
	}
	var cm corev1.ConfigMap
	b, err := os.ReadFile(filepath.Join(out, "kubernetes", "configmap-ws-7f3a-custodian.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, &cm); err != nil {
		t.Fatal(err)
	}
	if cm.Data["envoy.json"] != string(envoy) {
		t.Error("DIR/envoy.json of a render with no --data-plane is not the Pod's envoy.json")
	}
	var pod corev1.Pod
	if b, err = os.ReadFile(filepath.Join(out, "kubernetes", "pod-ws-7f3a.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, &pod); err != nil {
		t.Fatal(err)
	}
	if c := pod.Spec.InitContainers; len(c) != 1 || !slices.Contains(c[0].Command, "/usr/local/bin/envoy") {
		t.Errorf("the Pod's Custodian does not run core Envoy: %+v", c)
	}
	if !strings.Contains(cli.Usage, "module (default;") {
		t.Error("the usage does not name module as --data-plane's default")
	}
}
