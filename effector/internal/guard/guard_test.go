package guard

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"jr2.dev/boundary/effector/internal/wire"
)

var (
	key     = bytes.Repeat([]byte{7}, 32)
	address = "10.0.0.7:8082"
	started = time.UnixMilli(1_760_000_000_000)
	now     = started.Add(10 * time.Minute)
)

// signed builds a request signed as the Orchestrator would, then lets
// mutate change it.
type req struct {
	method, target, addr, nonce string
	t                           time.Time
	body                        []byte
	key                         []byte
	mutate                      func(*http.Request)
}

func (r req) build() *http.Request {
	if r.method == "" {
		r.method = "POST"
	}
	if r.target == "" {
		r.target = "/effects/e1"
	}
	if r.addr == "" {
		r.addr = address
	}
	if r.nonce == "" {
		r.nonce = "nonce-1"
	}
	if r.t.IsZero() {
		r.t = now
	}
	if r.key == nil {
		r.key = key
	}
	h := httptest.NewRequest(r.method, r.target, bytes.NewReader(r.body))
	ts := strconv.FormatInt(r.t.UnixMilli(), 10)
	h.Header.Set(wire.HeaderTime, ts)
	h.Header.Set(wire.HeaderNonce, r.nonce)
	h.Header.Set(wire.HeaderSignature, wire.Sign(r.key, wire.RequestLines(r.method, r.addr, r.target, ts, r.nonce, r.body)))
	if r.mutate != nil {
		r.mutate(h)
	}
	return h
}

func newGuard() *Guard { return New(key, address, started, func() time.Time { return now }) }

func TestCheckRefuses(t *testing.T) {
	big := bytes.Repeat([]byte("a"), wire.MaxBody+1)
	cases := []struct {
		name string
		r    req
	}{
		{"no signature", req{mutate: func(h *http.Request) { h.Header.Del(wire.HeaderSignature) }}},
		{"no time", req{mutate: func(h *http.Request) { h.Header.Del(wire.HeaderTime) }}},
		{"no nonce", req{mutate: func(h *http.Request) { h.Header.Del(wire.HeaderNonce) }}},
		{"wrong key", req{key: bytes.Repeat([]byte{8}, 32)}},
		{"signed for another replica's address", req{addr: "10.0.0.8:8082"}},
		{"signed for another port", req{addr: "10.0.0.7:8083"}},
		{"another method than signed", req{mutate: func(h *http.Request) { h.Method = "DELETE" }}},
		{"another target than signed", req{mutate: func(h *http.Request) { h.RequestURI = "/effects/e2" }}},
		{"another body than signed", req{body: []byte("{}"), mutate: func(h *http.Request) {
			h.Body = io.NopCloser(strings.NewReader("{ }"))
		}}},
		{"before the process started", req{t: started.Add(-time.Millisecond)}},
		{"in the millisecond the process started, before it", req{t: started.Add(-time.Microsecond)}},
		{"more than 5 minutes old", req{t: now.Add(-wire.Window - time.Millisecond)}},
		{"more than 5 minutes ahead", req{t: now.Add(wire.Window + time.Millisecond)}},
		{"a time with a sign", req{mutate: func(h *http.Request) { h.Header.Set(wire.HeaderTime, "+"+h.Header.Get(wire.HeaderTime)) }}},
		{"a nonce of another alphabet", req{nonce: "a.b"}},
		{"a nonce over 64", req{nonce: strings.Repeat("n", 65)}},
		{"two signatures", req{mutate: func(h *http.Request) { h.Header.Add(wire.HeaderSignature, h.Header.Get(wire.HeaderSignature)) }}},
		{"a padded signature", req{mutate: func(h *http.Request) { h.Header.Set(wire.HeaderSignature, h.Header.Get(wire.HeaderSignature)+"=") }}},
		{"a body over 4 MiB, declared", req{body: big}},
		{"a body over 4 MiB, undeclared", req{body: big, mutate: func(h *http.Request) { h.ContentLength = -1 }}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if v, ok := newGuard().Check(c.r.build()); ok {
				t.Fatalf("passed: %+v", v)
			}
		})
	}
}

