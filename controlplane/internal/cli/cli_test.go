package cli_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"jr2.dev/boundary/controlplane/internal/cli"
	"jr2.dev/boundary/internal/testkit/testpki"
)

func run(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = cli.Main(args, &o, &e)
	return code, o.String(), e.String()
}

func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string // in stderr, or in stdout for help
	}{
		{nil, cli.ExitUsage, "usage:"},
		{[]string{"rotate"}, cli.ExitUsage, `unknown command "rotate"`},
		{[]string{"ca"}, cli.ExitUsage, `controlplane ca: the one ca command is "controlplane ca init --dir CA"`},
		{[]string{"ca", "list"}, cli.ExitUsage, `controlplane ca: the one ca command is "controlplane ca init --dir CA"`},
		{[]string{"ca", "init"}, cli.ExitUsage, "--dir is required"},
		{[]string{"render", "--manifest", "m.json", "--ca", "ca"}, cli.ExitUsage, "--out is required"},
		{[]string{"render", "--manifst", "m.json"}, cli.ExitUsage, "flag provided but not defined: -manifst"},
		{[]string{"key", "--signing-key", "k"}, cli.ExitUsage, "--placement is required"},
		{[]string{"key", "--signing-key", "k", "--placement", "a b"}, cli.ExitUsage, "--placement is a placement name"},
		{[]string{"ca", "init", "--dir", "x", "extra"}, cli.ExitUsage, `unexpected argument "extra"`},
		{[]string{"help"}, cli.ExitOK, "--mount-dir"},
	} {
		code, out, errOut := run(tc.args...)
		text := errOut
		if code == cli.ExitOK {
			text = out
		}
		if code != tc.code || !strings.Contains(text, tc.want) {
			t.Errorf("%v: exit %d, %q; want %d and %q", tc.args, code, text, tc.code, tc.want)
		}
	}
}

func TestCAInit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ca")
	if code, out, errOut := run("ca", "init", "--dir", dir); code != 0 || out != "" || errOut != "" {
		t.Fatalf("ca init: %d %q %q", code, out, errOut)
	}
	key, _ := os.ReadFile(filepath.Join(dir, "ca.key"))
	code, _, errOut := run("ca", "init", "--dir", dir)
	if code != cli.ExitFail || !strings.Contains(errOut, "never replaces a CA") {
		t.Errorf("second ca init: %d %q; want a refusal", code, errOut)
	}
	if again, _ := os.ReadFile(filepath.Join(dir, "ca.key")); !bytes.Equal(key, again) {
		t.Error("second ca init changed the key")
	}
}

// TestKey: the Effector key is HMAC-SHA256(signing key without its one
// trailing newline, "effector:" + placement), 64 lowercase hex, computed
// here independently.
func TestKey(t *testing.T) {
	dir := t.TempDir()
	const secret = "SENTINEL-signing-key-7c1e"
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte("effector:ws-7f3a"))
	want := hex.EncodeToString(mac.Sum(nil)) + "\n"
	for _, content := range []string{secret, secret + "\n", secret + "\r\n"} {
		f := filepath.Join(dir, "k")
		os.WriteFile(f, []byte(content), 0o600)
		code, out, errOut := run("key", "--signing-key", f, "--placement", "ws-7f3a")
		if code != 0 || out != want || errOut != "" {
			t.Errorf("key of %q: %d %q %q; want %q", content, code, out, errOut, want)
		}
	}
	os.WriteFile(filepath.Join(dir, "empty"), []byte("\n"), 0o600)
	for _, f := range []string{filepath.Join(dir, "empty"), filepath.Join(dir, "missing")} {
		code, out, errOut := run("key", "--signing-key", f, "--placement", "instance")
		if code != cli.ExitFail || out != "" || !strings.Contains(errOut, "signing key") {
			t.Errorf("key from %s: %d %q %q; want a failure", f, code, out, errOut)
		}
	}
	if code, _, _ := run("key", "--signing-key", filepath.Join(dir, "k"), "--placement", "instance"); code != 0 {
		t.Error("placement instance failed")
	}
}

