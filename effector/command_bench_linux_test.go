package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"jr2.dev/boundary/effector/internal/commandkind/commandtest"
	"jr2.dev/boundary/effector/internal/reap/reaptest"
	"jr2.dev/boundary/effector/internal/wire"
)

// BenchmarkCommandStart measures what a confined command adds to starting
// /bin/true: a bare exec; `effector confine` with the Effector's flags
// (every path of its own denied); bubblewrap, where Debian's is installed;
// and the whole signed command effect (start, the lock, the clean
// checkout, keep, confine, the settle loop, and polls until the outcome).
// Each row reports x-bare (its time over a bare exec's) and added-ms.
func BenchmarkCommandStart(b *testing.B) {
	r := newCommandRig(b, map[string]string{"JR2_EFFECTOR_TEST_EXPIRE_MS": "500"})
	scratch := filepath.Join(r.f.Scratch, "bench")
	if err := os.Mkdir(scratch, 0o700); err != nil {
		b.Fatal(err)
	}
	confine := []string{binary, "confine", "--scratch", scratch}
	for _, d := range r.f.OwnPaths() {
		confine = append(confine, "--deny", d)
	}
	confine = append(confine, "--node", "node-a", "--", "/bin/true")
	run := func(b testing.TB, argv []string) {
		if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
			b.Fatalf("%s: %v: %s", argv[0], err, out)
		}
	}
	bare := perOp(func() { run(b, []string{"/bin/true"}) }, 200)
	report := func(b *testing.B, per float64) {
		b.ReportMetric(per/bare, "x-bare")
		b.ReportMetric((per-bare)/1e6, "added-ms")
	}
	rows := []struct {
		name string
		argv []string
	}{
		{"bare", []string{"/bin/true"}},
		{"confine", confine},
		{"bwrap", []string{"/usr/bin/bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
			"--unshare-pid", "--die-with-parent", "/bin/true"}},
	}
	for _, row := range rows {
		b.Run(row.name, func(b *testing.B) {
			if _, err := os.Stat(row.argv[0]); err != nil {
				fmt.Printf("BenchmarkCommandStart/%s: skipped, %s is not installed\n", row.name, row.argv[0])
				b.SkipNow()
			}
			t0, n := time.Now(), 0
			for b.Loop() {
				run(b, row.argv)
				n++
			}
			report(b, float64(time.Since(t0).Nanoseconds())/float64(n))
		})
	}
	b.Run("effect", func(b *testing.B) {
		t0, n := time.Now(), 0
		for b.Loop() {
			id := "bench-" + strconv.Itoa(n)
			r.start(b, id, 60000, &wire.Command{Argv: []string{"/bin/true"}})
			if o := settle(b, r.c, id, r.p.addr); o.Kind != wire.OutcomeExited || outCode(o) != "0" {
				b.Fatalf("outcome %+v", o)
			}
			n++
		}
		report(b, float64(time.Since(t0).Nanoseconds())/float64(n))
	})
}

// perOp times n calls of f, after one to warm up, in ns per call.
func perOp(f func(), n int) float64 {
	f()
	t0 := time.Now()
	for range n {
		f()
	}
	return float64(time.Since(t0).Nanoseconds()) / float64(n)
}

// BenchmarkHundredCommands starts 100 commands at once, each leaving a
// setsid daemon, and waits for every outcome; after each round no process
// of any of them is alive. It reports the round's wall time.
func BenchmarkHundredCommands(b *testing.B) {
	r := newCommandRig(b, map[string]string{"JR2_EFFECTOR_TEST_EXPIRE_MS": "500"})
	m := reaptest.Marker()
	reaptest.Cleanup(b, m)
	round := 0
	t0 := time.Now()
	for b.Loop() {
		runHundred(b, r, "r"+strconv.Itoa(round)+"-", m)
		if live := alive(m); len(live) > 0 {
			b.Fatalf("survivors: %v", live)
		}
		if pids := commandtest.WithEnv("HOME=" + r.f.Scratch + "/cmd-"); len(pids) > 0 {
			b.Fatalf("processes of a command still alive: %v", pids)
		}
		round++
	}
	b.ReportMetric(float64(time.Since(t0).Milliseconds())/float64(round), "ms/100-commands")
}
