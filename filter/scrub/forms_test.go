package scrub

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func goJSON(v []byte) string {
	b, err := json.Marshal(string(v))
	if err != nil {
		panic(err)
	}
	return string(b[1 : len(b)-1])
}

func goJSONNoHTML(v []byte) string {
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	if err := e.Encode(string(v)); err != nil {
		panic(err)
	}
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	return string(b[1 : len(b)-1])
}

// valSpace holds spaces and every character some percent set keeps: its
// spellings with "%20" and with "+" differ in every set of the table.
var valSpace = []byte("it's a (x)*y! /p?q:r@s&t=u+v$w,z#~")

// plusForSpace is what a form encoder, or jQuery's $.param after
// encodeURIComponent, does to a "%20" encoder's output.
func plusForSpace(s string) string { return strings.ReplaceAll(s, "%20", "+") }

// realEncoders are Go's own encoders; each output must be a form.
var realEncoders = []struct {
	name string
	enc  func([]byte) string
}{
	{"base64 std", base64.StdEncoding.EncodeToString},
	{"base64 raw std", base64.RawStdEncoding.EncodeToString},
	{"base64 url", base64.URLEncoding.EncodeToString},
	{"base64 raw url", base64.RawURLEncoding.EncodeToString},
	{"hex", hex.EncodeToString},
	{"HEX", func(v []byte) string { return strings.ToUpper(hex.EncodeToString(v)) }},
	{"hex, a space between bytes (S3's <CanonicalRequestBytes>)", func(v []byte) string { return fmt.Sprintf("% x", v) }},
	{"HEX, a space between bytes", func(v []byte) string { return fmt.Sprintf("% X", v) }},
	{"url.QueryEscape", func(v []byte) string { return url.QueryEscape(string(v)) }},
	{"url.PathEscape", func(v []byte) string { return url.PathEscape(string(v)) }},
	{"url.URL.EscapedPath", func(v []byte) string { return (&url.URL{Path: string(v)}).EscapedPath() }},
	{"url.PathEscape, + for space", func(v []byte) string { return plusForSpace(url.PathEscape(string(v))) }},
	{"url.URL.EscapedPath, + for space", func(v []byte) string { return plusForSpace((&url.URL{Path: string(v)}).EscapedPath()) }},
	{"url.QueryEscape, %20 for space", func(v []byte) string { return strings.ReplaceAll(url.QueryEscape(string(v)), "+", "%20") }},
	{"json.Marshal", goJSON},
	{"json.Encoder SetEscapeHTML(false)", goJSONNoHTML},
	{"base64 std of json.Marshal", func(v []byte) string { return base64.StdEncoding.EncodeToString([]byte(goJSON(v))) }},
}