// roots points SSL_CERT_FILE at a PEM bundle of one root made in code, as
// the system roots.
func roots(t *testing.T) {
	t.Setenv("SSL_CERT_FILE", testpki.NewCA(t, "root").WriteFile(t, t.TempDir(), "roots.pem"))
}

func TestRender(t *testing.T) {
	roots(t)
	dir := t.TempDir()
	ca, out := filepath.Join(dir, "ca"), filepath.Join(dir, "out")
	if code, _, errOut := run("ca", "init", "--dir", ca); code != 0 {
		t.Fatal(errOut)
	}
	held := filepath.Join("..", "..", "testdata", "manifests", "small.json") // the spec's example
	code, stdout, stderr := run("render", "--manifest", held, "--ca", ca, "--out", out)
	notes := "controlplane render: the Custodian starts only with one value file per held secret in /etc/jr2/custodian/values: " +
		"ANTHROPIC_API_KEY, GITHUB_TOKEN, JR2_SANDBOX_TOKEN (JR2_SANDBOX_TOKEN is the Sandbox token the control listener presents to the Orchestrator; every pod holds it)\n" +
		"controlplane render: kubernetes/ projects the Custodian's values from Secret jr2-held-secrets-ws-7f3a (the pod's convention Secret, which render never writes; create it) with keys: ANTHROPIC_API_KEY, GITHUB_TOKEN, JR2_SANDBOX_TOKEN\n"
	if code != 0 || stdout != "pod ws-7f3a: Custodian holds ANTHROPIC_API_KEY, GITHUB_TOKEN; 3 bound targets\n" || stderr != notes {
		t.Fatalf("render: %d %q %q", code, stdout, stderr)
	}
	envoy, err := os.ReadFile(filepath.Join(out, "envoy.json"))
	if err != nil || !bytes.Contains(envoy, []byte(`"filename":"`+out+`/tls/api.github.com_443.crt"`)) {
		t.Errorf("envoy.json does not name the leaves under DIR's absolute path (--mount-dir's default): %v", err)
	}

	// --mount-dir and --harness-ca-dir move the paths; the flags reach render.
	out2 := filepath.Join(dir, "out2")
	code, _, stderr = run("render", "--manifest", held, "--ca", ca, "--out", out2, "--mount-dir", "/mnt/custodian", "--harness-ca-dir", "/opt/ca", "--values-dir", "/run/values", "--data-plane", "golang", "--plugin", "/opt/x.so")
	if code != 0 {
		t.Fatal(stderr)
	}
	envoy, _ = os.ReadFile(filepath.Join(out2, "envoy.json"))
	env, _ := os.ReadFile(filepath.Join(out2, "harness.env"))
	cfg, _ := os.ReadFile(filepath.Join(out2, "custodian.json"))
	for what, ok := range map[string]bool{
		"mount dir":  bytes.Contains(envoy, []byte(`"/mnt/custodian/ca/upstream.crt"`)),
		"plugin":     bytes.Contains(envoy, []byte(`"library_path":"/opt/x.so"`)),
		"harness CA": bytes.Contains(env, []byte("SSL_CERT_FILE=/opt/ca/bundle.crt\n")),
		"values dir": bytes.Contains(cfg, []byte(`"valuesDir": "/run/values"`)),
	} {
		if !ok {
			t.Errorf("--%s did not reach the rendered files", what)
		}
	}

	// A refused manifest: every line, exit 1, nothing written.
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"pod":"p","orchestrator":"o:1","secrets":[{"name":"HTTPS_PROXY","hosts":["*.x.com"]}]}`), 0o644)
	out3 := filepath.Join(dir, "out3")
	code, stdout, stderr = run("render", "--manifest", bad, "--ca", ca, "--out", out3)
	want := "controlplane render: " + bad + " is refused; nothing was written. Fix each line:\n" +
		"secrets[0].name: HTTPS_PROXY: render sets the Harness's proxy and trust variables itself, so none can be held; hold the credential under another name\n"
	if code != cli.ExitFail || stdout != "" || stderr != want {
		t.Errorf("refused render: %d %q\n got: %q\nwant: %q", code, stdout, stderr, want)
	}
	if _, err := os.Stat(out3); err == nil {
		t.Error("a refused render created DIR")
	}
	code, _, stderr = run("render", "--manifest", filepath.Join(dir, "none.json"), "--ca", ca, "--out", out3)
	if code != cli.ExitFail || !strings.Contains(stderr, "--manifest:") || !strings.Contains(stderr, "nothing was written") {
		t.Errorf("missing manifest: %d %q", code, stderr)
	}
}

// TestRenderPathsAndHealth: a relative --harness-ca-dir is refused as a
// relative --values-dir is (harness.env would name a path that holds only
// where render ran); --health moves the health listener in custodian.json
// and envoy.json, and a --health that is not IP:port is refused; a
// --ca-bundle that is gone names the fix (the by-hand block's stop
// removes upstream-ca.pem, and a re-render must say what to do).
func TestRenderPathsAndHealth(t *testing.T) {
	roots(t)
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca")
	if code, _, errOut := run("ca", "init", "--dir", ca); code != 0 {
		t.Fatal(errOut)
	}
	held := filepath.Join("..", "..", "testdata", "manifests", "small.json")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--harness-ca-dir", "pod/ca"}, `controlplane render: --harness-ca-dir "pod/ca" is relative; write an absolute path, where the Harness container sees DIR/ca (on one machine: DIR/ca's absolute path, "$PWD/pod/ca"): harness.env names it, wherever the Harness runs from; nothing was written` + "\n"},
		{[]string{"--health", "localhost:15021"}, `controlplane render: --health "localhost:15021": want IP:port, such as 127.0.0.1:15021 (one machine) or 0.0.0.0:15021 (a pod's kubelet); nothing was written` + "\n"},
		{[]string{"--ca-bundle", "upstream-ca.pem"}, "controlplane render: --ca-bundle: open upstream-ca.pem: no such file or directory; name a PEM file of the extra roots that exists now (a CA file its server removes when it stops must be rendered while that server runs), or drop --ca-bundle; nothing was written\n"},
	} {
		out := filepath.Join(dir, "refused")
		code, stdout, stderr := run(append([]string{"render", "--manifest", held, "--ca", ca, "--out", out}, tc.args...)...)
		if code != cli.ExitFail || stdout != "" || stderr != tc.want {
			t.Errorf("%v: exit %d, %q\n got: %q\nwant: %q", tc.args, code, stdout, stderr, tc.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%v: DIR was created", tc.args)
		}
	}
	out := filepath.Join(dir, "out")
	if code, _, stderr := run("render", "--manifest", held, "--ca", ca, "--out", out, "--health", "127.0.0.1:15021"); code != 0 {
		t.Fatal(stderr)
	}
	cfg, _ := os.ReadFile(filepath.Join(out, "custodian.json"))
	envoy, _ := os.ReadFile(filepath.Join(out, "envoy.json"))
	if !bytes.Contains(cfg, []byte(`"health": "127.0.0.1:15021"`)) || bytes.Contains(cfg, []byte("0.0.0.0")) {
		t.Errorf("--health 127.0.0.1:15021 did not reach custodian.json:\n%s", cfg)
	}
	if !bytes.Contains(envoy, []byte(`"address":"127.0.0.1","port_value":15021`)) || bytes.Contains(envoy, []byte(`"address":"0.0.0.0","port_value":15021`)) {
		t.Errorf("--health 127.0.0.1:15021 did not reach envoy.json's health listener")
	}
}
