package commandkind

import (
	"errors"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"jr2.dev/boundary/effector/internal/wire"
)

func TestPrepareRefusesWithTheReason(t *testing.T) {
	start := &wire.Start{Kind: wire.KindCommand, Command: &wire.Command{Argv: []string{"true"}}}
	cases := []struct {
		name     string
		commands bool
		probe    error
		want     string
	}{
		{"no Landlock", true, syscall.ENOSYS, "landlock: unavailable on node node-a (function not implemented)"},
		{"no Landlock, commands false", false, errors.New("ENOSYS"), "landlock: unavailable on node node-a (ENOSYS)"},
		{"commands false", false, nil, "effector.json has commands false"},
		{"not built yet", true, nil, "does not run commands yet"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			plan, err := New(c.commands, "node-a", c.probe).Prepare("e1", start)
			if plan != nil || err == nil {
				t.Fatalf("plan %v, err %v", plan, err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("reason %q does not say %q", err, c.want)
			}
		})
	}
}

// TestProbe runs the real probe: this project's machines have Landlock.
func TestProbe(t *testing.T) {
	v, err := Probe()
	if runtime.GOOS != "linux" {
		if err == nil {
			t.Fatal("a probe passed off Linux")
		}
		return
	}
	if err != nil {
		t.Fatalf("Landlock probe failed: %v (a kernel without Landlock in its LSM list fails here)", err)
	}
	if v < 1 {
		t.Errorf("ABI %d", v)
	}
}
