//go:build linux

// Package reaptest finds test processes by a marker in their command line,
// for tests that must prove a process is gone. It is imported by tests
// only.
//
// Invariant: it signals only processes whose command line holds the
// marker it is given, never one found by name alone.
//
// It reads /proc: Linux-only, as the tests that use it.
package reaptest

import (
	"bytes"
	"crypto/rand"
	"os"
	"strconv"
	"syscall"
	"testing"
)

// Marker returns a fresh marker, usable as a sleep duration that no other
// process on the machine has in its command line: "1000.<digits>".
func Marker() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	n := uint64(0)
	for _, c := range b {
		n = n<<8 | uint64(c)
	}
	return "1000." + strconv.FormatUint(n, 10)
}

// Marked lists the pids of live (not zombie) processes whose command line
// holds marker as one whole argument or inside one.
func Marked(marker string) []int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	var pids []int
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + name + "/cmdline")
		if err != nil || !bytes.Contains(cmdline, []byte(marker)) {
			continue
		}
		if stat, err := os.ReadFile("/proc/" + name + "/stat"); err == nil {
			if i := bytes.LastIndexByte(stat, ')'); i > 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
				continue
			}
		}
		pids = append(pids, pid)
	}
	return pids
}

// Cleanup kills, at the end of t, every process still holding marker, so a
// failed test leaves nothing running.
func Cleanup(t testing.TB, marker string) {
	t.Cleanup(func() {
		for _, pid := range Marked(marker) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
}