// handEncoded are other encoders' outputs, written by hand from each
// encoder's documented character set (and checked once against Python
// 3.11, Node 20, PHP and Jackson where marked).
var handEncoded = []struct {
	encoder string
	value   []byte
	out     string
}{
	// JavaScript encodeURIComponent: keeps A-Z a-z 0-9 - _ . ! ~ * ' ( ).
	{"encodeURIComponent", valASCII, `a%2Fb%2Bc%3Dd%3Fe%26f%3Cg%3Eh%22i%5Cj%25k%20l`},
	{"encodeURIComponent", valUni, `p%C3%A4ssw%C3%B6rd%E2%82%AC%F0%9F%98%80-x`},
	{"encodeURIComponent", valCtl, `line1%0Aline2%09end%0D%0A%1B!`},
	// After a TextDecoder (maximal subparts → U+FFFD).
	{"encodeURIComponent(TextDecoder)", valBad, `abc%EF%BF%BDdef%EF%BF%BDghi`},
	// JavaScript encodeURI: also keeps ; / ? : @ & = + $ , #.
	{"encodeURI", valASCII, `a/b+c=d?e&f%3Cg%3Eh%22i%5Cj%25k%20l`},
	// URLSearchParams: keeps * - . _, space as +.
	{"URLSearchParams", valASCII, `a%2Fb%2Bc%3Dd%3Fe%26f%3Cg%3Eh%22i%5Cj%25k+l`},
	{"URLSearchParams", valCtl, `line1%0Aline2%09end%0D%0A%1B%21`},
	// Python urllib.parse.quote: unreserved and "/" kept.
	{"quote", valASCII, `a/b%2Bc%3Dd%3Fe%26f%3Cg%3Eh%22i%5Cj%25k%20l`},
	{"quote(safe='')", valASCII, `a%2Fb%2Bc%3Dd%3Fe%26f%3Cg%3Eh%22i%5Cj%25k%20l`},
	{"quote_plus", valASCII, `a%2Fb%2Bc%3Dd%3Fe%26f%3Cg%3Eh%22i%5Cj%25k+l`},
	{"quote(bytes)", valBad, `abc%FFdef%E2%82ghi`},
	// .NET HttpUtility.UrlEncode: lower-case hex, space as +.
	{"HttpUtility.UrlEncode", valUni, `p%c3%a4ssw%c3%b6rd%e2%82%ac%f0%9f%98%80-x`},
	{"HttpUtility.UrlEncode", valASCII, `a%2fb%2bc%3dd%3fe%26f%3cg%3eh%22i%5cj%25k+l`},
	// Python json.dumps (ensure_ascii): \uXXXX with UTF-16 pairs, \b \f, DEL escaped.
	{"json.dumps", valUni, `p\u00e4ssw\u00f6rd\u20ac\ud83d\ude00-x`},
	{"json.dumps", valCtl, `line1\nline2\tend\r\n\u001b!`},
	{"json.dumps", valSep, `sep\u2028par\u2029\b\f\u007fend`},
	{"json.dumps(errors=replace)", valBad, `abc\ufffddef\ufffdghi`},
	// Python json.dumps(ensure_ascii=False), JSON.stringify: raw non-ASCII and U+2028.
	{"JSON.stringify", valSep, "sep\u2028par\u2029\\b\\f\x7fend"},
	{"JSON.stringify", valUni, "pässwörd€😀-x"},
	{"JSON.stringify(TextDecoder)", valBad, "abc\ufffddef\ufffdghi"},
	// PHP json_encode: "/" as "\/", non-ASCII as \uXXXX.
	{"json_encode", valASCII, `a\/b+c=d?e&f<g>h\"i\\j%k l`},
	{"json_encode", valUni, `p\u00e4ssw\u00f6rd\u20ac\ud83d\ude00-x`},
	// Jackson: upper-case \u hex for control characters.
	{"Jackson", valCtl, `line1\nline2\tend\r\n\u001B!`},
	// Older Go (before 1.22): \u0008 and \u000c for \b and \f.
	{"Go 1.21 json", valSep, `sep\u2028par\u2029\u0008\u000c` + "\x7fend"},
	// The "+"-for-space spellings of the "%20" sets (checked against Node 20
	// and Python 3.11), and the "%20" spelling of Java's form encoder.
	{"jQuery $.param (encodeURIComponent, + for space)", valSpace, `it's+a+(x)*y!+%2Fp%3Fq%3Ar%40s%26t%3Du%2Bv%24w%2Cz%23~`},
	{"encodeURI, + for space", valSpace, `it's+a+(x)*y!+/p?q:r@s&t=u+v$w,z#~`},
	{"quote_plus(safe='/')", valSpace, `it%27s+a+%28x%29%2Ay%21+/p%3Fq%3Ar%40s%26t%3Du%2Bv%24w%2Cz%23~`},
	{"quote_plus(safe='')", valSpace, `it%27s+a+%28x%29%2Ay%21+%2Fp%3Fq%3Ar%40s%26t%3Du%2Bv%24w%2Cz%23~`},
	{"path segment, + for space", valSpace, `it's+a+(x)*y!+%2Fp%3Fq:r@s&t=u+v$w,z%23~`},
	{"URLSearchParams", valSpace, `it%27s+a+%28x%29*y%21+%2Fp%3Fq%3Ar%40s%26t%3Du%2Bv%24w%2Cz%23%7E`},
	{"URLEncoder, + written %20", valSpace, `it%27s%20a%20%28x%29*y%21%20%2Fp%3Fq%3Ar%40s%26t%3Du%2Bv%24w%2Cz%23%7E`},
	{"encodeURIComponent", valSpace, `it's%20a%20(x)*y!%20%2Fp%3Fq%3Ar%40s%26t%3Du%2Bv%24w%2Cz%23~`},
	{"HttpUtility.UrlEncode", valSpace, `it%27s+a+(x)*y!+%2fp%3fq%3ar%40s%26t%3du%2bv%24w%2cz%23%7e`},
	// A base64 token echoed by PHP json_encode.
	{"json_encode(base64)", []byte("??>>??>>"), `Pz8+Pj8\/Pj4=`},
}

