package scrub

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// Values chosen to exercise every escaping rule: printable ASCII with each
// character an encoder treats specially, non-ASCII with a character outside
// the BMP, control characters, bytes that are not UTF-8, and the JSON
// corner characters.
var (
	valTok   = []byte("sk-ant-oat01-AbCdEf_GhIjKl-123456")
	valASCII = []byte(`a/b+c=d?e&f<g>h"i\j%k l`)
	valUni   = []byte("pässwörd€😀-x")
	valCtl   = []byte("line1\nline2\tend\r\n\x1b!")
	valBad   = []byte("abc\xffdef\xe2\x82ghi")
	valSep   = []byte("sep\u2028par\u2029\b\f\x7fend")
)

// fixture is a set of secrets with every kind of value, and one with what
// an Effector built from it.
func fixture() []Secret {
	return []Secret{
		{Name: "tok", Value: valTok, Built: [][]byte{
			[]byte("Bearer " + string(valTok)),
			[]byte("https://api.example.com/v1/" + string(valTok) + "/items"),
			[]byte("/v1/" + string(valTok) + "/items"),
			[]byte("short"), // ignored: shorter than MinLen
		}},
		{Name: "ascii", Value: valASCII},
		{Name: "uni", Value: valUni},
		{Name: "ctl", Value: valCtl},
		{Name: "bad", Value: valBad},
		{Name: "sep", Value: valSep},
	}
}

// rig is the fixture's secrets, their Scrubber and forms, and a seeded
// source of randomness.
func rig(t testing.TB, seed uint64) ([]Secret, *Scrubber, []ownedForm, *rand.Rand) {
	t.Helper()
	secrets := fixture()
	return secrets, mustNew(t, secrets), allForms(secrets), rand.New(rand.NewPCG(seed, seed+1))
}

func mustNew(t testing.TB, secrets []Secret) *Scrubber {
	t.Helper()
	s, err := New(secrets)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// allForms lists every form of every secret with the secret's index, in
// New's order: what the oracle matches.
type ownedForm struct {
	b     []byte
	owner int
}

func allForms(secrets []Secret) []ownedForm {
	var out []ownedForm
	for i, sec := range secrets {
		for _, f := range secretForms(sec) {
			out = append(out, ownedForm{f, i})
		}
	}
	return out
}

// oracle is the reference scrub, written as plainly as possible: at each
// position, the longest form that starts there (the first secret's on a
// tie) is replaced and skipped; otherwise the byte passes.
func oracle(secrets []Secret, forms []ownedForm, text []byte) []byte {
	return oracleCase(secrets, forms, text, false)
}

// oracleCase is oracle, comparing with ASCII case folded when fold is set.
func oracleCase(secrets []Secret, forms []ownedForm, text []byte, fold bool) []byte {
	cmp := text
	if fold {
		cmp = lowerASCII(text)
		lowered := make([]ownedForm, len(forms))
		for i, f := range forms {
			lowered[i] = ownedForm{lowerASCII(f.b), f.owner}
		}
		forms = lowered
	}
	var out []byte
	for i := 0; i < len(text); {
		best := -1
		for k, f := range forms {
			if bytes.HasPrefix(cmp[i:], f.b) && (best < 0 || len(f.b) > len(forms[best].b)) {
				best = k
			}
		}
		if best < 0 {
			out = append(out, text[i])
			i++
			continue
		}
		out = append(out, "[secret:"+secrets[forms[best].owner].Name+"]"...)
		i += len(forms[best].b)
	}
	return out
}

// randomText mixes random bytes, ASCII words, whole forms, and prefixes,
// suffixes and middles of forms, so that matches overlap, abut and nearly
// match.
func randomText(r *rand.Rand, forms []ownedForm, n int) []byte {
	var b []byte
	for len(b) < n {
		switch r.IntN(8) {
		case 0:
			for k := r.IntN(8); k > 0; k-- {
				b = append(b, byte(r.IntN(256)))
			}
		case 1, 2:
			words := []string{" ", "data: ", "\n\n", `{"k":"`, `"}`, "%", "\\u00", "==", "Bearer ", "abc", "-", "/"}
			b = append(b, words[r.IntN(len(words))]...)
		case 3:
			b = append(b, forms[r.IntN(len(forms))].b...)
		case 4:
			f := forms[r.IntN(len(forms))].b
			b = append(b, f[:r.IntN(len(f))]...)
		case 5:
			f := forms[r.IntN(len(forms))].b
			b = append(b, f[r.IntN(len(f)):]...)
		case 6:
			f := forms[r.IntN(len(forms))].b
			i := r.IntN(len(f))
			b = append(b, f[i:i+r.IntN(len(f)-i+1)]...)
		default:
			for k := r.IntN(12); k > 0; k-- {
				b = append(b, byte(' '+r.IntN(95)))
			}
		}
	}
	return b
}

// streamChunks writes text through a Stream cut at the given points and
// checks, after every Write, that what has come out is a prefix of want.
// It returns the whole output.
func streamChunks(t testing.TB, s *Scrubber, text []byte, cuts []int, want []byte) []byte {
	t.Helper()
	st := s.NewStream()
	var out []byte
	prev := 0
	for _, c := range append(cuts, len(text)) {
		out = st.Write(out, text[prev:c])
		prev = c
		if !bytes.HasPrefix(want, out) {
			t.Fatalf("after writing %d bytes the output %q is not a prefix of the whole scrub %q", c, out, want)
		}
		if st.Held() > max(s.Longest()-1, 0) {
			t.Fatalf("holds %d bytes, more than the longest form less one (%d)", st.Held(), s.Longest()-1)
		}
	}
	return st.Flush(out)
}

// randomCuts returns sorted cut points in [0, n].
func randomCuts(r *rand.Rand, n, k int) []int {
	cuts := make([]int, k)
	for i := range cuts {
		cuts[i] = r.IntN(n + 1)
	}
	for i := 1; i < len(cuts); i++ {
		for j := i; j > 0 && cuts[j] < cuts[j-1]; j-- {
			cuts[j], cuts[j-1] = cuts[j-1], cuts[j]
		}
	}
	return cuts
}
