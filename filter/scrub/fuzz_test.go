package scrub

import (
	"bytes"
	"fmt"
	"net/url"
	"strings"
	"testing"
)

// fuzzSecrets reads up to four secrets from b: a count byte, then for each a
// length byte (8 to 40 bytes) and that many bytes, filled from a fixed
// pattern when b runs out. "[" and "]" become "(" and ")": a form holding a
// bracket can be completed by a label beside it, which New's doc
// states is outside the claim.
func fuzzSecrets(b []byte) []Secret {
	take := func() byte {
		if len(b) == 0 {
			return 0
		}
		c := b[0]
		b = b[1:]
		return c
	}
	n := 1 + int(take()%4)
	secrets := make([]Secret, n)
	for i := range secrets {
		l := 8 + int(take()%33)
		v := make([]byte, l)
		for k := range v {
			if len(b) > 0 {
				v[k] = take()
			} else {
				v[k] = "0123456789abcdef"[(k+i)%16]
			}
			switch v[k] {
			case '[':
				v[k] = '('
			case ']':
				v[k] = ')'
			}
		}
		secrets[i] = Secret{Name: fmt.Sprintf("s%d", i), Value: v}
	}
	return secrets
}

// fuzzText builds a text from program: each op byte emits literal bytes, a
// whole form, or a prefix, suffix or middle of a form, so that the fuzzer
// reaches matches, near-matches and overlaps it could not spell itself.
func fuzzText(forms []ownedForm, program []byte) []byte {
	var text []byte
	for i := 0; i+1 < len(program) && len(text) < 4096; i += 2 {
		op, arg := program[i], int(program[i+1])
		f := forms[arg%len(forms)].b
		switch op % 5 {
		case 0:
			text = append(text, program[i+1])
		case 1:
			text = append(text, f...)
		case 2:
			text = append(text, f[:int(op/5)%len(f)]...)
		case 3:
			text = append(text, f[int(op/5)%len(f):]...)
		default:
			a := int(op/5) % len(f)
			text = append(text, f[a:a+(len(f)-a)/2]...)
		}
	}
	return text
}

// cutsFrom turns bytes into cut points of a text of length n.
func cutsFrom(b []byte, n int) []int {
	var cuts []int
	at := 0
	for _, c := range b {
		at += int(c) % 64
		if at > n {
			break
		}
		cuts = append(cuts, at)
	}
	return cuts
}

// FuzzScrub: after scrubbing, no form of any secret remains, in any
// chunking; scrubbing is idempotent; the result is the reference scrub's,
// exact and case-folded; and String agrees with Bytes.
func FuzzScrub(f *testing.F) {
	f.Add([]byte("\x01\x10sk-live-0123456789"), []byte("\x00a\x01\x00\x00 \x02\x00\x03\x00\x01\x01"))
	f.Add([]byte("\x02\x00aaaaaaaa\x04aaaaaaaaaaaa"), []byte("\x01\x00\x01\x01\x01\x00\x01\x03\x00x"))
	f.Add([]byte("\x00\x0aa/b+c=d?e&f"), []byte("\x01\x05\x01\x07\x01\x09\x00\n\x01\x10"))
	f.Fuzz(func(t *testing.T, spec, program []byte) {
		secrets := fuzzSecrets(spec)
		s, err := New(secrets)
		if err != nil {
			if strings.Contains(err.Error(), "its label would hold a form") {
				return // a value that spells a label: refused, as it must be
			}
			t.Fatalf("New refused generated secrets: %v", err)
		}
		forms := allForms(secrets)
		text := fuzzText(forms, program)
		out := s.Bytes(text)
		for _, f := range forms {
			if bytes.Contains(out, f.b) {
				t.Fatalf("Bytes(%q) = %q still holds the form %q", text, out, f.b)
			}
		}
		if again := s.Bytes(out); !bytes.Equal(again, out) {
			t.Fatalf("not idempotent: %q -> %q -> %q", text, out, again)
		}
		if want := oracle(secrets, forms, text); !bytes.Equal(out, want) {
			t.Fatalf("Bytes(%q) = %q, the reference gives %q", text, out, want)
		}
		if got := streamChunks(t, s, text, cutsFrom(program, len(text)), out); !bytes.Equal(got, out) {
			t.Fatalf("stream of %q: %q, whole: %q", text, got, out)
		}
		if got, want := s.Folded().Bytes(text), oracleCase(secrets, forms, text, true); !bytes.Equal(got, want) {
			t.Fatalf("Folded().Bytes(%q) = %q, the reference gives %q", text, got, want)
		}
		// String's no-copy path (no form in the text) gives Bytes' answer.
		for _, sc := range []*Scrubber{s, s.Folded()} {
			if got, want := sc.String(string(text)), string(sc.Bytes(text)); got != want {
				t.Fatalf("String(%q) = %q, Bytes gives %q", text, got, want)
			}
		}
	})
}

