package serve

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"

	"jr2.dev/boundary/effector/internal/config"
	"jr2.dev/boundary/effector/internal/wire"
)

// TestHeld: every held secret, and the placement key raw and as hex, both
// labelled effector-key, are what answers are scrubbed for.
func TestHeld(t *testing.T) {
	key := bytes.Repeat([]byte{9}, 32)
	cfg := &config.Config{Key: key, Secrets: []config.Secret{{Name: "A", Value: []byte("value-of-a")}}}
	held := Held(cfg)
	if len(held) != 3 || held[0].Name != "A" || string(held[0].Value) != "value-of-a" ||
		held[1].Name != "effector-key" || !bytes.Equal(held[1].Value, key) ||
		held[2].Name != "effector-key" || string(held[2].Value) != hex.EncodeToString(key) {
		t.Fatalf("held %+v", held)
	}
}

func TestKinds(t *testing.T) {
	kinds := Kinds(&config.Config{}, nil, Shared{})
	for _, k := range []string{wire.KindHTTP, wire.KindCommand} {
		if kinds[k] == nil {
			t.Errorf("no %s kind", k)
		}
	}
	if _, err := kinds[wire.KindCommand].Prepare("c", &wire.Start{Kind: wire.KindCommand, Command: &wire.Command{Argv: []string{"true"}}}); err == nil {
		t.Error("a command was prepared")
	}
}

func TestLandlockGate(t *testing.T) {
	enosys := errors.New("ENOSYS")
	if err := landlockGate(true, "node-a", enosys); err == nil || err.Error() != "landlock: unavailable on node node-a (ENOSYS)" {
		t.Errorf("commands on a node without Landlock: %v", err)
	}
	for _, c := range []struct {
		commands bool
		probe    error
	}{{false, enosys}, {true, nil}, {false, nil}} {
		if err := landlockGate(c.commands, "node-a", c.probe); err != nil {
			t.Errorf("commands %v probe %v: %v", c.commands, c.probe, err)
		}
	}
}
