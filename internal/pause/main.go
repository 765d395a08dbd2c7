// Command pause is the sandbox process of the test node's Pods (the pause
// image that images/images.json describes, which containerd's CRI runs as
// each Pod's sandbox) and the idle process of the agent image: it holds the
// Pod's namespaces open by blocking, reaps every child that ends (as a
// PID namespace's first process it inherits the orphans of processes
// started in it), and exits 0 on SIGTERM or SIGINT, so that stopping a
// sandbox is quick and clean.
//
// It is a tool of this repository's tests, written here from that contract
// (Kubernetes' build/pause has the same one); it is static, with no libc,
// and reads nothing.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 {
		fmt.Fprintln(os.Stderr, "pause takes no arguments: it blocks, reaps children, and exits 0 on SIGTERM or SIGINT")
		os.Exit(2)
	}
	sig := make(chan os.Signal, 8)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	// A child may have ended before Notify: reap once now.
	reap()
	for s := range sig {
		if s == syscall.SIGCHLD {
			reap()
			continue
		}
		os.Exit(0)
	}
}

// reap waits for every child that has ended, without blocking, and
// returns how many it reaped. One SIGCHLD may stand for several children.
func reap() int {
	n := 0
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil || pid <= 0 {
			return n
		}
		n++
	}
}
