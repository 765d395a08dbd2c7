package scrub

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// TestStreamEverySplitPoint cuts a body holding each form at every single
// byte: the output equals Bytes of the whole, and every prefix that comes
// out is a prefix of it (so no chunk ends with part of a form that is then
// replaced).
func TestStreamEverySplitPoint(t *testing.T) {
	secrets := fixture()
	s := mustNew(t, secrets)
	for _, f := range allForms(secrets) {
		body := []byte("data: {\"a\":\"" + string(f.b) + "\"}\n\nx" + string(f.b))
		want := s.Bytes(body)
		for k := 0; k <= len(body); k++ {
			if got := streamChunks(t, s, body, []int{k}, want); !bytes.Equal(got, want) {
				t.Fatalf("form %q split at %d: %q, want %q", f.b, k, got, want)
			}
		}
	}
}

func TestStreamRandomMultiSplits(t *testing.T) {
	secrets, s, forms, r := rig(t, 7)
	for trial := 0; trial < 400; trial++ {
		text := randomText(r, forms, 20+r.IntN(600))
		want := oracle(secrets, forms, text)
		for _, k := range []int{1, 3, 10, len(text)} {
			cuts := randomCuts(r, len(text), k)
			if got := streamChunks(t, s, text, cuts, want); !bytes.Equal(got, want) {
				t.Fatalf("cuts %v of %q:\n got %q\nwant %q", cuts, text, got, want)
			}
		}
		// One byte at a time.
		every := make([]int, len(text))
		for i := range every {
			every[i] = i
		}
		if got := streamChunks(t, s, text, every, want); !bytes.Equal(got, want) {
			t.Fatalf("byte by byte: %q, want %q", got, want)
		}
	}
}

// TestStreamNoChunkEndsWithPartialForm names the property the prefix check
// implies: a form that is then replaced never has its first bytes emitted.
func TestStreamNoChunkEndsWithPartialForm(t *testing.T) {
	secrets := fixture()
	s := mustNew(t, secrets)
	for _, f := range allForms(secrets) {
		body := append([]byte("some text "), f.b...)
		for k := 1; k < len(f.b); k++ {
			st := s.NewStream()
			out := st.Write(nil, body[:10+k])
			if !bytes.Equal(out, []byte("some text ")) {
				t.Fatalf("form %q: the chunk ending after %d of its bytes emitted %q", f.b, k, out)
			}
			if st.Held() < k {
				t.Fatalf("form %q: holds %d bytes after %d of its bytes", f.b, st.Held(), k)
			}
			out = st.Flush(st.Write(out, body[10+k:]))
			if want := s.Bytes(body); !bytes.Equal(out, want) {
				t.Fatalf("%q, want %q", out, want)
			}
		}
	}
}

// TestStreamHoldsExactlyWhatIsNeeded checks both sides of the holding rule
// after every write: what came out is final whatever follows (a prefix of
// the scrub of any continuation), and what is held could still be replaced
// (it is a proper prefix of a form, and completing that form makes the next
// output byte a label).
func TestStreamHoldsExactlyWhatIsNeeded(t *testing.T) {
	_, s, forms, r := rig(t, 11)
	for trial := 0; trial < 150; trial++ {
		text := randomText(r, forms, 200)
		st := s.NewStream()
		var out []byte
		for i := 0; i < len(text); {
			k := min(len(text)-i, 1+r.IntN(30))
			out = st.Write(out, text[i:i+k])
			i += k
			seen := text[:i]
			// Final: a random continuation, and one completing each form
			// the tail could begin, keep out as a prefix.
			for _, u := range [][]byte{randomText(r, forms, 40), nil} {
				if got := s.Bytes(append(append([]byte{}, seen...), u...)); !bytes.HasPrefix(got, out) {
					t.Fatalf("emitted %q, but %q+%q scrubs to %q", out, seen, u, got)
				}
			}
			h := st.Held()
			if h == 0 {
				continue
			}
			held := seen[len(seen)-h:]
			var completed bool
			for _, f := range forms {
				if len(f.b) > h && bytes.HasPrefix(f.b, held) {
					next := append(append([]byte{}, seen...), f.b[h:]...)
					got := s.Bytes(next)
					if !bytes.HasPrefix(got, out) {
						t.Fatalf("emitted %q, but completing %q gives %q", out, f.b, got)
					}
					if bytes.HasPrefix(got[len(out):], []byte("[secret:")) {
						completed = true
						break
					}
				}
			}
			if !completed {
				t.Fatalf("holds %q after %q: no form it begins would replace it, so it should have been emitted", held, seen)
			}
		}
	}
}

