package cli

import "flag"

// RenderFlagSet is the render command's flag set, for the usage test.
func RenderFlagSet() *flag.FlagSet {
	fs, _ := newRenderFlags()
	return fs
}