func TestCheckPasses(t *testing.T) {
	g := newGuard()
	for _, c := range []req{
		{},
		{nonce: "n3", t: now.Add(-wire.Window)},
		{nonce: "n4", t: now.Add(wire.Window)},
		{nonce: "n5", body: bytes.Repeat([]byte("b"), wire.MaxBody)},
		{nonce: "n6", method: "GET", target: "/effects/e1?x=1"},
		{nonce: strings.Repeat("N", 64)},
	} {
		v, ok := g.Check(c.build())
		if !ok {
			t.Fatalf("refused %+v", c)
		}
		if v.Nonce != c.build().Header.Get(wire.HeaderNonce) || len(v.Body) != len(c.body) {
			t.Errorf("verified %q with %d bytes", v.Nonce, len(v.Body))
		}
	}
}

// TestStartedIsNotBefore: a request signed in the millisecond the process
// started, at or after it, passes.
func TestStartedIsNotBefore(t *testing.T) {
	g := New(key, address, started, func() time.Time { return started.Add(time.Minute) })
	if _, ok := g.Check(req{t: started}.build()); !ok {
		t.Fatal("a request signed at the start was refused")
	}
}

func TestReplayRefused(t *testing.T) {
	g := newGuard()
	r := req{body: []byte(`{"kind":"http"}`)}
	if _, ok := g.Check(r.build()); !ok {
		t.Fatal("the first send was refused")
	}
	if _, ok := g.Check(r.build()); ok {
		t.Fatal("the replay passed")
	}
	// The same nonce under another time is the same nonce.
	r.t = now.Add(time.Second)
	if _, ok := g.Check(r.build()); ok {
		t.Fatal("a nonce reused with another time passed")
	}
}

// TestRefusedNonceNotRemembered: a request that fails verification leaves
// no trace, so an attacker cannot burn a nonce the Orchestrator will use.
func TestRefusedNonceNotRemembered(t *testing.T) {
	g := newGuard()
	if _, ok := g.Check(req{nonce: "later", key: []byte("wrong")}.build()); ok {
		t.Fatal("a wrong key passed")
	}
	if _, ok := g.Check(req{nonce: "later"}.build()); !ok {
		t.Fatal("a nonce was burnt by a refused request")
	}
	if g.nonces.Len() != 1 {
		t.Errorf("remembered %d nonces", g.nonces.Len())
	}
}

// TestReplayAfterClockStepsBack: a wall clock that steps back right after
// a nonce was forgotten (a host's clock sync; WSL2 steps about 1.6 s)
// does not readmit the request that nonce was seen with.
func TestReplayAfterClockStepsBack(t *testing.T) {
	clock := now
	g := New(key, address, started, func() time.Time { return clock })
	first := req{nonce: "once", body: []byte(`{"kind":"http"}`)}
	if _, ok := g.Check(first.build()); !ok {
		t.Fatal("the first send was refused")
	}
	// The clock passes the first request's window; a later request makes
	// the memory sweep.
	clock = now.Add(wire.Window + 2*time.Second)
	if _, ok := g.Check(req{nonce: "later", t: clock}.build()); !ok {
		t.Fatal("a later request was refused")
	}
	// The clock steps back 3 s: the first request's time is in the window
	// again.
	clock = now.Add(wire.Window - time.Second)
	if _, ok := g.Check(first.build()); ok {
		t.Fatal("the first request was taken again after the clock stepped back")
	}
}

func TestNoncesForTheWindowOnly(t *testing.T) {
	n := NewNonces(4)
	base := int64(1_000_000)
	for i := 0; i < 4; i++ {
		if !n.Add("n"+strconv.Itoa(i), base+100, base) {
			t.Fatalf("n%d refused", i)
		}
	}
	if n.Add("n4", base+100, base) {
		t.Fatal("a full memory took a fifth nonce")
	}
	if n.Add("n0", base+100, base+50) {
		t.Fatal("n0 replayed inside its window")
	}
	// Past every expiry and a sweep's second, all are forgotten.
	if !n.Add("n5", base+5000, base+1200) {
		t.Fatal("the memory did not forget expired nonces")
	}
	if got := n.Len(); got != 1 {
		t.Errorf("remembered %d after the sweep, want 1", got)
	}
}

func BenchmarkCheck(b *testing.B) {
	g := New(key, address, started, time.Now)
	body := bytes.Repeat([]byte("x"), 1024)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		r := req{nonce: "b" + strconv.Itoa(i), t: time.Now(), body: body}.build()
		if _, ok := g.Check(r); !ok {
			b.Fatal("refused")
		}
	}
}
