package scrub

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"unicode/utf8"
)

// Forms returns every form of v that a Scrubber replaces, deduplicated, in
// a fixed order: v itself first. Empty strings are never forms. The result
// is the caller's to keep; v is not retained or modified.
//
// A Secret's Value and each of its Built strings of at least MinLen bytes
// are expanded by Forms into patterns. A string V is read as its bytes and,
// when it is not valid UTF-8, also as the text a decoder makes of it
// (U+FFFD for each invalid byte, as Go does, and for each maximal invalid
// subpart, as WHATWG TextDecoder and Python do). The forms of each reading:
//
//   - V itself;
//   - base64 in the standard and URL alphabets, padded and not, of V alone,
//     and the three shifted forms in each alphabet: the characters that
//     carry only V's bits when a server encodes a longer string with V at
//     byte offset 0, 1 or 2 of a 3-byte group (base64Forms has the
//     arithmetic; a character that mixes in a neighbour's bits is left out);
//   - percent-encoding in each set of the form table percentSpellings
//     (RFC 3986 unreserved only, Python quote, encodeURIComponent,
//     encodeURI, an RFC 3986 path segment, Go's PathEscape and
//     EscapedPath, the WHATWG and Java form encoding, PHP urlencode, .NET
//     UrlEncode), each with a space written "%20" and written "+" (Go's
//     QueryEscape, Python quote_plus with either safe set, jQuery's $.param
//     and every form encoder), each with upper- and lower-case hex, and the
//     same spellings of each base64 form (a base64 token carried in a url).
//     docs/scrub.md lists the table, and a test keeps it equal to the code;
//   - hex, lower and upper case, and the same with a space between bytes
//     ("de ad be ef", as S3 spells the canonical request it echoes in
//     <CanonicalRequestBytes>);
//   - the JSON string spellings of each of the above: "/" as "\/" or not,
//     "<" ">" "&" as "\u003c" "\u003e" "\u0026" or not, non-ASCII as "\uXXXX"
//     (UTF-16, surrogate pairs beyond the BMP) or raw, DEL as "\u007f" or
//     raw, "\b" "\f" or "\u0008" "\u000c", "\n" "\r" "\t" or "\u000a"
//     "\u000d" "\u0009", U+2028 and U+2029 escaped or raw, "\u" hex in
//     either case; a byte that is not UTF-8 as "\ufffd", as Go writes it.
//
// Not covered: a hash, a truncation or a partial echo of a value; one
// percent string mixing upper- and lower-case hex, or mixing spellings;
// base64 with line breaks (MIME); any encoding, or nesting of encodings,
// not listed above; and a Built string shorter than MinLen.
func Forms(v []byte) [][]byte {
	var fs formSet
	fs.addValue(v)
	return fs.out
}

// secretForms are the forms of a secret's value and of each Built string
// at least MinLen long, each once.
func secretForms(sec Secret) [][]byte {
	var fs formSet
	fs.addValue(sec.Value)
	for _, b := range sec.Built {
		if len(b) >= MinLen {
			fs.addValue(b)
		}
	}
	return fs.out
}

// formSet collects forms in order, each once.
type formSet struct {
	seen map[string]struct{}
	out  [][]byte
}

func (fs *formSet) add(b []byte) {
	if len(b) == 0 {
		return
	}
	if fs.seen == nil {
		fs.seen = make(map[string]struct{})
	}
	if _, ok := fs.seen[string(b)]; ok {
		return
	}
	fs.seen[string(b)] = struct{}{}
	fs.out = append(fs.out, b)
}

// addValue adds every form of v: for each reading of v (texts), the text,
// its base64 spellings, its percent spellings, its hex (plain and with a
// space between bytes), the percent
// spellings of each base64 spelling, and then the JSON spellings of every
// form gathered so far.
func (fs *formSet) addValue(v []byte) {
	start := len(fs.out)
	for _, t := range texts(v) {
		fs.add(t)
		b64 := base64Forms(t)
		for _, b := range b64 {
			fs.add(b)
		}
		fs.addPercent(t)
		fs.add([]byte(hex.EncodeToString(t)))
		fs.add(upperHex([]byte(hex.EncodeToString(t))))
		fs.add(spacedHex(t))
		fs.add(upperHex(spacedHex(t)))
		for _, b := range b64 {
			fs.addPercent(b)
		}
	}
	// A server that echoes any of these inside a JSON document escapes it
	// once more in its own encoder's spelling (PHP writes "/" as "\/").
	gathered := fs.out[start:]
	for _, f := range gathered {
		for _, j := range jsonForms(f) {
			fs.add(j)
		}
	}
}

