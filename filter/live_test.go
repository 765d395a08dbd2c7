package filter

import (
	"crypto/rand"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"jr2.dev/boundary/internal/valuedir"
	"jr2.dev/boundary/internal/valuedir/valuedirtest"
)

// randomValue is a fresh value well past the guess floor.
func randomValue(t testing.TB) string {
	const alpha = "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789"
	b := make([]byte, 28)
	for i := range b {
		n, err := rand.Int(rand.Reader, big.NewInt(int64(len(alpha))))
		if err != nil {
			t.Fatal(err)
		}
		b[i] = alpha[n.Int64()]
	}
	return string(b)
}

// liveFixture is a Live over a kubelet-style value directory, with its
// reload lines captured.
type liveFixture struct {
	dir  string
	live *Live
	mu   sync.Mutex
	logs []string
	vals map[string]string
}

func newLiveFixture(t *testing.T) *liveFixture {
	f := &liveFixture{dir: t.TempDir(), vals: map[string]string{}}
	cfg := testConfig()
	cfg.ValuesDir = f.dir
	for _, s := range cfg.Secrets {
		f.vals[s.Name] = randomValue(t)
	}
	valuedirtest.Write(t, f.dir, f.vals)
	vals, err := LoadValues(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.live, err = NewLive(cfg, vals, LiveOptions{Log: func(kv ...string) {
		f.mu.Lock()
		f.logs = append(f.logs, strings.Join(kv, " "))
		f.mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *liveFixture) lines() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.logs...)
}

// value is the value the current engine sends for name.
func (f *liveFixture) value(name string) string {
	return f.live.Engine().byName[name].valueStr
}

// waitFor polls until cond holds; it fails after a generous bound (not a
// timed assertion: the bound only stops a hung test).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("never: %s", what)
}

func sources(t *testing.T, run func(t *testing.T, o valuedir.WatchOptions)) {
	for _, o := range []struct {
		name string
		o    valuedir.WatchOptions
	}{{"inotify", valuedir.WatchOptions{}}, {"poll", valuedir.WatchOptions{Poll: true}}} {
		t.Run(o.name, func(t *testing.T) { run(t, o.o) })
	}
}

// TestLiveFollowsRotation: a kubelet-style rotation and a plain rename of
// one file are both followed; the old value is scrubbed under its label,
// never sent; the ok line names the count only.
func TestLiveFollowsRotation(t *testing.T) {
	sources(t, func(t *testing.T, o valuedir.WatchOptions) {
		f := newLiveFixture(t)
		stop := f.live.Watch(o)
		defer stop()
		first := f.live.Engine()
		old := f.vals["GITHUB_TOKEN"]

		f.vals["GITHUB_TOKEN"] = randomValue(t)
		valuedirtest.Write(t, f.dir, f.vals)
		waitFor(t, "the rotated value", func() bool { return f.value("GITHUB_TOKEN") == f.vals["GITHUB_TOKEN"] })
		e := f.live.Engine()
		if first.Latest() != e || e.Latest() != e {
			t.Fatal("Latest of an engine of the lineage is not the current engine")
		}
		if got := e.ScrubHeaderValue("x " + old + " y"); got != "x [secret:GITHUB_TOKEN] y" {
			t.Fatalf("old value not scrubbed under its label: %q", got)
		}
		if first.byName["GITHUB_TOKEN"].valueStr != old {
			t.Fatal("the engine a request began with changed under it")
		}

		// A plain rename of one file over the symlink.
		prev := f.vals["ANTHROPIC_API_KEY"]
		f.vals["ANTHROPIC_API_KEY"] = randomValue(t)
		tmp := filepath.Join(f.dir, ".tmp")
		if err := os.WriteFile(tmp, []byte(f.vals["ANTHROPIC_API_KEY"]+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(f.dir, "ANTHROPIC_API_KEY")); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the renamed value", func() bool { return f.value("ANTHROPIC_API_KEY") == f.vals["ANTHROPIC_API_KEY"] })
		e = f.live.Engine()
		for _, v := range []string{old, prev} {
			if strings.Contains(e.ScrubHeaderValue(v), v) {
				t.Fatal("a retired value is not scrubbed")
			}
		}
		for _, s := range e.secrets {
			if s.valueStr == old || s.valueStr == prev {
				t.Fatal("a retired value is still sent")
			}
		}
		waitFor(t, "two ok lines", func() bool { return len(f.lines()) >= 2 })
		for _, l := range f.lines() {
			if l != "action reload result ok secrets 4" {
				t.Fatalf("line %q", l)
			}
		}
	})
}

// TestLiveRefusesBadSets: a set that breaks a load-time rule changes
// nothing and logs one line with the secret and the rule's word (never the
// value); the next good set is taken.
func TestLiveRefusesBadSets(t *testing.T) {
	cases := []struct {
		name, word string
		change     func(v map[string]string)
	}{
		{"guessable", valuedir.RuleGuessable, func(v map[string]string) { v["GITHUB_TOKEN"] = "password1234" }},
		{"empty", valuedir.RuleEmpty, func(v map[string]string) { v["GITHUB_TOKEN"] = "" }},
		{"short", valuedir.RuleShort, func(v map[string]string) { v["GITHUB_TOKEN"] = "Xy7#q" }},
		{"not printable", valuedir.RuleNotPrintable, func(v map[string]string) { v["GITHUB_TOKEN"] = "Qm7rT2vK9x\x01Lp4WzN8cYh3JdF" }},
		{"missing", valuedir.RuleMissing, func(v map[string]string) { delete(v, "GITHUB_TOKEN") }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sources(t, func(t *testing.T, o valuedir.WatchOptions) {
				f := newLiveFixture(t)
				stop := f.live.Watch(o)
				defer stop()
				good := f.vals["GITHUB_TOKEN"]
				bad := map[string]string{}
				for k, v := range f.vals {
					bad[k] = v
				}
				c.change(bad)
				valuedirtest.Write(t, f.dir, bad)
				want := "action reload result refused secret GITHUB_TOKEN reason " + c.word
				waitFor(t, want+fmt.Sprintf(" (lines so far: %q)", f.lines()), func() bool { l := f.lines(); return len(l) > 0 && l[len(l)-1] == want })
				if f.value("GITHUB_TOKEN") != good {
					t.Fatal("a refused set changed the value")
				}
				for _, l := range f.lines() {
					if bv := bad["GITHUB_TOKEN"]; bv != "" && strings.Contains(l, bv) || strings.Contains(l, good) || strings.Contains(l, f.dir) {
						t.Fatalf("line %q holds a value or a path", l)
					}
				}
				f.vals["GITHUB_TOKEN"] = randomValue(t)
				valuedirtest.Write(t, f.dir, f.vals)
				// The engine is swapped before its reload line is written, so
				// wait for both: the new value, and the line that says so.
				ok := "action reload result ok secrets 4"
				waitFor(t, "the next good set and its line", func() bool {
					l := f.lines()
					return f.value("GITHUB_TOKEN") == f.vals["GITHUB_TOKEN"] && l[len(l)-1] == ok
				})
				if n := strings.Count(strings.Join(f.lines(), "\n"), "refused"); n != 1 {
					t.Fatalf("%d refused lines for one bad set, want 1: %q", n, f.lines())
				}
			})
		})
	}
}

// TestLiveGraceWindow: a retired value is scrubbed until its window ends,
// then dropped; a value that comes back is current again, not retired.
func TestLiveGraceWindow(t *testing.T) {
	f := newLiveFixture(t)
	now := time.Unix(1_800_000_000, 0)
	f.live.now = func() time.Time { return now }
	f.live.retired.Grace = time.Minute
	v0 := f.vals["GITHUB_TOKEN"]
	rotate := func(v string) {
		f.vals["GITHUB_TOKEN"] = v
		valuedirtest.Write(t, f.dir, f.vals)
		vals, d, err := f.live.readSet()
		f.live.apply(vals, d, err)
		if f.value("GITHUB_TOKEN") != v {
			t.Fatal("not swapped")
		}
	}
	scrubbed := func(v string) bool { return f.live.Engine().ScrubHeaderValue(v) == "[secret:GITHUB_TOKEN]" }
	v1 := randomValue(t)
	rotate(v1)
	now = now.Add(30 * time.Second)
	v2 := randomValue(t)
	rotate(v2)
	if !scrubbed(v0) || !scrubbed(v1) {
		t.Fatal("a value within its window is not scrubbed")
	}
	now = now.Add(31 * time.Second) // v0's window ended, v1's has not
	if next := f.live.Expire(); !next.Equal(now.Add(-31*time.Second).Add(time.Minute)) || scrubbed(v0) || !scrubbed(v1) {
		t.Fatalf("after v0's window: next=%v v0 scrubbed %v, v1 %v", next, scrubbed(v0), scrubbed(v1))
	}
	rotate(v1) // v1 comes back: current, not retired; v2 is retired
	if m := f.live.retired.Map(); f.live.retired.Len() != 1 || len(m["GITHUB_TOKEN"]) != 1 || string(m["GITHUB_TOKEN"][0]) != v2 {
		t.Fatalf("retired after the return of v1: %d", f.live.retired.Len())
	}
	now = now.Add(2 * time.Minute)
	if next := f.live.Expire(); !next.IsZero() || scrubbed(v2) || !scrubbed(v1) {
		t.Fatal("after every window")
	}
}

// TestValueGraceConfig: valueGraceSeconds reads as its duration, absent is
// the default, and out of range is refused naming the field.
func TestValueGraceConfig(t *testing.T) {
	c := testConfig()
	if c.ValueGrace() != 15*time.Minute {
		t.Fatal(c.ValueGrace())
	}
	c.ValueGraceSeconds = 60
	if c.ValueGrace() != time.Minute || c.check() != nil {
		t.Fatal(c.ValueGrace(), c.check())
	}
	for _, bad := range []int{-1, 86401} {
		c.ValueGraceSeconds = bad
		if err := c.check(); err == nil || !strings.HasPrefix(err.Error(), "valueGraceSeconds: ") {
			t.Fatalf("%d: %v", bad, err)
		}
	}
}

// TestLiveConcurrentSwap: under -race, readers that take an engine once
// and decide with it see one whole set while reloads swap.
func TestLiveConcurrentSwap(t *testing.T) {
	f := newLiveFixture(t)
	stop := f.live.Watch(valuedir.WatchOptions{})
	defer stop()
	rotate := func(suffix string) {
		f.vals["GITHUB_TOKEN"] = randomValue(t) + suffix
		f.vals["ANTHROPIC_API_KEY"] = randomValue(t) + suffix
		valuedirtest.Write(t, f.dir, f.vals)
		want := f.vals["GITHUB_TOKEN"]
		waitFor(t, "rotation", func() bool { return f.value("GITHUB_TOKEN") == want })
	}
	rotate("init")
	var wg sync.WaitGroup
	done := make(chan struct{})
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				e := f.live.Engine()
				a, b := e.byName["GITHUB_TOKEN"].valueStr, e.byName["ANTHROPIC_API_KEY"].valueStr
				// Both rotate together: their suffixes name one rotation.
				if a[len(a)-4:] != b[len(b)-4:] {
					t.Errorf("a mix of two sets")
					return
				}
			}
		}()
	}
	for i := 0; i < 5; i++ {
		rotate(fmt.Sprintf("%04d", i))
	}
	close(done)
	wg.Wait()
}
