package module

import (
	"strconv"
	"strings"
)

// The Go runtime inside Envoy (issue 25). The module's hooks run on
// Envoy's worker threads, one stream per hook, and start no goroutine, so
// Go code runs on at most as many threads at once as Envoy has workers
// (--concurrency), plus the main thread's config hooks and the values'
// watcher. GOMAXPROCS defaults to the machine's CPUs instead: each idle P
// is a reason for the scheduler to wake a spinning thread when a worker
// returns to Envoy, the futex and nanosleep calls per request a trace of
// Envoy shows. So the module sets GOMAXPROCS to Envoy's worker count.

// workerProcs is the GOMAXPROCS for an Envoy started with args, or 0 to
// leave the runtime's own: when GOMAXPROCS is set in the environment (an
// operator's choice wins), when --concurrency is absent (Envoy then runs a
// worker per CPU, the runtime's default too) or not a positive number.
func workerProcs(args []string, envSet bool) int {
	if envSet {
		return 0
	}
	for i, a := range args {
		v, ok := "", false
		switch {
		case a == "--concurrency" && i+1 < len(args):
			v, ok = args[i+1], true
		case strings.HasPrefix(a, "--concurrency="):
			v, ok = strings.TrimPrefix(a, "--concurrency="), true
		}
		if ok {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return 0
			}
			return min(n, 256)
		}
	}
	return 0
}
