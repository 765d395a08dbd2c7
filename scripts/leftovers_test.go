// Package scripts holds the tests of the shell scripts CI and make run.
package scripts

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestLeftoversSeesWhatAFirstRunMakes holds scripts/leftovers.sh, the
// check .ci/run puts around make test, to seeing what a run leaves even
// where a file of that name was there before it (on a machine that ran
// Envoy once, its /dev/shm region): it names each, fails, and leaves the
// machine as it was; a clean command passes with its own exit code.
func TestLeftoversSeesWhatAFirstRunMakes(t *testing.T) {
	if os.Getuid() != 0 || exec.Command("unshare", "--mount", "true").Run() != nil {
		if os.Getenv("JR2_REQUIRE_ALL") == "1" {
			t.Fatal("scripts/leftovers.sh overlays the scratch places in a mount namespace: run as root")
		}
		t.Skip("NOT RUN: scripts/leftovers.sh's overlay needs root and a mount namespace")
	}
	probe := "jr2-leftovers-probe-" + filepath.Base(t.TempDir())
	pre := filepath.Join("/dev/shm", probe)
	if err := os.WriteFile(pre, []byte("before"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(pre) })

	// leftovers.sh compares /run/netns before and after, a place no
	// overlay hides: under make test the contained runs of the packages
	// beside this one make and remove named namespaces there, so the
	// script runs in a mount namespace of its own with an empty
	// /run/netns, where it sees only what its command makes.
	run := func(script string) (int, string) {
		cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c",
			`mkdir -p /run/netns && mount -t tmpfs jr2-leftovers-test /run/netns && exec ./leftovers.sh sh -c "$0"`, script)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		if err != nil && cmd.ProcessState == nil {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode(), out.String()
	}

	code, out := run("echo again > " + pre + "; mkdir /tmp/" + probe + "; touch /tmp/" + probe + "/f /var/tmp/" + probe)
	if code != 1 {
		t.Errorf("a run that leaves files: exit %d, want 1\n%s", code, out)
	}
	for _, p := range []string{pre, "/tmp/" + probe, "/tmp/" + probe + "/f", "/var/tmp/" + probe} {
		if !strings.Contains(out, "\n  "+p+"\n") {
			t.Errorf("%s is not named as left behind:\n%s", p, out)
		}
	}
	if b, _ := os.ReadFile(pre); string(b) != "before" {
		t.Errorf("the machine's own %s was changed: %q", pre, b)
	}
	for _, p := range []string{"/tmp/" + probe, "/var/tmp/" + probe} {
		if _, err := os.Lstat(p); err == nil {
			os.RemoveAll(p)
			t.Errorf("%s reached the machine", p)
		}
	}

	code, out = run("cat " + pre + " > /dev/null; f=$(mktemp); rm $f; exit 3")
	if code != 3 || !strings.Contains(out, "left nothing behind") {
		t.Errorf("a clean run that exits 3: exit %d\n%s", code, out)
	}
}