// addPercent adds every percent spelling of t: each set of the form table,
// upper- and lower-case hex, a space as "%20" and as "+".
func (fs *formSet) addPercent(t []byte) {
	for _, sp := range percentSpellings {
		for _, upper := range []bool{true, false} {
			for _, plus := range []bool{false, true} {
				fs.add(sp.encode(t, upper, plus))
			}
		}
	}
}

// texts are the readings of v an encoder may start from: v's bytes, and,
// when v is not valid UTF-8, the text a decoder makes of it by writing
// U+FFFD for each invalid byte (Go) or for each maximal invalid subpart
// (WHATWG TextDecoder, Python's errors="replace").
func texts(v []byte) [][]byte {
	// A copy: the forms keep their bytes, and v stays the caller's.
	out := [][]byte{bytes.Clone(v)}
	if utf8.Valid(v) {
		return out
	}
	perByte := replaceInvalid(v, false)
	out = append(out, perByte)
	if maximal := replaceInvalid(v, true); string(maximal) != string(perByte) {
		out = append(out, maximal)
	}
	return out
}

// replaceInvalid writes U+FFFD in place of invalid UTF-8: one per byte, or
// one per maximal subpart of an ill-formed sequence (Unicode 15, 3.9 "U+FFFD
// Substitution of Maximal Subparts").
func replaceInvalid(v []byte, maximal bool) []byte {
	out := make([]byte, 0, len(v)+8)
	for i := 0; i < len(v); {
		r, size := utf8.DecodeRune(v[i:])
		if r != utf8.RuneError || size > 1 {
			out = append(out, v[i:i+size]...)
			i += size
			continue
		}
		out = utf8.AppendRune(out, utf8.RuneError)
		if maximal {
			i += maximalSubpart(v[i:])
		} else {
			i++
		}
	}
	return out
}

// maximalSubpart is the length of the longest prefix of p (p[0] starts an
// ill-formed sequence) that is a prefix of some well-formed sequence, at
// least 1.
func maximalSubpart(p []byte) int {
	lo, hi := byte(0x80), byte(0xBF)
	var n int
	switch c := p[0]; {
	case c >= 0xC2 && c <= 0xDF:
		n = 2
	case c == 0xE0:
		n, lo = 3, 0xA0
	case c == 0xED:
		n, hi = 3, 0x9F
	case c >= 0xE1 && c <= 0xEF:
		n = 3
	case c == 0xF0:
		n, lo = 4, 0x90
	case c == 0xF4:
		n, hi = 4, 0x8F
	case c >= 0xF1 && c <= 0xF3:
		n = 4
	default:
		return 1
	}
	k := 1
	for ; k < n && k < len(p); k++ {
		if p[k] < lo || p[k] > hi {
			break
		}
		lo, hi = 0x80, 0xBF
	}
	return k
}

// base64Forms are the base64 spellings of t: standard and URL alphabets,
// padded and not, of t alone; and the three shifted forms in each alphabet.
//
// A server that base64-encodes a longer string holding t puts t at byte
// offset k (0, 1 or 2) of a 3-byte group. Its bits then run from bit 8k to
// bit 8k+8n of the encoding (n = len(t)), and output character j covers bits
// 6j to 6j+6. The characters that carry only t's bits are those with
// 6j >= 8k and 6j+6 <= 8k+8n: j from ceil(8k/6) to floor((8k+8n)/6)-1. A
// character that mixes a bit of a neighbouring byte is not part of the form,
// so the form is the same whatever the neighbours are.
func base64Forms(t []byte) [][]byte {
	var out [][]byte
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		out = append(out, []byte(enc.EncodeToString(t)))
	}
	n := len(t)
	for k := 0; k < 3; k++ {
		x := make([]byte, k+n+2) // k leading and 2 trailing zero bytes: any bytes would do
		copy(x[k:], t)
		from, to := (8*k+5)/6, (8*(k+n))/6
		for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
			out = append(out, []byte(enc.EncodeToString(x)[from:to]))
		}
	}
	return out
}

// percentSpelling is one set of bytes a percent-encoder leaves as they are
// (beside ALPHA and DIGIT, which every one leaves). Every other byte
// becomes "%XX" of the byte (UTF-8 for text), and a space is written
// either "%20" or "+": each set is a form in both, since an encoder of
// either kind is common for most sets (a form encoder writes "+"; jQuery's
// $.param writes encodeURIComponent's output with "+"; Java code often
// turns URLEncoder's "+" into "%20"). For a value with no space the two
// are the same form, kept once.
type percentSpelling struct {
	keep string // the bytes left as they are, beside ALPHA and DIGIT
	pct  string // the encoders that write this set with "%20" for space
	plus string // the encoders that write it with "+" ("" = none known; still a form)
	set  [256]bool
}

