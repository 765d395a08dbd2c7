package cli_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestEffectorObjects: controlplane effector writes the three objects of
// examples/effector.json, names the Secrets they project on stderr, and
// refuses a config the Effector would refuse, writing nothing.
func TestEffectorObjects(t *testing.T) {
	out := t.TempDir()
	code, stdout, stderr := run("effector", "--config", filepath.Join("..", "..", "..", "examples", "effector.json"), "--out", out, "--namespace", "agents")
	if code != 0 || stdout != "effector jr2-instance-effector: 3 objects in "+filepath.Join(out, "kubernetes")+"\n" {
		t.Fatalf("effector: %d %q %q", code, stdout, stderr)
	}
	want := "controlplane effector: the Deployment projects effector-key from your Secret jr2-instance-effector-key, key effector-key; create it (render never writes a value)\n" +
		"controlplane effector: the Deployment projects EXAMPLE_API_KEY from your Secret jr2-instance-effector-secrets, key EXAMPLE_API_KEY; create it (render never writes a value)\n"
	if stderr != want {
		t.Errorf("stderr %q; want %q", stderr, want)
	}
	entries, _ := os.ReadDir(filepath.Join(out, "kubernetes"))
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if w := []string{"configmap-jr2-instance-effector.yaml", "deployment-jr2-instance-effector.yaml", "service-jr2-instance-effector.yaml"}; !slices.Equal(names, w) {
		t.Errorf("files %v; want %v", names, w)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte(`{"placement":"instance","commands":true}`), 0o644)
	out2 := filepath.Join(t.TempDir(), "o")
	code, _, stderr = run("effector", "--config", bad, "--out", out2)
	if code != 1 || !strings.Contains(stderr, "commands or pushes need the agent's worktree") {
		t.Errorf("commands: %d %q", code, stderr)
	}
	if _, err := os.Stat(out2); !os.IsNotExist(err) {
		t.Error("a refused config wrote DIR")
	}
}
