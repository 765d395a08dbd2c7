package logline

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestFormat(t *testing.T) {
	for _, c := range []struct {
		got, want string
	}{
		{Format(Custodian, "action", "tunnel", "target", "example.com:443"), "jr2.custodian action=tunnel target=example.com:443"},
		{Event(Custodian, "ready", "secrets", "A,B", "hosts", "3"), "jr2.custodian ready secrets=A,B hosts=3"},
		{Format(Effector, "action", "stop", "effect"), "jr2.effector action=stop effect=-"},
		{Format(Effector, "reason", ""), "jr2.effector reason=-"},
		// One field can never forge a second pair or a second line.
		{Format(Custodian, "target", "a b=c\nd\"e"), "jr2.custodian target=a_b_c_d_e"},
		{Format(Custodian, "k=x y", "v"), "jr2.custodian k_x_y=v"},
		{Format(Custodian, "target", "é\x00\x7f"), "jr2.custodian target=____"},
	} {
		if c.got != c.want {
			t.Errorf("got  %q\nwant %q", c.got, c.want)
		}
	}
}

func TestWriterWholeLines(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	w := NewWriter(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(p)
	}), Custodian)
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.Log("action", "tunnel", "target", "x:1")
			w.Event("ready", "hosts", "1")
		}()
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 100 {
		t.Fatalf("%d lines", len(lines))
	}
	for _, l := range lines {
		if l != "jr2.custodian action=tunnel target=x:1" && l != "jr2.custodian ready hosts=1" {
			t.Fatalf("torn line %q", l)
		}
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// countingWriter records each Write it gets.
type countingWriter struct {
	mu     sync.Mutex
	writes []string
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes = append(c.writes, string(p))
	return len(p), nil
}

func (c *countingWriter) got() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.writes...)
}

func TestBufferedWriter(t *testing.T) {
	const a, b = "jr2.custodian action=intercept target=a:443\n", "jr2.custodian action=refuse target=b:443 reason=path\n"
	const ready = "jr2.custodian ready hosts=1\n"
	for _, c := range []struct {
		name string
		do   func(w *Writer)
		want []string // the Writes, in order
	}{
		{"lines wait for Flush, then go in one Write", func(w *Writer) {
			w.Log("action", "intercept", "target", "a:443")
			w.Log("action", "refuse", "target", "b:443", "reason", "path")
			w.Flush()
		}, []string{a + b}},
		{"nothing waits: Flush writes nothing", func(w *Writer) { w.Flush() }, nil},
		{"an Event goes at once, after what waits", func(w *Writer) {
			w.Log("action", "intercept", "target", "a:443")
			w.Event("ready", "hosts", "1")
			w.Log("action", "refuse", "target", "b:443", "reason", "path")
			w.Flush()
		}, []string{a + ready, b}},
		{"past 32 KiB, written without waiting", func(w *Writer) {
			for range flushAt/len(a) + 1 {
				w.Log("action", "intercept", "target", "a:443")
			}
		}, []string{strings.Repeat(a, flushAt/len(a)+1)}},
		{"Close writes what waits, then each line at once", func(w *Writer) {
			w.Log("action", "intercept", "target", "a:443")
			w.Close()
			w.Log("action", "refuse", "target", "b:443", "reason", "path")
		}, []string{a, b}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var cw countingWriter
			w := NewBufferedWriter(&cw, Custodian, time.Hour) // the interval never passes here
			c.do(w)
			if got := cw.got(); strings.Join(got, "|") != strings.Join(c.want, "|") || len(got) != len(c.want) {
				t.Fatalf("writes %q\nwant   %q", got, c.want)
			}
		})
	}
}

// TestBufferedWriterInterval: a line left waiting is written once the
// interval has passed, without a Flush.
func TestBufferedWriterInterval(t *testing.T) {
	var cw countingWriter
	w := NewBufferedWriter(&cw, Custodian, 10*time.Millisecond)
	for round := range 3 {
		w.Log("action", "tunnel", "target", "x:1")
		deadline := time.Now().Add(5 * time.Second)
		for len(cw.got()) == round && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if got := cw.got(); len(got) != round+1 || got[round] != "jr2.custodian action=tunnel target=x:1\n" {
			t.Fatalf("round %d: writes %q", round, got)
		}
	}
}

func TestBufferedWriterWholeLines(t *testing.T) {
	var cw countingWriter
	w := NewBufferedWriter(&cw, Custodian, time.Millisecond)
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				w.Log("action", "tunnel", "target", "x:1")
			}
		}()
	}
	wg.Wait()
	w.Flush()
	all := strings.Join(cw.got(), "")
	lines := strings.Split(strings.TrimSuffix(all, "\n"), "\n")
	if len(lines) != 1000 {
		t.Fatalf("%d lines", len(lines))
	}
	for _, l := range lines {
		if l != "jr2.custodian action=tunnel target=x:1" {
			t.Fatalf("torn line %q", l)
		}
	}
	for _, wr := range cw.got() {
		if !strings.HasSuffix(wr, "\n") {
			t.Fatalf("a Write ends inside a line: %q", wr)
		}
	}
}

// FuzzWriterLine: what a Writer writes for any pairs is Format's line and
// one newline, buffered or not: no field forges a second line.
func FuzzWriterLine(f *testing.F) {
	f.Add("target", "a b=c\nd\"e", "reason", "")
	f.Add("", "é\x00\x7f", "k=x y", "v")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		want := Format(Custodian, k1, v1, k2, v2) + "\n"
		if got := string(AppendFormat([]byte("kept "), Custodian, k1, v1, k2, v2)); got != "kept "+strings.TrimSuffix(want, "\n") {
			t.Fatalf("AppendFormat: %q, Format gives %q", got, want)
		}
		for _, every := range []time.Duration{0, time.Hour} {
			var cw countingWriter
			w := NewBufferedWriter(&cw, Custodian, every)
			w.Log(k1, v1, k2, v2)
			w.Flush()
			if got := strings.Join(cw.got(), ""); got != want {
				t.Fatalf("every %v: wrote %q, Format gives %q", every, got, want)
			}
			if strings.Count(want, "\n") != 1 {
				t.Fatalf("two lines from one: %q", want)
			}
		}
	})
}

// TestFormatOneAllocation: a line is built in one allocation (the module
// writes one per intercepted request).
func TestFormatOneAllocation(t *testing.T) {
	n := testing.AllocsPerRun(100, func() {
		_ = Format(Custodian, "action", "intercept", "target", "api.anthropic.com:443", "secret", "ANTHROPIC_API_KEY", "method", "POST", "status", "200", "odd")
	})
	if n != 1 {
		t.Errorf("Format: %v allocations, want 1", n)
	}
	buf := make([]byte, 0, 256)
	if n := testing.AllocsPerRun(100, func() {
		buf = AppendFormat(buf[:0], Custodian, "action", "intercept", "target", "api.anthropic.com:443", "status", "200")
	}); n != 0 {
		t.Errorf("AppendFormat into a buffer that fits: %v allocations, want 0", n)
	}
}