// TestStreamSSE writes server-sent events one at a time: an event whose
// tail cannot begin a form comes out whole from the Write that brought it.
func TestStreamSSE(t *testing.T) {
	secrets := fixture()
	s := mustNew(t, secrets)
	st := s.NewStream()
	for i := 0; i < 50; i++ {
		var ev string
		switch i % 4 {
		case 0:
			ev = fmt.Sprintf("data: {\"delta\":\"hello %d\"}\n\n", i)
		case 1:
			ev = "data: {\"key\":\"" + string(valTok) + "\"}\n\n"
		case 2:
			ev = "event: ping\ndata: {\"b64\":\"" + string(Forms(valASCII)[1]) + "\"}\n\n"
		default:
			ev = "data: [DONE]\n\n"
		}
		out := st.Write(nil, []byte(ev))
		if st.Held() != 0 {
			t.Fatalf("event %d: holds %d bytes", i, st.Held())
		}
		if want := s.Bytes([]byte(ev)); !bytes.Equal(out, want) {
			t.Fatalf("event %d: wrote %q, want %q", i, out, want)
		}
		if i%4 == 1 && !strings.Contains(string(out), "[secret:tok]") {
			t.Fatalf("event %d not scrubbed: %q", i, out)
		}
	}
	if out := st.Flush(nil); len(out) != 0 {
		t.Fatalf("Flush after whole events emitted %q", out)
	}
}

func TestStreamHoldsTailThatBeginsAForm(t *testing.T) {
	s := mustNew(t, []Secret{{Name: "k", Value: []byte("sk-live-0123456789")}})
	st := s.NewStream()
	out := st.Write(nil, []byte("data: sk-live-01"))
	if string(out) != "data: " || st.Held() != len("sk-live-01") {
		t.Fatalf("wrote %q, held %d", out, st.Held())
	}
	out = st.Write(out, []byte("23456789\n\n"))
	if string(out) != "data: [secret:k]\n\n" || st.Held() != 0 {
		t.Fatalf("wrote %q, held %d", out, st.Held())
	}
	// A tail that turns out not to be the form is released whole.
	out = st.Write(nil, []byte("sk-live-0123"))
	if len(out) != 0 {
		t.Fatalf("wrote %q", out)
	}
	out = st.Write(out, []byte("X"))
	if string(out) != "sk-live-0123X" || st.Held() != 0 {
		t.Fatalf("wrote %q, held %d", out, st.Held())
	}
}

func TestStreamFlushAndReuse(t *testing.T) {
	s := mustNew(t, []Secret{{Name: "k", Value: []byte("sk-live-0123456789")}})
	st := s.NewStream()
	out := st.Write(nil, []byte("end sk-live-0123"))
	if out = st.Flush(out); string(out) != "end sk-live-0123" {
		t.Fatalf("Flush: %q", out)
	}
	if st.Held() != 0 {
		t.Fatal("Flush left bytes held")
	}
	// A held complete form is replaced by Flush.
	out = st.Write(nil, []byte("x sk-live-0123456789"))
	if out = st.Flush(out); string(out) != "x [secret:k]" {
		t.Fatalf("second body: %q", out)
	}
}

// TestResetUniformStream: a stream reset after a body cut off mid-form
// (bytes held and delayed, never flushed) carries the next body exactly as
// a new uniform stream does: nothing of the last body comes out.
func TestResetUniformStream(t *testing.T) {
	s := mustNew(t, []Secret{{Name: "k", Value: []byte("sk-live-0123456789")}})
	st := s.NewUniformStream()
	if out := st.Write(nil, []byte("cut off at sk-live-012")); st.Held() == 0 {
		t.Fatalf("the first body held nothing (out %q): the test proves nothing", out)
	}
	held, pend := st.held, st.pend
	s.ResetUniformStream(st)
	if st.Held() != 0 {
		t.Fatalf("reset stream holds %d bytes", st.Held())
	}
	for _, b := range [][]byte{held[:cap(held)], pend[:cap(pend)]} {
		if bytes.ContainsFunc(b, func(r rune) bool { return r != 0 }) {
			t.Fatalf("reset stream's memory still holds %q", b)
		}
	}
	body := []byte("next sk-live-0123456789 body, then printable text to the end")
	fresh := s.NewUniformStream()
	for _, cut := range []int{0, 7, 13, 30, len(body)} {
		s.ResetUniformStream(st)
		s.ResetUniformStream(fresh)
		got := st.Flush(st.Write(st.Write(nil, body[:cut]), body[cut:]))
		want := fresh.Flush(fresh.Write(fresh.Write(nil, body[:cut]), body[cut:]))
		if !bytes.Equal(got, want) || string(got) != "next [secret:k] body, then printable text to the end" {
			t.Fatalf("cut %d: reset stream gave %q, a new one %q", cut, got, want)
		}
	}
}

