package efftest

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"
)

// Form is one spelling of a value: the text an echo server writes, and
// the part of it that must not reach an answer (the whole, except for a
// base64 of a longer string, where only the characters that carry the
// value's own bits are the value's).
type Form struct {
	Label string
	Echo  string
	Core  string
}

// Forms lists the spellings of v that scrub.md names. Each is made by a
// real encoder where Go has one, and by the documented character sets of
// encodeURIComponent, encodeURI and Python's quote where it does not.
func Forms(v []byte) []Form {
	var fs []Form
	add := func(label, s string) { fs = append(fs, Form{Label: label, Echo: s, Core: s}) }
	add("raw", string(v))
	for _, e := range []struct {
		name string
		enc  *base64.Encoding
	}{{"std", base64.StdEncoding}, {"std-raw", base64.RawStdEncoding}, {"url", base64.URLEncoding}, {"url-raw", base64.RawURLEncoding}} {
		add("base64-"+e.name, e.enc.EncodeToString(v))
		// Shifted: v at byte offset 1 and 2 of a 3-byte group, inside a
		// longer string.
		for off := 1; off <= 2; off++ {
			in := append(append(bytes.Repeat([]byte{'P'}, off), v...), "-tail"...)
			enc := e.enc.EncodeToString(in)
			first := (8*off + 5) / 6
			last := (8 * (off + len(v))) / 6
			fs = append(fs, Form{Label: fmt.Sprintf("base64-%s-shift%d", e.name, off), Echo: enc, Core: enc[first:last]})
		}
	}
	for _, p := range []struct {
		name string
		keep string
	}{
		{"unreserved", ""}, {"python-quote", "/"}, {"encodeURIComponent", "!'()*"}, {"encodeURI", ";,/?:@&=+$#!'()*"},
	} {
		add("percent-"+p.name, percent(v, p.keep, true))
		add("percent-"+p.name+"-lower", percent(v, p.keep, false))
	}
	add("query-escape", url.QueryEscape(string(v)))
	add("path-escape", url.PathEscape(string(v)))
	add("query-escape-lower", lowerHex(url.QueryEscape(string(v))))
	js, _ := json.Marshal(string(v))
	add("json", string(js[1:len(js)-1]))
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(string(v))
	raw := strings.TrimSuffix(b.String(), "\n")
	add("json-no-html", raw[1:len(raw)-1])
	add("json-slash", strings.ReplaceAll(string(js[1:len(js)-1]), "/", `\/`))
	add("json-ascii", jsonASCII(string(v)))
	add("hex", hex.EncodeToString(v))
	add("hex-upper", strings.ToUpper(hex.EncodeToString(v)))
	// Deduplicate by echo.
	seen := map[string]bool{}
	out := fs[:0]
	for _, f := range fs {
		if !seen[f.Echo] {
			seen[f.Echo] = true
			out = append(out, f)
		}
	}
	return out
}

// percent encodes every byte but the unreserved set and keep.
func percent(v []byte, keep string, upper bool) string {
	digits := "0123456789ABCDEF"
	if !upper {
		digits = "0123456789abcdef"
	}
	var b strings.Builder
	for _, c := range v {
		if c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte("-._~", c) >= 0 ||
			strings.IndexByte(keep, c) >= 0 {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(digits[c>>4])
		b.WriteByte(digits[c&15])
	}
	return b.String()
}

func lowerHex(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			b.WriteString(strings.ToLower(s[i : i+3]))
			i += 2
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// jsonASCII escapes as JSON with every non-ASCII rune as \uXXXX.
func jsonASCII(s string) string {
	js, _ := json.Marshal(s)
	in := string(js[1 : len(js)-1])
	var b strings.Builder
	for _, r := range in {
		if r < utf8.RuneSelf {
			b.WriteRune(r)
			continue
		}
		if r > 0xffff {
			r1, r2 := surrogates(r)
			fmt.Fprintf(&b, `\u%04x\u%04x`, r1, r2)
			continue
		}
		fmt.Fprintf(&b, `\u%04x`, r)
	}
	return b.String()
}

func surrogates(r rune) (rune, rune) {
	r -= 0x10000
	return 0xd800 + (r>>10)&0x3ff, 0xdc00 + r&0x3ff
}

// EscapeSegment is v percent-encoded with only the unreserved characters
// left, upper-case hex: how the Effector encodes a secret path segment.
func EscapeSegment(v string) string { return percent([]byte(v), "", true) }

// Base64 is the standard, padded base64 of s.
func Base64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
