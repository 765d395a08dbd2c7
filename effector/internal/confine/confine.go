// Package confine is `effector confine`: it confines itself with Landlock
// and then executes the command; nothing runs unconfined.
//
// Invariant: the command is executed only after landlock_restrict_self
// succeeded on the thread that executes it, and after that thread dropped
// every capability (effective, permitted, inheritable, ambient and, when
// the confiner may, the bounding set) with NO_NEW_PRIVS set (package
// caps) — but CAP_DAC_READ_SEARCH under --keep-dac-read-search, which only
// the Effector's own git is given; no rule grants making a character or
// block device (package landlock). So a root Effector's command holds no
// more than a non-root one's: it makes no device node, loads no BPF
// program, and a setuid or file-capability binary gives nothing back. Any
// failure before execve ends the confiner with exit 126 and its reason on
// stderr, and runs nothing.
//
// Options gives the flags; Plan lists the rules (ADR-0068) and why each is
// there; confineAndExec (main_linux.go) says what happens between them and
// execve.
//
// Not covered: the network (TCP, UDP, netlink), pathname Unix sockets
// before ABI 9, what package landlock lists, and what package caps lists
// (a root Effector's command is still uid 0: the owner of root's files,
// which Plan's rules keep it from writing outside its scratch).
package confine

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// DeniedNames are the top-level names the walk never allows: the kernel
// and process pseudo-filesystems, the runtime tree where the Effector's
// own files are mounted, and the volatile and per-user trees that hold no
// tool an image ships.
var DeniedNames = []string{
	"proc", "sys", "dev", // kernel and processes; the devices below are allowed one by one
	"run",                                        // the Effector's key, config, secrets, push credentials
	"home", "root", "var", "srv", "mnt", "media", // volatile and per-user
	"lost+found",
	"tmp", // each child gets a TMPDIR of its own in its scratch
}

// Devices are read and written by the command: the ones a program expects
// to open.
var Devices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"}

// Options are what the Effector asks of one confinement:
//
//	effector confine [--scratch DIR]… [--read FILE]… [--read-tree DIR]… [--deny PATH]… [--node NAME] [--keep-dac-read-search] -- ARGV
type Options struct {
	// Scratch (--scratch DIR): read, write and execute beneath DIR — the
	// Effect's own scratch (its checkout, HOME and TMPDIR). Nothing denied
	// may lie beneath it.
	Scratch []string
	// Read (--read FILE): read FILE — a secret file the command names, by
	// path only: a secret's value never travels in argv.
	Read []string
	// Trees (--read-tree DIR): read and execute beneath DIR — the
	// worktree, for the Effector's own git, which reads it and nothing
	// else of the Effector's. Nothing denied may lie beneath it.
	Trees []string
	// Deny (--deny PATH): never allowed by the walk — the Effector's own
	// paths (the key, the secrets directory, push credentials, the
	// worktree, the repo caches, the scratch root holding other Effects'
	// scratch). PATH need not exist.
	Deny []string
	// Node (--node NAME): the node named in the fail-closed reason.
	Node string

	// KeepDACReadSearch (--keep-dac-read-search): keep CAP_DAC_READ_SEARCH,
	// if the confiner holds it, and no other capability: the program reads
	// and lists what the rules allow whatever its owner and mode. For the
	// Effector's own git, which reads the agent's worktree (another uid's,
	// possibly 0600); never given to an Effect's command, whose argv comes
	// after --.
	KeepDACReadSearch bool
}

const usage = "usage: effector confine [--scratch DIR]... [--read FILE]... [--read-tree DIR]... [--deny PATH]... [--node NAME] [--keep-dac-read-search] -- ARGV"

// isHelp reports whether args ask for the usage alone (-h or --help and
// nothing else); a --help after "--" is the program's.
func isHelp(args []string) bool {
	return len(args) == 1 && (args[0] == "-h" || args[0] == "--help")
}

// parseArgs reads the flags and ARGV. Each path must be absolute.
func parseArgs(args []string) (Options, []string, error) {
	var o Options
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			argv := args[i+1:]
			if len(argv) == 0 || argv[0] == "" {
				return o, nil, errors.New("no program after --; " + usage)
			}
			return o, argv, nil
		}
		if a == "--keep-dac-read-search" {
			o.KeepDACReadSearch = true
			continue
		}
		name, value, inline := strings.Cut(a, "=")
		var dst *[]string
		switch name {
		case "--scratch":
			dst = &o.Scratch
		case "--read":
			dst = &o.Read
		case "--read-tree":
			dst = &o.Trees
		case "--deny":
			dst = &o.Deny
		case "--node":
		default:
			return o, nil, fmt.Errorf("unknown argument %q; %s", a, usage)
		}
		if !inline {
			if i+1 >= len(args) {
				return o, nil, fmt.Errorf("%s needs a value; %s", name, usage)
			}
			i++
			value = args[i]
		}
		if dst == nil {
			o.Node = value
			continue
		}
		if !filepath.IsAbs(value) {
			return o, nil, fmt.Errorf("%s %q: the path must be absolute", name, value)
		}
		*dst = append(*dst, filepath.Clean(value))
	}
	return o, nil, errors.New("no -- before the program; " + usage)
}