func TestFormsHoldEveryEncoderOutput(t *testing.T) {
	type tc struct {
		name  string
		value []byte
		enc   string
	}
	var cases []tc
	for _, v := range [][]byte{valTok, valASCII, valUni, valCtl, valBad, valSep, valSpace} {
		for _, e := range realEncoders {
			if e.name == "base64 std of json.Marshal" {
				continue // a nested encoding that is not a form
			}
			cases = append(cases, tc{fmt.Sprintf("%s/%q", e.name, v), v, e.enc(v)})
		}
	}
	for _, h := range handEncoded {
		cases = append(cases, tc{fmt.Sprintf("%s/%q", h.encoder, h.value), h.value, h.out})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !containsForm(Forms(c.value), []byte(c.enc)) {
				t.Fatalf("%q is not among the forms of %q", c.enc, c.value)
			}
			s := mustNew(t, []Secret{{Name: "x", Value: c.value}})
			for _, wrap := range [][2]string{{"", ""}, {"before ", " after"}, {`{"echo":"`, `"}`}, {"\x00\xff", "\n\n"}} {
				in := wrap[0] + c.enc + wrap[1]
				want := wrap[0] + "[secret:x]" + wrap[1]
				if got := s.String(in); got != want {
					t.Errorf("String(%q) = %q, want %q", in, got, want)
				}
			}
		})
	}
}

// A nested encoding the forms do not list passes: the claim is exact, not
// a guess.
func TestFormsDoNotCoverNestedBase64OfJSON(t *testing.T) {
	s := mustNew(t, []Secret{{Name: "x", Value: valASCII}})
	in := base64.StdEncoding.EncodeToString([]byte(goJSON(valASCII)))
	if got := s.String(in); got != in {
		t.Fatalf("String(%q) = %q: a form Forms' doc does not list was matched", in, got)
	}
}

func containsForm(forms [][]byte, f []byte) bool {
	for _, g := range forms {
		if bytes.Equal(g, f) {
			return true
		}
	}
	return false
}

func TestFormsAreDistinctAndLongEnough(t *testing.T) {
	for _, v := range [][]byte{valTok, valASCII, valUni, valCtl, valBad, valSep, []byte("12345678")} {
		forms := Forms(v)
		if !bytes.Equal(forms[0], v) {
			t.Errorf("Forms(%q)[0] = %q, want the value itself", v, forms[0])
		}
		seen := map[string]bool{}
		for _, f := range forms {
			if seen[string(f)] {
				t.Errorf("Forms(%q) holds %q twice", v, f)
			}
			seen[string(f)] = true
			if len(f) < MinLen {
				t.Errorf("Forms(%q) holds %q, shorter than MinLen", v, f)
			}
		}
	}
}

// TestShiftedBase64 encodes prefix+V+suffix for every prefix length 0..5
// and random suffixes, in both alphabets: the scrub leaves exactly the
// characters that mix V's bits with a neighbour's, and nothing of V's own.
func TestShiftedBase64(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, v := range [][]byte{valTok, valASCII, valUni, []byte("12345678"), []byte("123456789"), []byte("1234567890")} {
		s := mustNew(t, []Secret{{Name: "x", Value: v}})
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
			for p := 0; p <= 5; p++ {
				for trial := 0; trial < 20; trial++ {
					prefix := make([]byte, p)
					suffix := make([]byte, r.IntN(5))
					for i := range prefix {
						prefix[i] = byte(r.IntN(256))
					}
					for i := range suffix {
						suffix[i] = byte(r.IntN(256))
					}
					x := append(append(append([]byte{}, prefix...), v...), suffix...)
					e := enc.EncodeToString(x)
					from := (8*p + 5) / 6        // first character with only V's bits
					to := (8 * (p + len(v))) / 6 // one past the last
					got := s.String(e)
					i := strings.Index(got, "[secret:x]")
					if i < 0 {
						t.Fatalf("%q (prefix %d, suffix %d) not scrubbed: %q", e, p, len(suffix), got)
					}
					if got[:i] != e[:from] {
						t.Fatalf("%q: kept %q before the label, want %q", e, got[:i], e[:from])
					}
					rest := got[i+len("[secret:x]"):]
					// The match may run one character past `to` only when that
					// character (or "=" padding) equals the encoding of V alone:
					// then it is the unpadded or padded form itself.
					end := len(e) - len(rest)
					if end < to || e[end:] != rest {
						t.Fatalf("%q: kept %q after the label; V's bits end at character %d", e, rest, to)
					}
					// Only at offset 0 is there a longer form (V alone, padded or
					// not), and then the extra characters are that form's.
					if end > to && (p%3 != 0 || !strings.HasPrefix(enc.EncodeToString(v), e[from:end])) {
						t.Fatalf("%q: the match runs to %d, past V's bits (%d), and is no form", e, end, to)
					}
					if strings.Count(got, "[secret:x]") != 1 {
						t.Fatalf("%q: %q holds more than one label", e, got)
					}
				}
			}
		}
	}
}

