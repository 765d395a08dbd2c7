// Package commandkind is the Effector's `command` kind as far as this build
// goes: it decides the 400 every command start gets until the confined
// command lands (effector/README.md names the seams it will use).
//
// Invariant: Prepare never returns a plan, so no command starts and no
// secret is read.
package commandkind

import (
	"errors"
	"fmt"

	"jr2.dev/boundary/effector/internal/effect"
	"jr2.dev/boundary/effector/internal/wire"
)

// Kind refuses every command start with the reason that fits.
type Kind struct {
	commands bool
	node     string
	probe    error
}

// New returns the kind. commands is effector.json's; node is NODE_NAME;
// probe is what the Landlock probe at start returned (nil: it passed).
func New(commands bool, node string, probe error) *Kind {
	return &Kind{commands: commands, node: node, probe: probe}
}

// Unavailable is the pinned reason for a node without Landlock.
func Unavailable(node string, probe error) string {
	return fmt.Sprintf("landlock: unavailable on node %s (%v)", node, probe)
}

// Prepare refuses: a node without Landlock runs no command; an Effector
// whose effector.json says commands false runs none; and this build runs
// none yet.
func (k *Kind) Prepare(id string, s *wire.Start) (*effect.Plan, error) {
	switch {
	case k.probe != nil:
		return nil, errors.New(Unavailable(k.node, k.probe))
	case !k.commands:
		return nil, errors.New("command: this Effector runs no command (effector.json has commands false); place the command on its Workspace's Sandbox Effector")
	}
	return nil, errors.New("command: this Effector's build does not run commands yet")
}
