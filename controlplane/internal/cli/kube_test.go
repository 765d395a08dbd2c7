package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRenderKubeFlags: the pod's flags shape the objects; a health
// listener the kubelet cannot reach, and local targets, are noted; a
// valueFrom's Secret is named as the user's; a bad flag is a usage error
// naming it.
func TestRenderKubeFlags(t *testing.T) {
	dir, ca := newCA(t)
	held := filepath.Join(dir, "held.json")
	os.WriteFile(held, []byte(`{"pod":"p","orchestrator":"o:1","secrets":[{"name":"K","hosts":["127.0.0.2:8443"],"valueFrom":{"secretKeyRef":{"name":"user-keys","key":"k"}}}]}`), 0o644)
	out := filepath.Join(dir, "out")
	code, _, errOut := run("render", "--manifest", held, "--ca", ca, "--out", out, "--allow-local-targets", "--health", "127.0.0.1:15021",
		"--namespace", "agents", "--sidecar", "serve", "--agent-image", "registry.example/agent:1", "--agent-uid", "2000")
	if code != 0 {
		t.Fatalf("render: %d %q", code, errOut)
	}
	for _, want := range []string{
		"controlplane render: kubernetes/ projects the Custodian's values from Secret user-keys (your Secret) with keys: k\n",
		"controlplane render: kubernetes/ projects the Custodian's values from Secret jr2-held-secrets-p (the pod's convention Secret, which render never writes; create it) with keys: JR2_SANDBOX_TOKEN\n",
		"controlplane render: the health listener is on 127.0.0.1:15021, which the kubelet's probes of the pod's IP never reach",
		"controlplane render: custodian.json accepts local targets (--allow-local-targets)",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	pod, err := os.ReadFile(filepath.Join(out, "kubernetes", "pod-p.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"namespace: agents", "image: registry.example/agent:1", "runAsUser: 2000", "- /opt/jr2/bin/custodian", "image: jr2-custodian-serve"} {
		if !strings.Contains(string(pod), want) {
			t.Errorf("the Pod lacks %q", want)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--sidecar", "golang"}, `--sidecar "golang": want envoy`},
		{[]string{"--agent-uid", "0"}, "--agent-uid 0: the agent runs as a non-root uid"},
	} {
		code, _, errOut := run(append([]string{"render", "--manifest", held, "--ca", ca, "--out", filepath.Join(dir, "x"), "--allow-local-targets"}, tc.args...)...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: %d %q; want exit 2 naming %q", tc.args, code, errOut, tc.want)
		}
	}
	code, _, errOut = run("render", "--manifest", held, "--ca", ca, "--out", filepath.Join(dir, "y"), "--allow-local-targets", "--agent-uid", "65532")
	if code != 1 || !strings.Contains(errOut, "--agent-uid 65532: the agent needs a uid of its own") || !strings.Contains(errOut, "nothing was written") {
		t.Errorf("--agent-uid 65532: %d %q", code, errOut)
	}
}
