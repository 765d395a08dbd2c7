package run

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestPrivilegeError: the check a run makes before its bundle and key —
// root with both capabilities passes; another uid is told the run needs
// root and how to keep the secrets' variables; a root without a
// capability is told which (ip netns add's own failure said neither).
func TestPrivilegeError(t *testing.T) {
	all := func(int) (bool, error) { return true, nil }
	noNet := func(c int) (bool, error) { return c != capNetAdmin, nil }
	none := func(int) (bool, error) { return false, nil }
	for _, tc := range []struct {
		euid int
		has  func(int) (bool, error)
		want string
	}{
		{0, all, ""},
		{1000, none, "a contained run needs root: it makes network and mount namespaces (ip netns add, with CAP_SYS_ADMIN and CAP_NET_ADMIN), which uid 1000 cannot; run it as root (sudo -E keeps the variables the policy's secrets name)"},
		{0, noNet, "a contained run needs CAP_NET_ADMIN, which this root process lacks (a container without them?): it makes network and mount namespaces; run it where root holds them"},
		{0, func(int) (bool, error) { return false, errors.New("capget: EPERM") }, "cannot read this process's capabilities: capget: EPERM"},
	} {
		err := privilegeError(tc.euid, tc.has)
		if got := ""; err != nil {
			got = err.Error()
			if got != tc.want {
				t.Errorf("uid %d: got  %q\nwant %q", tc.euid, got, tc.want)
			}
		} else if tc.want != "" {
			t.Errorf("uid %d: no refusal; want %q", tc.euid, tc.want)
		}
	}
	if os.Geteuid() == 0 {
		if err := privileged(); err != nil {
			t.Errorf("this root test process is refused: %v", err)
		}
	}
}

// TestNonRootRunIsRefused: custodian run as an unprivileged uid (65534)
// exits 1 saying it needs root and that no bundle was written, announces
// no key, and leaves no bundle. Before the fix it
// printed the bundle's key and then failed in ip netns add.
func TestNonRootRunIsRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED, NOT PROVEN: needs root to start the runner as another uid")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o777)
	os.Chmod(filepath.Dir(dir), 0o755)
	bin := filepath.Join(dir, "run.test")
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	pol := filepath.Join(dir, "policy.toml")
	os.WriteFile(pol, []byte("allow_hosts = [\"example.com\"]\nread_paths = [\"/usr\"]\nwrite_paths = [\"/dev/null\"]\n[secrets]\nEXAMPLE_TOKEN = { env = \"EXAMPLE_TOKEN\", hosts = [\"example.com\"] }\n"), 0o644)
	bundlePath := filepath.Join(dir, "run.jsonl")
	args, _ := json.Marshal([]string{"--policy", pol, "--bundle", bundlePath, "--", "true"})
	cmd := exec.Command(bin)
	cmd.Dir = dir
	cmd.Env = []string{modeEnv + "=runner", argsEnv + "=" + string(args), "EXAMPLE_TOKEN=Zq3vX9pL2mK8wR4tY7uB1nC6", "PATH=" + os.Getenv("PATH")}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Run()
	want := "custodian run: a contained run needs root: it makes network and mount namespaces (ip netns add, with CAP_SYS_ADMIN and CAP_NET_ADMIN), which uid 65534 cannot; run it as root (sudo -E keeps the variables the policy's secrets name); the command did not start, and no bundle was written\n"
	if code := cmd.ProcessState.ExitCode(); code != 1 || stderr.String() != want || stdout.Len() != 0 {
		t.Errorf("exit %d, stdout %q\n got: %q\nwant: %q", code, stdout.String(), stderr.String(), want)
	}
	if strings.Contains(stderr.String(), "the bundle's key") {
		t.Error("a refused run announced a key")
	}
	if _, err := os.Stat(bundlePath); err == nil {
		t.Error("a refused run wrote a bundle")
	}
}