func TestReplaceInvalidMaximalSubparts(t *testing.T) {
	// Unicode 15 table 3-8: each maximal subpart is one U+FFFD.
	in := []byte("a\xF1\x80\x80\xE1\x80\xC2b\x80c\x80\xBFd")
	want := "a\uFFFD\uFFFD\uFFFDb\uFFFDc\uFFFD\uFFFDd"
	if got := string(replaceInvalid(in, true)); got != want {
		t.Errorf("maximal: %q, want %q", got, want)
	}
	wantPerByte := "a" + strings.Repeat("\uFFFD", 6) + "b\uFFFDc\uFFFD\uFFFDd"
	if got := string(replaceInvalid(in, false)); got != wantPerByte {
		t.Errorf("per byte: %q, want %q", got, wantPerByte)
	}
	// Go's strings.ToValidUTF8 does not apply: Go's JSON writes one per byte.
	if got := goJSON(in); got != strings.ReplaceAll(wantPerByte, "\uFFFD", `\ufffd`) {
		t.Errorf("json.Marshal writes %q; the per-byte reading no longer matches Go", got)
	}
	for _, v := range [][]byte{in, valBad, []byte("\xed\xa0\x80surrogate\xf4\x90\x80\x80")} {
		if m := replaceInvalid(v, true); !utf8.Valid(m) {
			t.Errorf("maximal(%q) = %q is not valid UTF-8", v, m)
		}
	}
}

// TestFormsGolden renders the forms of a few values, so a change to the
// form set shows in review. Run with -update to rewrite.
func TestFormsGolden(t *testing.T) {
	for _, c := range []struct {
		name  string
		value []byte
	}{
		{"token", valTok},
		{"ascii", valASCII},
		{"unicode", valUni},
		{"control", valCtl},
		{"invalid-utf8", valBad},
		{"separators", valSep},
		{"spaces", valSpace},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b strings.Builder
			fmt.Fprintf(&b, "# Forms(%q): %d forms, one per line, Go-quoted\n", c.value, len(Forms(c.value)))
			for _, f := range Forms(c.value) {
				fmt.Fprintf(&b, "%q\n", f)
			}
			path := filepath.Join("testdata", "forms", c.name+".golden")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if b.String() != string(want) {
				t.Errorf("Forms(%q) changed; run go test -update and review the diff of %s", c.value, path)
			}
		})
	}
}

// TestDocsListTheFormTable: docs/scrub.md's percent table is the code's,
// row for row (kept set, the "%20" encoders, the "+" encoders), and the
// document names every other family of forms.
func TestDocsListTheFormTable(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "scrub.md"))
	if err != nil {
		t.Fatal(err)
	}
	var rows [][3]string
	for _, line := range strings.Split(string(doc), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		if len(cells) != 3 {
			t.Fatalf("docs/scrub.md: table row %q has %d cells, want 3", line, len(cells))
		}
		var row [3]string
		for i, c := range cells {
			row[i] = strings.TrimSpace(c)
		}
		row[0] = strings.TrimSuffix(strings.TrimPrefix(row[0], "`"), "`")
		rows = append(rows, row)
	}
	if len(rows) != len(percentSpellings) {
		t.Errorf("docs/scrub.md lists %d percent sets, the code %d", len(rows), len(percentSpellings))
	}
	for i, sp := range percentSpellings {
		want := [3]string{sp.keep, sp.pct, sp.plus}
		if i >= len(rows) || rows[i] != want {
			t.Errorf("docs/scrub.md percent row %d: want\n| `%s` | %s | %s |", i, want[0], want[1], want[2])
		}
	}
	for _, family := range []string{"**V itself.**", "**Base64**", "**shifted**", "**Percent-encoding**", "**Hex**", "**JSON**", "## Not covered"} {
		if !bytes.Contains(doc, []byte(family)) {
			t.Errorf("docs/scrub.md does not name %s", family)
		}
	}
}
