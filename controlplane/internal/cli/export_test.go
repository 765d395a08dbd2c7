package cli

import "flag"

// FlagSets are the flag sets of each command, as the commands build them,
// for the usage test.
func FlagSets() map[string]*flag.FlagSet {
	ca, _ := newCAInitFlags()
	render, _ := newRenderFlags()
	key, _, _ := newKeyFlags()
	effector, _ := newEffectorFlags()
	return map[string]*flag.FlagSet{"ca init": ca, "render": render, "key": key, "effector": effector}
}
