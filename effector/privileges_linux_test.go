package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"jr2.dev/boundary/effector/internal/reap/reaptest"
	"jr2.dev/boundary/internal/testkit/capstest"
)

// privilegeProbeEnv makes the test binary the probe a command runs: it
// tries what a confined child must not do (capstest) and prints what it
// got, then holds for the test to read its /proc status. It runs before
// TestMain.
const privilegeProbeEnv = "JR2_EFFECTOR_TEST_PRIVILEGE_PROBE"

func init() {
	if os.Getenv(privilegeProbeEnv) == "" {
		return
	}
	for _, w := range os.Args[1:] {
		op, arg, _ := strings.Cut(w, ":")
		switch op {
		case "attempts":
			for _, l := range capstest.Attempt(arg) {
				fmt.Println(strings.ReplaceAll(l, arg, "TMPDIR"))
			}
		case "bpf":
			fmt.Println("bpf:", capstest.Result(capstest.LoadBPF()))
		case "euid":
			fmt.Println("euid", os.Geteuid())
		case "hold":
			fmt.Println("held")
			// Told through a file in the scratch: the output is read only
			// once the command has settled.
			if err := os.WriteFile(filepath.Join(arg, "held"), nil, 0o600); err != nil {
				fmt.Println(err)
			}
			time.Sleep(time.Minute) // the test stops the command
		}
	}
	os.Exit(0)
}

// TestCommandHoldsNoPrivilege: a command of a root Effector
// makes no device node in its TMPDIR (kmsg 1,11, loop0 7,0), makes the
// fifo and socket its scratch allows, loads no BPF program, and a
// setuid-root copy of a binary in its scratch runs with every capability
// set empty, the bounding set too, and NO_NEW_PRIVS, as its /proc status
// shows while it holds.
func TestCommandHoldsNoPrivilege(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED, NOT PROVEN: the Effector runs as root here (run as root)")
	}
	r := newCommandRig(t, nil)
	probe := filepath.Join(r.f.TopDir, "bin", "probe") // beside the denied trees: the image, for the walk
	if err := os.MkdirAll(filepath.Dir(probe), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(probe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	marker := reaptest.Marker()
	reaptest.Cleanup(t, marker)
	r.start(t, "privileges", 30000, shell(`cp "$PROBE" "$TMPDIR/suid" && chmod 4755 "$TMPDIR/suid" || exit 9
exec "$TMPDIR/suid" "attempts:$TMPDIR" bpf euid "hold:$TMPDIR" "$M"`,
		marks("PROBE", probe, "M", marker, privilegeProbeEnv, "1")))
	waitFor(t, func() bool {
		held, _ := filepath.Glob(filepath.Join(r.f.Scratch, "cmd-privileges-*", "tmp", "held"))
		return len(held) == 1
	})
	pids := reaptest.Marked(marker)
	if len(pids) != 1 {
		t.Fatalf("processes holding the marker: %v", pids)
	}
	status, err := capstest.Status(pids[0])
	if err != nil {
		t.Fatal(err)
	}
	if d := capstest.Diff(status, capstest.Want(0, capstest.None)); d != "" {
		t.Errorf("the command's /proc status: %s", d)
	}
	a, err := r.c.Stop(context.Background(), "privileges", r.p.addr)
	if err != nil || a.State.Outcome == nil {
		t.Fatalf("stop: %v %+v", err, a)
	}
	o := a.State.Outcome
	want := strings.Join([]string{
		"mknod char TMPDIR/kmsg: EACCES",
		"mknod block TMPDIR/loop0: EACCES",
		"mkfifo TMPDIR/fifo: ok",
		"bind unix TMPDIR/sock: ok",
		"bpf: EPERM",
		"euid 0",
		"held",
	}, "\n") + "\n"
	if o.Stdout != want || o.Signal != "SIGTERM" {
		t.Errorf("outcome %s signal %q; stdout:\n%s\nwant:\n%s\nstderr: %s", o.Kind, o.Signal, o.Stdout, want, o.Stderr)
	}
}
