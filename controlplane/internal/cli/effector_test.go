package cli_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"jr2.dev/boundary/internal/testkit/testpki"
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

// TestEffectorCAFile: --ca-file adds the CA ConfigMap, a fourth file; a
// file that is gone, holds no certificate or holds a private key is
// refused naming --ca-file and the fix, writing nothing, and the key is in
// no byte of the answer.
func TestEffectorCAFile(t *testing.T) {
	conf := filepath.Join("..", "..", "..", "examples", "effector.json")
	ca := testpki.NewCA(t, "corp-root")
	dir := t.TempDir()
	good := ca.WriteFile(t, dir, "roots.pem")
	out := t.TempDir()
	code, stdout, stderr := run("effector", "--config", conf, "--out", out, "--ca-file", good)
	if code != 0 || stdout != "effector jr2-instance-effector: 4 objects in "+filepath.Join(out, "kubernetes")+"\n" {
		t.Fatalf("effector --ca-file: %d %q %q", code, stdout, stderr)
	}
	b, err := os.ReadFile(filepath.Join(out, "kubernetes", "configmap-jr2-instance-effector-ca.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), strings.Split(string(ca.CertPEM), "\n")[1]) {
		t.Errorf("the CA ConfigMap does not hold the certificate:\n%s", b)
	}
	withKey := filepath.Join(dir, "with-key.pem")
	os.WriteFile(withKey, append(append([]byte{}, ca.CertPEM...), ca.KeyPEM...), 0o600)
	empty := filepath.Join(dir, "empty.pem")
	os.WriteFile(empty, nil, 0o644)
	for _, tc := range []struct{ file, want string }{
		{withKey, `controlplane effector: --ca-file: block 2 is a "EC PRIVATE KEY" block; a ConfigMap holds public certificates only: pass the CA's certificates, never its key; nothing was written` + "\n"},
		{empty, "controlplane effector: --ca-file: no PEM certificate found; pass a PEM file of the certificates your https targets chain to, or drop --ca-file; nothing was written\n"},
		{filepath.Join(dir, "gone.pem"), "controlplane effector: --ca-file: open " + filepath.Join(dir, "gone.pem") + ": no such file or directory; name a PEM file of the certificates your https targets chain to, or drop --ca-file; nothing was written\n"},
	} {
		out := filepath.Join(t.TempDir(), "o")
		code, stdout, stderr := run("effector", "--config", conf, "--out", out, "--ca-file", tc.file)
		if code != 1 || stdout != "" || stderr != tc.want {
			t.Errorf("%s: %d %q %q; want 1 and %q", filepath.Base(tc.file), code, stdout, stderr, tc.want)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("%s: a refused --ca-file wrote DIR", filepath.Base(tc.file))
		}
		for _, line := range strings.Split(string(ca.KeyPEM), "\n") {
			if len(line) > 16 && strings.Contains(stderr, line) {
				t.Errorf("%s: stderr holds a line of the key", filepath.Base(tc.file))
			}
		}
	}
}
