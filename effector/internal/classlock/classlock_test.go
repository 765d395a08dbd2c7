package classlock

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// queued waits until n waiters are queued: the test's sequencing, never
// a timing assertion.
func queued(t *testing.T, l *Lock, n int) {
	t.Helper()
	for i := 0; ; i++ {
		l.mu.Lock()
		got := len(l.queue)
		l.mu.Unlock()
		if got == n {
			return
		}
		if i > 20000 {
			t.Fatalf("%d waiters queued, want %d", got, n)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

type acquired struct {
	release func()
	err     error
}

func acquireAsync(l *Lock, ctx context.Context, c Class) chan acquired {
	ch := make(chan acquired, 1)
	go func() {
		r, err := l.Acquire(ctx, c)
		ch <- acquired{r, err}
	}()
	return ch
}

func isReady(ch chan acquired) bool {
	select {
	case a := <-ch:
		ch <- a
		return true
	default:
		return false
	}
}

// Commands run beside commands; a gpg push waits for all of them, and a
// command that arrives while it waits queues behind it (so gpg does not
// starve); when gpg ends, the command runs.
func TestOrder(t *testing.T) {
	var l Lock
	ctx := context.Background()
	c1, err := l.Acquire(ctx, Command)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := l.Acquire(ctx, Command)
	if err != nil {
		t.Fatal(err)
	}
	if class, n := l.Live(); class != Command || n != 2 {
		t.Fatalf("live %v×%d, want command×2", class, n)
	}
	g := acquireAsync(&l, ctx, GPG)
	queued(t, &l, 1)
	c3 := acquireAsync(&l, ctx, Command)
	queued(t, &l, 2)
	c1()
	c1() // twice: no effect
	if isReady(g) {
		t.Fatal("gpg admitted while a command is live")
	}
	c2()
	a := <-g
	if a.err != nil {
		t.Fatal(a.err)
	}
	if class, n := l.Live(); class != GPG || n != 1 || isReady(c3) {
		t.Fatalf("live %v×%d, command ready %v; want gpg×1 and the command waiting", class, n, isReady(c3))
	}
	a.release()
	b := <-c3
	if b.err != nil {
		t.Fatal(b.err)
	}
	b.release()
	if class, n := l.Live(); class != 0 || n != 0 {
		t.Fatalf("live %v×%d after every release", class, n)
	}
}

// A waiter past its deadline fails and never holds the lock; those queued
// behind it are not held back by it.
func TestWaiterPastDeadline(t *testing.T) {
	var l Lock
	c1, err := l.Acquire(context.Background(), Command)
	if err != nil {
		t.Fatal(err)
	}
	gctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	g := acquireAsync(&l, gctx, GPG)
	queued(t, &l, 1)
	c2 := acquireAsync(&l, context.Background(), Command)
	queued(t, &l, 2)
	a := <-g
	if a.err == nil || !errors.Is(a.err, context.DeadlineExceeded) || a.release != nil {
		t.Fatalf("the late gpg waiter got %v, %v; want no hold and DeadlineExceeded", a.release != nil, a.err)
	}
	want := "classlock: the gpg effect waited past its deadline for command effects to end: context deadline exceeded"
	if a.err.Error() != want {
		t.Errorf("reason %q, want %q", a.err, want)
	}
	b := <-c2 // admitted beside c1 once the gpg waiter left the queue
	if b.err != nil {
		t.Fatal(b.err)
	}
	if class, n := l.Live(); class != Command || n != 2 {
		t.Fatalf("live %v×%d, want command×2", class, n)
	}
	b.release()
	c1()
	// A context that ended already never acquires, even a free lock.
	done, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if r, err := l.Acquire(done, GPG); err == nil || r != nil {
		t.Fatal("an ended context acquired the lock")
	}
	if class, n := l.Live(); class != 0 || n != 0 {
		t.Fatalf("live %v×%d, want none", class, n)
	}
	if _, err := l.Acquire(context.Background(), Class(7)); err == nil {
		t.Error("an unknown class was admitted")
	}
}

// Many holders of both classes, random holds and deadlines; each holder
// checks the other class is not live while it holds, and a sampler checks
// the same all along. No sample ever sees both.
func TestNoSampleSeesBothClasses(t *testing.T) {
	var l Lock
	// Both counts in one word, so a sample reads them at one instant:
	// commands in the low 32 bits, gpg pushes in the high.
	var live atomic.Int64
	unit := map[Class]int64{Command: 1, GPG: 1 << 32}
	both := func(v int64) bool { return v&0xffffffff != 0 && v>>32 != 0 }
	var violations, acquired, late atomic.Int32
	stop := make(chan struct{})
	var samples atomic.Int64
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if both(live.Load()) {
				violations.Add(1)
			}
			samples.Add(1)
		}
	}()
	var wg sync.WaitGroup
	for i := 0; i < 32; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 20; j++ {
				c := Command
				if rand.IntN(3) == 0 {
					c = GPG
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rand.IntN(4000))*time.Microsecond)
				release, err := l.Acquire(ctx, c)
				cancel()
				if err != nil {
					late.Add(1)
					continue
				}
				acquired.Add(1)
				if both(live.Add(unit[c])) {
					violations.Add(1)
				}
				time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
				live.Add(-unit[c])
				release()
			}
		}()
	}
	wg.Wait()
	close(stop)
	if v := violations.Load(); v != 0 {
		t.Fatalf("%d samples saw both classes live", v)
	}
	if acquired.Load() == 0 || late.Load() == 0 || samples.Load() == 0 {
		t.Fatalf("acquired %d, late %d, samples %d: the test did not exercise both paths", acquired.Load(), late.Load(), samples.Load())
	}
	if class, n := l.Live(); class != 0 || n != 0 {
		t.Fatalf("live %v×%d after every release", class, n)
	}
}
