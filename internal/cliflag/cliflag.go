// Package cliflag is how the repository's commands parse their flags: -h
// and --help print the command's usage on stdout and exit 0; a bad flag
// prints the error and the usage on stderr and exits 2.
//
// Invariant: a command's flags name files and addresses, never a value;
// what a bad flag prints is the flag package's error and the usage.
package cliflag

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// Parse parses args into fs, whose name prefixes the error. It reports
// whether the command goes on; when it does not, code is its exit code.
func Parse(fs *flag.FlagSet, args []string, usage string, stdout, stderr io.Writer) (ok bool, code int) {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	switch {
	case err == nil:
		return true, 0
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, usage)
		return false, 0
	}
	fmt.Fprintf(stderr, "%s: %v\n%s", fs.Name(), err, usage)
	return false, 2
}
