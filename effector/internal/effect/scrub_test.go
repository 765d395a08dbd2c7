package effect

import (
	"bytes"
	"encoding/base64"
	"net/url"
	"strings"
	"testing"

	"jr2.dev/boundary/filter/scrub"
)

const (
	value = `S3nt/in+el=&?<>"\ é-effect~` // escaped in a url
	plain = "plainvalue12345678"          // nothing to escape
	other = "other-value-1234"
)

func held(t testing.TB) *scrub.Scrubber {
	t.Helper()
	s, err := scrub.New([]scrub.Secret{{Name: "OTHER", Value: []byte(other)}, {Name: "V", Value: []byte(value)}, {Name: "P", Value: []byte(plain)}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// pathOf is the url an http effect builds with v as a path segment, and
// its path and request URI, as the server sees them.
func pathOf(v string) [][]byte {
	u := &url.URL{Scheme: "https", Host: "api.example.com", Path: "/v1/items/" + v + "/x", RawQuery: "q=1"}
	return [][]byte{[]byte(u.String()), []byte(u.RequestURI()), []byte(u.EscapedPath())}
}

var effects = []struct {
	name  string
	built map[string][][]byte
	own   bool // an automaton of its own
}{
	{"bearer", map[string][][]byte{"V": {[]byte("Bearer " + value)}}, false},
	{"filled header", map[string][][]byte{"V": {[]byte("key " + value + " tail")}}, false},
	{"basic", map[string][][]byte{"V": {[]byte("deploy:" + value), []byte("Basic " + base64.StdEncoding.EncodeToString([]byte("deploy:"+value)))}}, true},
	{"url, value escaped", map[string][][]byte{"V": pathOf(value)}, true},
	{"url, nothing to escape", map[string][][]byte{"P": pathOf(plain)}, false},
	{"two secrets", map[string][][]byte{"V": {[]byte("Bearer " + value)}, "P": pathOf(plain)}, false},
	{"short built string", map[string][][]byte{"V": {[]byte("x")}}, false},
}

// TestForEffectCoversTheUnion: for each effect, every form of the held
// values and of every string it built, alone and inside other text, comes
// out of the effect's Scrubber with no form whole — the guarantee of one
// scrubber over the union — in whole strings, in any chunking of a stream,
// bounded, and case-folded. An effect builds an automaton of its own only
// when a built string has a form no held value's form is inside.
func TestForEffectCoversTheUnion(t *testing.T) {
	h := held(t)
	for _, c := range effects {
		t.Run(c.name, func(t *testing.T) {
			sc, err := ForEffect(h, c.built)
			if err != nil {
				t.Fatal(err)
			}
			if sc.Own() != c.own {
				t.Errorf("an automaton of its own: %v, want %v", sc.Own(), c.own)
			}
			var all [][]byte
			for _, v := range []string{value, plain, other} {
				all = append(all, scrub.Forms([]byte(v))...)
			}
			for _, bs := range c.built {
				for _, b := range bs {
					if len(b) >= scrub.MinLen {
						all = append(all, scrub.Forms(b)...)
					}
				}
			}
			folded := sc.Folded()
			for _, f := range all {
				for _, text := range [][]byte{f, []byte("<a " + string(f) + " b>"), []byte("x" + string(f) + string(f) + "y")} {
					whole := sc.Bytes(text)
					if k := holds(whole, all); k != nil {
						t.Fatalf("Bytes left a form whole: %q in %q", k, whole)
					}
					for _, n := range []int{1, 3, 7, 64} {
						if got := stream(sc, text, n); !bytes.Equal(got, whole) {
							t.Fatalf("a stream in chunks of %d gave %q, Bytes %q", n, got, whole)
						}
					}
					if up := folded.Bytes(upperASCII(text)); holds(lowerASCII(up), lowerAll(all)) != nil {
						t.Fatalf("Folded left a form whole in %q", up)
					}
					for _, n := range []int{0, len(text) / 2, len(whole) - 1} {
						cut, _ := sc.Bound(text, n)
						if len(cut) > max(n, 0) || !bytes.HasPrefix(whole, cut) || splitsLabel(cut) {
							t.Fatalf("Bound(%d) = %q of %q", n, cut, whole)
						}
					}
				}
			}
		})
	}
}

func stream(sc *Scrubber, p []byte, n int) []byte {
	st := sc.NewStream()
	var out []byte
	for len(p) > 0 {
		k := min(n, len(p))
		out = st.Write(out, p[:k])
		p = p[k:]
	}
	return st.Flush(out)
}

func holds(text []byte, forms [][]byte) []byte {
	for _, f := range forms {
		if bytes.Contains(text, f) {
			return f
		}
	}
	return nil
}

func lowerAll(forms [][]byte) [][]byte {
	out := make([][]byte, len(forms))
	for i, f := range forms {
		out[i] = lowerASCII(f)
	}
	return out
}

// upperASCII and lowerASCII change ASCII letters only, as Folded folds.
func upperASCII(b []byte) []byte { return bytes.Map(asciiCase('a', 'z', 'A'-'a'), b) }
func lowerASCII(b []byte) []byte { return bytes.Map(asciiCase('A', 'Z', 'a'-'A'), b) }

func asciiCase(from, to rune, d rune) func(rune) rune {
	return func(r rune) rune {
		if r >= from && r <= to {
			return r + d
		}
		return r
	}
}

func splitsLabel(b []byte) bool {
	i := bytes.LastIndex(b, []byte("[secret:"))
	return i >= 0 && bytes.IndexByte(b[i:], ']') < 0
}

// TestForEffectRefusesALabelHoldingAForm: a held secret's label that holds
// a form of a string the effect built (in any case) fails the effect's
// scrubber, as one scrubber over the union fails, and the error names no
// value.
func TestForEffectRefusesALabelHoldingAForm(t *testing.T) {
	h := held(t)
	built := map[string][][]byte{"V": {[]byte("ECRET:OT")}}
	if _, err := scrub.New([]scrub.Secret{{Name: "OTHER", Value: []byte(other)}, {Name: "V", Value: []byte(value), Built: built["V"]}}); err == nil {
		t.Fatal("the union accepted it: the case is not the one meant")
	}
	_, err := ForEffect(h, built)
	if err == nil {
		t.Fatal("accepted")
	}
	if strings.Contains(err.Error(), value) || strings.Contains(strings.ToUpper(err.Error()), "ECRET:OT") {
		t.Errorf("the error holds a value: %v", err)
	}
}

// TestHeldOnlyIsTheHeldScrubber: an effect that built nothing scrubs as
// the held scrubber does, byte for byte, Bound included.
func TestHeldOnlyIsTheHeldScrubber(t *testing.T) {
	h := held(t)
	sc, err := ForEffect(h, nil)
	if err != nil || sc.Own() {
		t.Fatalf("%v %v", err, sc.Own())
	}
	text := []byte("a " + value + " b " + other + " é")
	if !bytes.Equal(sc.Bytes(text), h.Bytes(text)) || sc.String(string(text)) != h.String(string(text)) {
		t.Error("Bytes differ")
	}
	for n := 0; n < len(text); n++ {
		a, ca := sc.Bound(text, n)
		b, cb := h.Bound(text, n)
		if !bytes.Equal(a, b) || ca != cb {
			t.Errorf("Bound(%d): %q %v, want %q %v", n, a, ca, b, cb)
		}
	}
}

func TestCut(t *testing.T) {
	for _, c := range []struct {
		in   string
		max  int
		want string
	}{
		{"aü", 2, "a"}, {"aü", 3, "aü"}, {"ab[secret:X]", 6, "ab"}, {"ab[secret:X]", 12, "ab[secret:X]"}, {"[secret:X] [s", 13, "[secret:X] [s"}, {"a€", 3, "a"}, {"a€b", 4, "a€"}, {"a😀", 4, "a"}, {"a😀", 5, "a😀"}, {"abc", 2, "ab"},
	} {
		if got := string(Cut([]byte(c.in), c.max)); got != c.want {
			t.Errorf("Cut(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
	}
}

// FuzzEffectScrubber: whatever an upstream answers, an effect's stream in
// any chunking gives what Bytes gives, and no form of a held value or of
// what the effect built (basic auth, a url with the value escaped) is left
// whole.
func FuzzEffectScrubber(f *testing.F) {
	h := held(f)
	built := map[string][][]byte{"V": append(pathOf(value), []byte("Basic "+base64.StdEncoding.EncodeToString([]byte("deploy:"+value))))}
	sc, err := ForEffect(h, built)
	if err != nil {
		f.Fatal(err)
	}
	var all [][]byte
	for _, v := range [][]byte{[]byte(value), []byte(other)} {
		all = append(all, scrub.Forms(v)...)
	}
	for _, b := range built["V"] {
		all = append(all, scrub.Forms(b)...)
	}
	for _, s := range all[:8] {
		f.Add(append([]byte("x "), s...), uint8(3))
	}
	f.Add([]byte(url.PathEscape(string(pathOf(value)[2]))), uint8(1))
	f.Fuzz(func(t *testing.T, text []byte, chunk uint8) {
		whole := sc.Bytes(text)
		if got := stream(sc, text, int(chunk)+1); !bytes.Equal(got, whole) {
			t.Fatalf("stream %q, Bytes %q", got, whole)
		}
		if k := holds(whole, all); k != nil && bytes.Contains(text, k) && !bytes.ContainsAny(k, "[]") {
			t.Fatalf("a form left whole: %q", k)
		}
	})
}
