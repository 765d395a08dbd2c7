package module

import (
	"os"
	"runtime"
	"strings"
)

// init sets GOMAXPROCS to Envoy's worker count (runtime.go), reading
// Envoy's arguments from /proc/self/cmdline; outside Envoy (a test binary)
// it does nothing.
func init() {
	if !inEnvoy() {
		return
	}
	data, err := os.ReadFile("/proc/self/cmdline")
	if err != nil {
		return
	}
	_, envSet := os.LookupEnv("GOMAXPROCS")
	if n := workerProcs(strings.Split(strings.TrimRight(string(data), "\x00"), "\x00"), envSet); n > 0 {
		runtime.GOMAXPROCS(n)
	}
}
