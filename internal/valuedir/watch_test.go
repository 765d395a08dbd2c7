package valuedir

import (
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// dirWorld is a value directory changed one atomic step at a time (a
// rename, a symlink, a remove, an rmdir) by one writer, which records the
// set a reader could take after each step.
type dirWorld struct {
	t      testing.TB
	dir    string
	pool   []string
	next   int
	onDisk map[string]bool // every set that was on disk at some moment
}

var worldNames = []string{"A", "B"}

func newDirWorld(t testing.TB) *dirWorld {
	w := &dirWorld{t: t, dir: t.TempDir(), onDisk: map[string]bool{}}
	for i := 0; i < 64; i++ {
		w.pool = append(w.pool, randomValue(t))
	}
	w.record()
	return w
}

func (w *dirWorld) value() string {
	w.next++
	return w.pool[w.next%len(w.pool)]
}

// setKey names a set of values.
func setKey(vals map[string][]byte) string {
	var parts []string
	for n, v := range vals {
		parts = append(parts, n+"="+string(v))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// record notes the set on disk now (the writer is the only one changing
// the directory, so its read is exact).
func (w *dirWorld) record() {
	if vals, err := Read(w.dir, worldNames, Header, nil); err == nil {
		w.onDisk[setKey(vals)] = true
	}
}

func (w *dirWorld) p(parts ...string) string {
	return filepath.Join(append([]string{w.dir}, parts...)...)
}

// step makes one change chosen by op and arg; a change that fails (a name
// that is not there) is still a step. Every change is one system call
// that others see whole, so the sets between them are all there was.
func (w *dirWorld) step(op, arg byte) {
	ts := []string{"..ts1", "..ts2", "..ts3"}[arg%3]
	name := worldNames[(arg/3)%2]
	other := worldNames[1-(arg/3)%2]
	switch op % 9 {
	case 0: // a file written into a timestamped directory, by rename
		os.Mkdir(w.p(ts), 0o755)
		w.record()
		os.WriteFile(w.p(ts, ".new"), []byte(w.value()), 0o600)
		w.record()
		os.Rename(w.p(ts, ".new"), w.p(ts, name))
	case 1: // ..data swapped to a timestamped directory
		os.Remove(w.p("..data_tmp"))
		w.record()
		os.Symlink(ts, w.p("..data_tmp"))
		w.record()
		os.Rename(w.p("..data_tmp"), w.p("..data"))
	case 2: // a name made a symlink through ..data
		os.Symlink(filepath.Join("..data", name), w.p(".link"))
		w.record()
		os.Rename(w.p(".link"), w.p(name))
	case 3: // a name made a plain file, by rename
		os.WriteFile(w.p(".file"), []byte(w.value()+"\n"), 0o600)
		w.record()
		os.Rename(w.p(".file"), w.p(name))
	case 4: // a name removed
		os.Remove(w.p(name))
	case 5: // a file of a timestamped directory removed
		os.Remove(w.p(ts, name))
	case 6: // a timestamped directory removed (when empty)
		os.Remove(w.p(ts))
	case 7: // a timestamped directory renamed over another's name
		os.Rename(w.p(ts), w.p([]string{"..ts1", "..ts2", "..ts3"}[(arg+1)%3]))
	case 8: // one name renamed over the other
		os.Rename(w.p(name), w.p(other))
	}
	w.record()
}

// checkWatcherView runs the steps while readers take the set as the
// watcher does (readConsistent, over the inotify source), and fails when a
// reader took a set that was never on disk.
func checkWatcherView(t *testing.T, steps []byte) {
	w := newDirWorld(t)
	src, err := newNotify(w.dir)
	if err != nil {
		why := fmt.Sprintf("inotify is not available here (%v); the poll source has no such guarantee to test", err)
		if os.Getenv("JR2_REQUIRE_ALL") == "1" {
			t.Fatal("JR2_REQUIRE_ALL=1: " + why)
		}
		t.Skip("SKIP: " + why)
	}
	defer src.close()
	f := dirFollower{w.dir}
	var (
		mu   sync.Mutex
		took []string
	)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			set, _, err := readConsistent(src, f)
			if err == nil {
				mu.Lock()
				took = append(took, setKey(set.(map[string][]byte)))
				mu.Unlock()
			}
			select {
			case <-done:
				return
			default:
			}
		}
	}()
	for i := 0; i+1 < len(steps); i += 2 {
		w.step(steps[i], steps[i+1])
		if i%8 == 0 {
			runtime.Gosched()
		}
	}
	close(done)
	wg.Wait()
	t.Logf("%d sets on disk, %d reads took a set", len(w.onDisk), len(took))
	for _, k := range took {
		if !w.onDisk[k] {
			t.Fatalf("the watcher took a set that was never on disk (%d sets were)", len(w.onDisk))
		}
	}
}

// TestWatcherViewProperty: random sequences of renames, removes and
// recreates of files, symlinks and directories; every set the watcher's
// read takes was on disk at some moment.
func TestWatcherViewProperty(t *testing.T) {
	for seed := uint64(0); seed < 24; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		steps := make([]byte, 600)
		for i := range steps {
			steps[i] = byte(r.UintN(256))
		}
		checkWatcherView(t, steps)
	}
}

// FuzzWatcherView is TestWatcherViewProperty over sequences the fuzzer
// chooses.
func FuzzWatcherView(f *testing.F) {
	f.Add([]byte{0, 0, 0, 3, 1, 0, 2, 0, 2, 3, 0, 1, 0, 4, 1, 1, 7, 0, 1, 1})
	f.Add([]byte{3, 0, 3, 3, 8, 0, 4, 3, 3, 3, 0, 2, 1, 2, 2, 0, 2, 3})
	f.Fuzz(func(t *testing.T, steps []byte) {
		if len(steps) > 400 {
			steps = steps[:400]
		}
		checkWatcherView(t, steps)
	})
}

// dirFollower reads the world's set as a host's follower does.
type dirFollower struct{ dir string }

func (f dirFollower) Read() (any, [32]byte, error) {
	h := sha256.New()
	vals, err := Read(f.dir, worldNames, Header, h)
	var d [32]byte
	h.Sum(d[:0])
	return vals, d, err
}
func (dirFollower) Discard(any)               {}
func (dirFollower) Take(any, [32]byte, error) {}
func (dirFollower) Expire() time.Time         { return time.Time{} }

// randomValue is a value past the guess floor.
func randomValue(t testing.TB) string {
	const alpha = "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789"
	b := make([]byte, 28)
	for i := range b {
		b[i] = alpha[rand.IntN(len(alpha))]
	}
	return string(b)
}
