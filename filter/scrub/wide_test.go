package scrub

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// wideRigs are automata the interleaved walk is checked on: the fixture,
// many token-shaped secrets with what an Effector builds (deep shared url
// prefixes, states past the rows), and the fixture with rows for a handful
// of states only, so that every lane leaves the rows often.
func wideRigs(t testing.TB) []struct {
	name    string
	secrets []Secret
	a       *automaton
} {
	t.Helper()
	type rig = struct {
		name    string
		secrets []Secret
		a       *automaton
	}
	var out []rig
	for _, c := range []struct {
		name    string
		secrets []Secret
		budget  int
	}{
		{"fixture", fixture(), rowBudget},
		{"64 secrets", benchSecrets(64), rowBudget},
		{"fixture, 8 rows", fixture(), 8 * 4 << 7},
		{"16 secrets, 64 rows", benchSecrets(16), 64 * 4 << 7},
	} {
		s := mustNew(t, c.secrets)
		out = append(out, rig{c.name, c.secrets, buildRows(s.pats, false, c.budget)})
	}
	return out
}

// straddleText is n bytes of random text with near-matches (prefixes and
// suffixes of forms, whole forms) planted across each point where
// advanceWide splits a text of n bytes: a lane's start, the end of its
// overlap, and a few bytes either side.
func straddleText(r *rand.Rand, forms []ownedForm, longest, n int) []byte {
	t := randomText(r, forms, n)[:n]
	ov := longest - 1
	stride := (n - ov) / lanes
	for k := 1; k < lanes; k++ {
		for _, at := range []int{k * stride, k*stride + ov, k*stride + ov + 1, k*stride - 1} {
			f := forms[r.IntN(len(forms))].b
			var piece []byte
			switch r.IntN(4) {
			case 3: // a longest form starting one byte before a lane's first
				piece = longestForm(forms)
				at = k*stride - 1
			case 0: // a prefix ending at the point: the lane above starts inside it
				piece = f[:1+r.IntN(len(f))]
				at -= len(piece)
			case 1: // a form across the point
				piece = f
				at -= r.IntN(len(f) + 1)
			default: // a suffix starting at the point
				piece = f[r.IntN(len(f)):]
			}
			at = max(0, min(at, n-len(piece)))
			copy(t[at:], piece)
		}
	}
	return t
}

// longestForm is the first of the longest forms.
func longestForm(forms []ownedForm) []byte {
	var l []byte
	for _, f := range forms {
		if len(f.b) > len(l) {
			l = f.b
		}
	}
	return l
}

// TestAdvanceWideAgreesWithAdvance: the interleaved walk returns the plain
// walk's state and length on random texts with many secrets and near-matches
// straddling every split point, from the root and from states a scan can
// stop in (past the rows, at a match).
func TestAdvanceWideAgreesWithAdvance(t *testing.T) {
	r := rand.New(rand.NewPCG(12, 12))
	for _, rig := range wideRigs(t) {
		t.Run(rig.name, func(t *testing.T) {
			a := rig.a
			forms := allForms(rig.secrets)
			wide := 0
			for iter := 0; iter < 300; iter++ {
				n := lanes*a.longest + r.IntN(6000)
				text := straddleText(r, forms, a.longest, n)
				starts := []int32{0, int32(r.IntN(a.states()))}
				// A state the walk stops in: after a random prefix.
				s, _ := a.advance(0, randomText(r, forms, 1+r.IntN(300)))
				starts = append(starts, s)
				for _, s := range starts {
					// Walk the text on and on, as scan does after each match.
					for at := 0; at < len(text); {
						ws, wk := a.advanceWide(s, text[at:])
						ps, pk := a.advance(s, text[at:])
						if ws != ps || wk != pk {
							t.Fatalf("from state %d over %d bytes at %d: wide (%d, %d), plain (%d, %d)", s, len(text)-at, at, ws, wk, ps, pk)
						}
						if (len(text)-at-a.longest+1)/lanes > a.longest {
							wide++
						}
						at += pk
						s = ps
					}
				}
			}
			if wide < 100 {
				t.Fatalf("only %d walks were long enough to interleave", wide)
			}
		})
	}
}

// TestWideScanAgreesWithOracle: the whole scan over long texts (where the
// interleaved walk runs) is the reference scrub, and so is any chunking,
// with cuts inside the lanes' overlaps.
func TestWideScanAgreesWithOracle(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 13))
	secrets := fixture()
	s := mustNew(t, secrets)
	forms := allForms(secrets)
	for iter := 0; iter < 40; iter++ {
		n := lanes*s.Longest() + r.IntN(8000)
		text := straddleText(r, forms, s.Longest(), n)
		want := oracle(secrets, forms, text)
		if got := s.Bytes(text); !bytes.Equal(got, want) {
			t.Fatalf("Bytes of %d bytes differs from the reference", n)
		}
		cuts := overlapCuts(r, n, s.Longest())
		if got := streamChunks(t, s, text, cuts, want); !bytes.Equal(got, want) {
			t.Fatalf("stream of %d bytes cut at %v differs from the whole scrub", n, cuts)
		}
	}
}