func TestStreamDiscard(t *testing.T) {
	s := mustNew(t, []Secret{{Name: "k", Value: []byte("sk-live-0123456789")}})
	st := s.NewStream()
	out := st.Write(nil, []byte("output limit reached at sk-live-012"))
	if n := st.Discard(); n != len("sk-live-012") {
		t.Fatalf("Discard dropped %d bytes", n)
	}
	if string(out) != "output limit reached at " || st.Held() != 0 {
		t.Fatalf("out %q, held %d", out, st.Held())
	}
	if out = st.Flush(st.Write(nil, []byte("next sk-live-0123456789 body"))); string(out) != "next [secret:k] body" {
		t.Fatalf("after Discard: %q", out)
	}
}

func TestStreamDoesNotRetainInput(t *testing.T) {
	s := mustNew(t, []Secret{{Name: "k", Value: []byte("sk-live-0123456789")}})
	st := s.NewStream()
	p := []byte("a sk-live-0123")
	out := st.Write(nil, p)
	for i := range p {
		p[i] = 'Z'
	}
	if out = st.Flush(st.Write(out, []byte("456789"))); string(out) != "a [secret:k]" {
		t.Fatalf("the stream kept a reference to a written chunk: %q", out)
	}
}

// A uniform stream's hold depends on the input alone: two scrubbers over
// different values emit the same number of bytes after every write of the
// same text that holds no whole form of either — so how much a write
// emits says nothing of whether its tail begins a value. The minimal
// stream does leak it (the control half of the test).
func TestUniformStreamHoldIsBlindToValues(t *testing.T) {
	a := mustNew(t, []Secret{{Name: "k", Value: []byte("sk-ant-SENTINEL-value-0123456789")}})
	b := mustNew(t, []Secret{{Name: "k", Value: []byte("zz-other-value-with-same-length!")}})
	probes := []string{"echo: sk-ant-S", "echo: sk-ant-T", "data: sk-ant-SENTINEL-v", "x sk-ant-SENTINEL-value-012345678", "plain text"}
	leaked := false
	for _, p := range probes {
		ua, ub := a.NewUniformStream(), b.NewUniformStream()
		if na, nb := len(ua.Write(nil, []byte(p))), len(ub.Write(nil, []byte(p))); na != nb {
			t.Fatalf("%q: uniform streams emitted %d and %d bytes", p, na, nb)
		}
		ma, mb := a.NewStream(), b.NewStream()
		if len(ma.Write(nil, []byte(p))) != len(mb.Write(nil, []byte(p))) {
			leaked = true
		}
	}
	if !leaked {
		t.Fatal("control: the minimal stream should emit value-dependent lengths")
	}
}

// A uniform stream still releases an event ending in a newline at once,
// never holds more than Longest()-1, and matches Bytes in any chunking.
func TestUniformStream(t *testing.T) {
	secrets := fixture()
	s := mustNew(t, secrets)
	st := s.NewUniformStream()
	for i, ev := range []string{"data: {\"a\":1}\n\n", "data: " + string(valTok) + "\n\n", "id: 3\n"} {
		out := st.Write(nil, []byte(ev))
		if st.Held() != 0 || !bytes.Equal(out, s.Bytes([]byte(ev))) {
			t.Fatalf("event %d: wrote %q, held %d", i, out, st.Held())
		}
	}
	_, s2, forms, r := rig(t, 5)
	for trial := 0; trial < 200; trial++ {
		text := randomText(r, forms, 300)
		st := s2.NewUniformStream()
		var out []byte
		for i := 0; i < len(text); {
			k := min(len(text)-i, 1+r.IntN(40))
			out = st.Write(out, text[i:i+k])
			i += k
			if st.Held() > s2.Longest()-1+len("[secret:]")+64 {
				t.Fatalf("holds %d bytes", st.Held())
			}
			if want := s2.Bytes(text[:i]); !bytes.HasPrefix(want, out) && !bytes.HasPrefix(s2.Bytes(text), out) {
				t.Fatalf("emitted %q is not final", out)
			}
		}
		if out = st.Flush(out); !bytes.Equal(out, s2.Bytes(text)) {
			t.Fatalf("chunked %q\nwhole   %q", out, s2.Bytes(text))
		}
	}
}