// percentSpellings is the form table: every set whose output is a form,
// each with "%20" and with "+" for space, and each with upper- and
// lower-case hex. docs/scrub.md lists it; a test keeps the two equal.
var percentSpellings = func() []*percentSpelling {
	ps := []*percentSpelling{
		{keep: "-._~", pct: "RFC 3986 unreserved: PHP rawurlencode, Python quote(safe='')", plus: "Go url.QueryEscape, Python quote_plus(safe='')"},
		{keep: "-._~/", pct: "Python quote (safe='/')", plus: "Python quote_plus(safe='/')"},
		{keep: "-._~!*'()", pct: "JavaScript encodeURIComponent", plus: "jQuery $.param, encodeURIComponent with %20 written +"},
		{keep: "-._~!*'();/?:@&=+$,#", pct: "JavaScript encodeURI", plus: "encodeURI with %20 written +"},
		{keep: "-._~!$&'()*+,;=:@", pct: "RFC 3986 path segment (pchar)", plus: "a path segment with space as +"},
		{keep: "-._~$&+:=@", pct: "Go url.PathEscape", plus: "url.PathEscape with %20 written +"},
		{keep: "-._~$&+,/:;=@", pct: "Go url.URL.EscapedPath", plus: "EscapedPath with %20 written +"},
		{keep: "-._*", pct: "Java URLEncoder with + written %20", plus: "WHATWG urlencoded (URLSearchParams), Java URLEncoder"},
		{keep: "-._", pct: "PHP urlencode with + written %20", plus: "PHP urlencode, Python 2 quote_plus"},
		{keep: "-._!*()", pct: ".NET UrlEncode with + written %20", plus: ".NET HttpUtility.UrlEncode"},
	}
	for _, p := range ps {
		for c := '0'; c <= '9'; c++ {
			p.set[c] = true
		}
		for c := 'A'; c <= 'Z'; c++ {
			p.set[c] = true
			p.set[c+'a'-'A'] = true
		}
		for i := 0; i < len(p.keep); i++ {
			p.set[p.keep[i]] = true
		}
	}
	return ps
}()

const hexUpper, hexLower = "0123456789ABCDEF", "0123456789abcdef"

// encode writes t in this spelling: hex in upper or lower case, a space as
// "+" when plus is set (a "+" of t stays "+" in a set that keeps it).
func (p *percentSpelling) encode(t []byte, upper, plus bool) []byte {
	digits := hexLower
	if upper {
		digits = hexUpper
	}
	// Sized exactly, and t itself when nothing in it is escaped: a value
	// is spelled in over a hundred of these sets and most spell a token
	// as it is, so a buffer of 3×len(t) each was most of what building an
	// engine for a long token allocated.
	n := len(t)
	for _, c := range t {
		if !p.set[c] && !(c == ' ' && plus) {
			n += 2
		}
	}
	if n == len(t) && !(plus && bytes.IndexByte(t, ' ') >= 0) {
		return t
	}
	out := make([]byte, 0, n)
	for _, c := range t {
		switch {
		case p.set[c]:
			out = append(out, c)
		case c == ' ' && plus:
			out = append(out, '+')
		default:
			out = append(out, '%', digits[c>>4], digits[c&15])
		}
	}
	return out
}

// spacedHex is the lower-case hex of t with a space between bytes.
func spacedHex(t []byte) []byte {
	if len(t) == 0 {
		return nil
	}
	out := make([]byte, 0, 3*len(t)-1)
	for i, c := range t {
		if i > 0 {
			out = append(out, ' ')
		}
		out = append(out, hexDigits[c>>4], hexDigits[c&15])
	}
	return out
}

const hexDigits = "0123456789abcdef"

func upperHex(b []byte) []byte {
	for i, c := range b {
		if c >= 'a' && c <= 'f' {
			b[i] = c - 'a' + 'A'
		}
	}
	return b
}

// jsonStyle is one JSON encoder's spelling of a string's content. The zero
// value writes "/" and "<>&" as they are, non-ASCII raw, "\b" "\f" "\n" "\r"
// "\t" as "\u00XX", and lower-case hex; each field turns one choice.
type jsonStyle struct {
	slash     bool // "/" as "\/" (PHP)
	html      bool // "<" ">" "&" as "\u003c" "\u003e" "\u0026" (Go)
	ascii     bool // non-ASCII as "\uXXXX", UTF-16 (Python, PHP)
	del       bool // DEL as "\u007f" (Python's ensure_ascii)
	shortBF   bool // "\b" "\f" rather than "\u0008" "\u000c"
	shortCtrl bool // "\n" "\r" "\t" rather than "\u000a" "\u000d" "\u0009"
	lineSep   bool // U+2028 U+2029 as "\u2028" "\u2029" when non-ASCII is raw (Go)
	upper     bool // "\u" hex in upper case (Java encoders)
}