// overlapCuts are sorted cut points of a text of n bytes, each inside the
// overlap of a lane of the walk over the whole text.
func overlapCuts(r *rand.Rand, n, longest int) []int {
	ov := longest - 1
	stride := (n - ov) / lanes
	var cuts []int
	for k := 1; k < lanes; k++ {
		cuts = append(cuts, min(n, k*stride+r.IntN(ov+1)))
	}
	return cuts
}

// FuzzWide: the interleaved walk gives the plain walk's answer, and a scan
// that uses it gives the reference scrub, whole and in chunks cut inside the
// overlaps, on texts long enough to interleave.
func FuzzWide(f *testing.F) {
	f.Add([]byte("\x01\x10sk-live-0123456789"), []byte("\x00a\x01\x00\x00 \x02\x00\x03\x00\x01\x01"), uint16(0))
	f.Add([]byte("\x02\x00aaaaaaaa\x04aaaaaaaaaaaa"), []byte("\x01\x00\x01\x01\x01\x00\x01\x03\x00x"), uint16(7))
	f.Add([]byte("\x00\x0aa/b+c=d?e&f"), []byte("\x02\x05\x01\x07\x03\x09\x04\n\x01\x10"), uint16(300))
	f.Fuzz(func(t *testing.T, spec, program []byte, start uint16) {
		secrets := fuzzSecrets(spec)
		s, err := New(secrets)
		if err != nil {
			if strings.Contains(err.Error(), "its label would hold a form") {
				return
			}
			t.Fatalf("New refused generated secrets: %v", err)
		}
		forms := allForms(secrets)
		piece := fuzzText(forms, program)
		piece = append(piece, forms[len(program)%len(forms)].b...)
		// Repeated until long enough that each lane is longer than the overlap.
		var text []byte
		for len(text) < (lanes+2)*s.Longest()+lanes*64 {
			text = append(text, piece...)
		}
		for _, rows := range []int{rowBudget, 4 * 4 << 7} {
			a := buildRows(s.pats, false, rows)
			st := int32(start) % int32(a.states())
			ws, wk := a.advanceWide(st, text)
			ps, pk := a.advance(st, text)
			if ws != ps || wk != pk {
				t.Fatalf("rows %d, from %d over %d bytes: wide (%d, %d), plain (%d, %d)", rows, st, len(text), ws, wk, ps, pk)
			}
		}
		want := oracle(secrets, forms, text)
		if got := s.Bytes(text); !bytes.Equal(got, want) {
			t.Fatalf("Bytes of %d bytes differs from the reference", len(text))
		}
		r := rand.New(rand.NewPCG(uint64(start), uint64(len(program))))
		if got := streamChunks(t, s, text, overlapCuts(r, len(text), s.Longest()), want); !bytes.Equal(got, want) {
			t.Fatal("a stream cut inside the overlaps differs from the whole scrub")
		}
	})
}

// TestWidePassAllocatesNothing: a chunk without a form, through a Stream,
// allocates nothing once the Stream has its buffers.
func TestWidePassAllocatesNothing(t *testing.T) {
	for _, n := range []int{1, 16, 64} {
		t.Run(fmt.Sprint("secrets=", n), func(t *testing.T) {
			s := mustNew(t, benchSecrets(n))
			data := benchText()
			for _, uniform := range []bool{false, true} {
				st := s.NewStream()
				if uniform {
					st = s.NewUniformStream()
				}
				dst := make([]byte, 0, 2*len(data))
				dst = st.Write(dst[:0], data)
				if allocs := testing.AllocsPerRun(20, func() { dst = st.Write(dst[:0], data) }); allocs != 0 {
					t.Fatalf("uniform %v: %v allocations per 64 KiB chunk", uniform, allocs)
				}
			}
		})
	}
}

// TestAdvanceWideAtSplits puts one longest form, or one prefix of it, in
// text that holds no form byte, at each offset near where a lane starts and
// where its overlap ends: the cases where an overlap one byte short would
// miss the match, or a lane would report it at the wrong place.
func TestAdvanceWideAtSplits(t *testing.T) {
	for _, rig := range wideRigs(t) {
		t.Run(rig.name, func(t *testing.T) {
			a := rig.a
			forms := allForms(rig.secrets)
			long := longestForm(forms)
			filler := byte(0)
			for c := 255; c >= 0; c-- {
				if a.cls[c] == 0 {
					filler = byte(c)
					break
				}
			}
			if a.cls[filler] != 0 {
				t.Skip("SKIP: the forms hold every byte, so no text is free of them")
			}
			ov := a.longest - 1
			for _, n := range []int{(lanes + 1) * a.longest, 3*lanes*a.longest + 7, 9000} {
				stride := (n - ov) / lanes
				for k := 1; k < lanes; k++ {
					for _, at := range []int{k*stride - 2, k*stride - 1, k * stride, k*stride + ov - len(long), k*stride + ov + 1 - len(long), k*stride + ov - 1} {
						for _, piece := range [][]byte{long, long[:len(long)-1]} {
							text := bytes.Repeat([]byte{filler}, n)
							copy(text[at:], piece)
							ws, wk := a.advanceWide(0, text)
							ps, pk := a.advance(0, text)
							if ws != ps || wk != pk {
								t.Fatalf("%d bytes, a %d-byte piece at %d (lane %d starts at %d): wide (%d, %d), plain (%d, %d)", n, len(piece), at, k, k*stride, ws, wk, ps, pk)
							}
						}
					}
				}
			}
		})
	}
}
