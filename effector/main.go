// Command effector is the Effector: `effector` serves the signed wire;
// `effector confine -- ARGV` and `effector keep …` are the confiner and the
// keeper a credentialed command runs under; `effector credential …` is an
// https push's credential helper; `effector call` sends one signed effect
// by hand. This file only wires, and
// prints the usage: every variable `effector` reads and every flag of
// confine and keep (usage_test.go holds it to their parsers).
package main

import (
	"fmt"
	"io"
	"os"

	"jr2.dev/boundary/effector/internal/call"
	"jr2.dev/boundary/effector/internal/confine"
	"jr2.dev/boundary/effector/internal/keep"
	"jr2.dev/boundary/effector/internal/pushkind"
	"jr2.dev/boundary/effector/internal/serve"
)

const usage = `usage:
  effector
      Serve the signed wire (effector/README.md). Configured by the environment only:
        POD_NAME, POD_IP             the replica's name and address (the downward API); required
        NODE_NAME                    the node, named in a Landlock refusal
        JR2_EFFECTOR_PORT            the port (default 8082)
        JR2_EFFECTOR_KEY             the placement key file (controlplane key); required
        JR2_EFFECTOR_CONFIG          effector.json: placement, targets, commands; required
        JR2_EFFECTOR_SECRETS         a directory of one value file per secret
        JR2_CA_FILE                  extra roots (PEM) for the targets, beside the system roots
        JR2_EFFECTOR_DRAIN_SECONDS   how long SIGTERM drains (default 30)
        JR2_EFFECTOR_WORK            the worktree's read-only view (commands: true)
        JR2_EFFECTOR_SCRATCH         the writable scratch (commands: true)
        JR2_EFFECTOR_GIT             the push credentials' directory
        JR2_EFFECTOR_REPOS           the repository caches' directory
        JR2_EFFECTOR_RECEIPTS        the receipts file to create (a bundle; custodian verify)
        JR2_EFFECTOR_MODE            live (default), read-only, replay, faults, preflight
        JR2_EFFECTOR_MODE_FROM       replay, preflight: the receipts to answer from
        JR2_EFFECTOR_MODE_TIMING     replay: fast (default) or recorded
        JR2_EFFECTOR_FAULT_SEED      faults: the seed
        JR2_EFFECTOR_FAULTS          faults: the rates (SPEC, docs/modes.md)
      Tests only: JR2_EFFECTOR_TEST_POLL_MS, JR2_EFFECTOR_TEST_EXPIRE_MS,
      JR2_EFFECTOR_TEST_TERMINATION_LOG.

  effector credential --password-file FILE --username USER --host HOST get|store|erase
      git's credential helper for an https push (the push's git runs it, not a person):
      answers get for https at HOST with USER and the token read from FILE. --help: its synopsis.

  effector confine [--scratch DIR]… [--read FILE]… [--read-tree DIR]… [--deny PATH]…
                   [--node NAME] [--keep-dac-read-search] -- ARGV
      Landlock, every capability dropped, then execve ARGV (what a credentialed command
      runs under; the Effector starts it, not a person). --help: its synopsis; a --help after
      -- is ARGV's.

  effector keep --report-fd N -- ARGV
      The keeper between the Effector and the confiner: runs ARGV and reports its end on fd N.
      --help: its synopsis.

  effector call --key FILE --start FILE [--address HOST:PORT] [--id ID]
      Send one signed effect (a start body, the wire's JSON) to one replica, wait until it
      settles and print the replica's signed answer, verified, as one JSON line: what an
      Orchestrator does, by hand. --help: its synopsis.

  effector help | -h | --help
      Print this text.
`

func main() { os.Exit(dispatch(os.Args[1:], os.Getenv, os.Stdout, os.Stderr)) }

func dispatch(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		return serve.Main(getenv, stdout, stderr)
	}
	switch args[0] {
	case "confine":
		return confine.Main(args[1:])
	case "keep":
		return keep.Main(args[1:])
	case "credential":
		return pushkind.CredentialMain(args[1:], os.Stdin, stdout, stderr)
	case "call":
		return call.Main(args[1:], os.Stdin, stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "effector: unknown sub-command %q; run effector with no argument to serve, or confine, keep, credential, call, help\n", args[0])
	return 2
}
