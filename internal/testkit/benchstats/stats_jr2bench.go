//go:build jr2bench

package benchstats

import (
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"syscall"
)

func init() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGUSR1)
	go func() {
		var m runtime.MemStats
		for range c {
			runtime.ReadMemStats(&m)
			fmt.Fprintf(os.Stderr, "jr2-bench-stats total_alloc_bytes=%d mallocs=%d\n", m.TotalAlloc, m.Mallocs)
		}
	}()
}
