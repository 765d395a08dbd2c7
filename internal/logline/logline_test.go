package logline

import (
	"bytes"
	"strings"
	"sync"
	"testing"
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