// jsonForms are the JSON spellings of t, the content between the quotes,
// one per combination of the jsonStyle choices that t's bytes make matter.
// A byte that is not valid UTF-8 is written "\ufffd", as Go does; the
// readings in texts cover the encoders that decode first.
func jsonForms(t []byte) [][]byte {
	var has struct{ slash, html, nonASCII, del, bf, ctrl, ls, esc bool }
	for i := 0; i < len(t); {
		r, size := utf8.DecodeRune(t[i:])
		i += size
		switch {
		case r == '/':
			has.slash = true
		case r == '<' || r == '>' || r == '&':
			has.html, has.esc = true, true
		case r == '\b' || r == '\f':
			has.bf, has.esc = true, true
		case r == '\n' || r == '\r' || r == '\t':
			has.ctrl, has.esc = true, true
		case r < 0x20:
			has.esc = true
		case r == 0x7f:
			has.del, has.esc = true, true
		case r == utf8.RuneError && size == 1:
			has.esc = true
		case r >= 0x80:
			has.nonASCII, has.esc = true, true
			if r == 0x2028 || r == 0x2029 {
				has.ls = true
			}
		}
	}
	// Each choice t's bytes make matter doubles the spellings; the others
	// stay at their zero value.
	var dims []func(*jsonStyle)
	if has.slash {
		dims = append(dims, func(s *jsonStyle) { s.slash = true })
	}
	if has.html {
		dims = append(dims, func(s *jsonStyle) { s.html = true })
	}
	if has.nonASCII {
		dims = append(dims, func(s *jsonStyle) { s.ascii = true })
	}
	if has.del {
		dims = append(dims, func(s *jsonStyle) { s.del = true })
	}
	if has.bf {
		dims = append(dims, func(s *jsonStyle) { s.shortBF = true })
	}
	if has.ctrl {
		dims = append(dims, func(s *jsonStyle) { s.shortCtrl = true })
	}
	if has.ls {
		dims = append(dims, func(s *jsonStyle) { s.lineSep = true })
	}
	if has.esc {
		dims = append(dims, func(s *jsonStyle) { s.upper = true })
	}
	out := make([][]byte, 0, 1<<len(dims))
	for m := 0; m < 1<<len(dims); m++ {
		var s jsonStyle
		for i, set := range dims {
			if m&(1<<i) != 0 {
				set(&s)
			}
		}
		out = append(out, s.encode(t))
	}
	return out
}

func (s jsonStyle) encode(t []byte) []byte {
	digits := hexLower
	if s.upper {
		digits = hexUpper
	}
	u := func(out []byte, r rune) []byte {
		return append(out, '\\', 'u', digits[r>>12&15], digits[r>>8&15], digits[r>>4&15], digits[r&15])
	}
	out := make([]byte, 0, len(t)+len(t)/4)
	for i := 0; i < len(t); {
		r, size := utf8.DecodeRune(t[i:])
		c := t[i]
		i += size
		switch {
		case r == utf8.RuneError && size == 1:
			out = u(out, utf8.RuneError)
		case r == '"' || r == '\\':
			out = append(out, '\\', c)
		case r == '/' && s.slash:
			out = append(out, '\\', '/')
		case (r == '<' || r == '>' || r == '&') && s.html:
			out = u(out, r)
		case r == '\b' && s.shortBF:
			out = append(out, '\\', 'b')
		case r == '\f' && s.shortBF:
			out = append(out, '\\', 'f')
		case r == '\n' && s.shortCtrl:
			out = append(out, '\\', 'n')
		case r == '\r' && s.shortCtrl:
			out = append(out, '\\', 'r')
		case r == '\t' && s.shortCtrl:
			out = append(out, '\\', 't')
		case r < 0x20 || (r == 0x7f && s.del):
			out = u(out, r)
		case r >= 0x80 && s.ascii:
			if r >= 0x10000 {
				r -= 0x10000
				out = u(out, 0xD800+(r>>10))
				out = u(out, 0xDC00+(r&0x3FF))
			} else {
				out = u(out, r)
			}
		case (r == 0x2028 || r == 0x2029) && s.lineSep:
			out = u(out, r)
		default:
			out = append(out, t[i-size:i]...)
		}
	}
	return out
}