// FuzzStream: a stream cut anywhere gives exactly the whole scrub, every
// output is final, and the held tail stays below the longest form.
func FuzzStream(f *testing.F) {
	f.Add([]byte("data: {\"k\":\"sk-ant-oat01-AbCdEf_GhIjKl-123456\"}\n\n"), []byte("\x05\x09\x20"))
	f.Add([]byte("c2stYW50LW9hdDAxLUFiQ2RFZl9HaElqS2wtMTIzNDU2"), []byte("\x01\x01\x01\x01\x01\x01\x01"))
	f.Add([]byte(`a\/b+c=d?e\u0026f\u003cg\u003eh\"i\\j%k l`), []byte("\x03"))
	f.Add([]byte("p%C3%A4ssw%C3%B6rd%E2%82%AC%F0%9F%98%80-x"), []byte("\x00\x02\x3f"))
	secrets := fixture()
	s := mustNew(f, secrets)
	f.Fuzz(func(t *testing.T, text, cuts []byte) {
		want := s.Bytes(text)
		if got := streamChunks(t, s, text, cutsFrom(cuts, len(text)), want); !bytes.Equal(got, want) {
			t.Fatalf("stream of %q cut %v: %q, whole: %q", text, cutsFrom(cuts, len(text)), got, want)
		}
	})
}

// refPercent spells v in the set keep, derived from Go's url.QueryEscape
// (which keeps ALPHA, DIGIT and "-._~", writes a space "+" and every other
// byte "%XX"), not from the table's encoder: a space becomes "%20" unless
// plus, each of "-._~" the set does not keep is escaped, each other byte the
// set keeps is unescaped, and the hex is lowered unless upper.
func refPercent(v []byte, keep string, upper, plus bool) []byte {
	q := url.QueryEscape(string(v))
	if !plus {
		q = strings.ReplaceAll(q, "+", "%20") // a "+" of v is "%2B" here
	}
	for _, c := range "-._~" {
		if !strings.ContainsRune(keep, c) {
			q = strings.ReplaceAll(q, string(c), fmt.Sprintf("%%%02X", c))
		}
	}
	for _, c := range keep {
		if !strings.ContainsRune("-._~", c) {
			q = strings.ReplaceAll(q, fmt.Sprintf("%%%02X", c), string(c))
		}
	}
	if upper {
		return []byte(q)
	}
	b := []byte(q)
	for i := range b {
		if i >= 1 && (b[i-1] == '%' || i >= 2 && b[i-2] == '%') && b[i] >= 'A' && b[i] <= 'F' {
			b[i] += 'a' - 'A' // a hex digit of an escape: every "%" of q starts one
		}
	}
	return b
}

// FuzzSpellings: every spelling of the form table (each set, "%20" and "+"
// for space, upper- and lower-case hex) of a value holding a space, spelled
// by an encoder independent of the table's and put between random bytes, is
// a form and is scrubbed: no copy of it is left, and a label is.
func FuzzSpellings(f *testing.F) {
	f.Add([]byte("it's a (x)*y! /p?q:r@s&t=u+v$w,z#~"), []byte("q="), []byte("&next=1"))
	f.Add([]byte("pässwörd with spaces"), []byte{}, []byte{0xff})
	f.Add([]byte("a+b c+d e/f"), []byte("%2"), []byte("0+"))
	f.Fuzz(func(t *testing.T, v, pre, post []byte) {
		if len(v) > 64 || len(pre) > 64 || len(post) > 64 {
			return
		}
		v = bytes.Map(func(r rune) rune {
			switch r {
			case '[':
				return '('
			case ']':
				return ')'
			}
			return r
		}, v)
		if !bytes.ContainsRune(v, ' ') {
			v = append(v[:len(v)/2:len(v)/2], append([]byte(" "), v[len(v)/2:]...)...)
		}
		for len(v) < MinLen {
			v = append(v, " x"...)
		}
		s, err := New([]Secret{{Name: "v", Value: v}})
		if err != nil {
			if strings.Contains(err.Error(), "its label would hold a form") {
				return
			}
			t.Fatalf("New: %v", err)
		}
		forms := Forms(v)
		for _, sp := range percentSpellings {
			for _, upper := range []bool{true, false} {
				for _, plus := range []bool{false, true} {
					spelled := refPercent(v, sp.keep, upper, plus)
					if !containsForm(forms, spelled) {
						t.Fatalf("%q spelled in %q (upper %v, plus %v) = %q is not a form", v, sp.keep, upper, plus, spelled)
					}
					in := append(append(append([]byte{}, pre...), spelled...), post...)
					out := s.Bytes(in)
					if bytes.Contains(out, spelled) || !bytes.Contains(out, []byte("[secret:v]")) {
						t.Fatalf("Bytes(%q) = %q: the spelling %q in %q (plus %v) was not scrubbed", in, out, spelled, sp.keep, plus)
					}
				}
			}
		}
	})
}
