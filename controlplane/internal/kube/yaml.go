package kube

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
)

// The YAML writer. An object is read into its JSON tree — the API's own
// field names and omissions, from encoding/json and the k8s.io/api tags —
// and the tree is written as block YAML, keys sorted, as sigs.k8s.io/yaml
// lays it out. It writes no YAML that names another value: every scalar
// is written plain only when it is a word no YAML 1.1 or 1.2 reader takes
// for anything but that string, as a literal block ("|") when it spans
// lines and every character of it is printable, single-quoted when it is
// printable ASCII on one line, and otherwise double-quoted with escapes;
// numbers and booleans as JSON wrote them.
// TestYAMLReadsBack and FuzzYAMLScalar hold each way to both YAML
// libraries kubectl and the API server's tooling use.
//
// It replaces sigs.k8s.io/yaml's JSON → YAML conversion, which parsed the
// object's JSON again as YAML and emitted each character of a file value
// one at a time: writing a 400-target pod's objects took 246 ms, 23 ms
// now (BenchmarkMarshal), most of it on envoy.json's one line of ~1 MB. A
// ConfigMap's or a Secret's data (the files) is taken from the typed
// object as it is, not through JSON: its strings are written once, a
// literal block copied by lines, a Secret's bytes as the base64 that
// encoding/json gives them. The one difference from the library's layout:
// no long line is folded.

// maxKey is the longest key, as written, a YAML reader takes as an
// implicit key (1024 characters: YAML 1.2, and go-yaml's simple keys).
const maxKey = 1024

// yamlOf writes v, a typed object or another value encoding/json takes.
func yamlOf(v any) ([]byte, error) {
	var data map[string]any // a ConfigMap's or a Secret's files, outside JSON
	size := 0               // their bytes, as written: what the YAML's buffer is sized for
	switch o := v.(type) {
	case *corev1.ConfigMap:
		c := *o
		data = files("data", c.Data, "binaryData", c.BinaryData)
		size = dataSize(c.Data, c.BinaryData)
		c.Data, c.BinaryData = nil, nil
		v = &c
	case *corev1.Secret:
		c := *o
		data = files("stringData", c.StringData, "data", c.Data)
		size = dataSize(c.StringData, c.Data) * 4 / 3 // base64
		c.Data, c.StringData = nil, nil
		v = &c
	}
	j, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	tree, err := jsonTree(j)
	if err != nil {
		return nil, err
	}
	if m, ok := tree.(map[string]any); ok {
		if st, ok := m["status"].(map[string]any); ok && len(st) == 0 {
			delete(m, "status")
		}
		for k, x := range data {
			m[k] = x
		}
	}
	// Sized once, above what the YAML takes (a line's indentation, a
	// quote's escape): grown by doubling, the copies of a file of ~600 KB
	// were a fifth of the writer's time. The unused tail of a large
	// buffer is memory never touched.
	w := &yamlWriter{b: make([]byte, 0, 2*len(j)+size+size/4+4096)}
	if err := w.value(prune(tree), 0, false); err != nil {
		return nil, err
	}
	return w.b, nil
}

// files are an object's text and bytes maps under their JSON names, as
// encoding/json writes them (omitted when empty; bytes as standard
// base64).
func files(textKey string, text map[string]string, bytesKey string, bin map[string][]byte) map[string]any {
	out := map[string]any{}
	if len(text) > 0 {
		m := make(map[string]any, len(text))
		for k, v := range text {
			m[k] = v
		}
		out[textKey] = m
	}
	if len(bin) > 0 {
		m := make(map[string]any, len(bin))
		for k, v := range bin {
			m[k] = base64.StdEncoding.EncodeToString(v)
		}
		out[bytesKey] = m
	}
	return out
}

// prune drops every null member of every object.
func prune(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			if x == nil {
				delete(t, k)
				continue
			}
			t[k] = prune(x)
		}
	case []any:
		for i, x := range t {
			t[i] = prune(x)
		}
	}
	return v
}

type yamlWriter struct{ b []byte }

func (w *yamlWriter) indent(n int) {
	for range n {
		w.b = append(w.b, ' ')
	}
}

// value writes v at indentation ind. inline: the line is already begun
// (after "- " or "key:"), so a mapping's or a sequence's first entry
// continues it or a new line is started.
func (w *yamlWriter) value(v any, ind int, inline bool) error {
	switch t := v.(type) {
	case map[string]any:
		if len(t) == 0 {
			w.space(inline)
			w.b = append(w.b, "{}\n"...)
			return nil
		}
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 || !inline {
				w.indent(ind)
			}
			at := len(w.b)
			w.scalar(k, ind, false)
			if len(w.b)-at > maxKey {
				return fmt.Errorf("the key %.40q… is longer than %d characters as written, which YAML does not read as a key", k, maxKey)
			}
			w.b = append(w.b, ':')
			switch x := t[k].(type) {
			case map[string]any:
				if len(x) == 0 {
					w.b = append(w.b, " {}\n"...)
					continue
				}
				w.b = append(w.b, '\n')
				if err := w.value(x, ind+2, false); err != nil {
					return err
				}
			case []any:
				if len(x) == 0 {
					w.b = append(w.b, " []\n"...)
					continue
				}
				// A sequence under a key is not indented (as
				// sigs.k8s.io/yaml writes it).
				w.b = append(w.b, '\n')
				if err := w.value(x, ind, false); err != nil {
					return err
				}
			default:
				w.b = append(w.b, ' ')
				if err := w.value(x, ind+2, true); err != nil {
					return err
				}
			}
		}
		return nil
	case []any:
		if len(t) == 0 {
			w.space(inline)
			w.b = append(w.b, "[]\n"...)
			return nil
		}
		for i, x := range t {
			if i > 0 || !inline {
				w.indent(ind)
			}
			w.b = append(w.b, "- "...)
			if err := w.value(x, ind+2, true); err != nil {
				return err
			}
		}
		return nil
	case string:
		if !w.scalar(t, ind, true) {
			w.b = append(w.b, '\n')
		}
		return nil
	case json.Number:
		w.b = append(w.b, t...)
		w.b = append(w.b, '\n')
		return nil
	case bool:
		w.b = strconv.AppendBool(w.b, t)
		w.b = append(w.b, '\n')
		return nil
	case nil:
		w.b = append(w.b, "null\n"...)
		return nil
	}
	return fmt.Errorf("yaml: a %T in the object's JSON tree", v)
}

// space ends a line begun with "key:" or "- " before a flow value; a
// document's own value needs none.
func (w *yamlWriter) space(inline bool) {
	if inline && len(w.b) > 0 && w.b[len(w.b)-1] != ' ' {
		w.b = append(w.b, ' ')
	}
}

// scalar writes s as a plain word, a literal block (block: a value, whose
// lines are indented by ind), single-quoted (printable ASCII on one line
// holding a character no plain word does: only a quote is doubled) or
// double-quoted (any other, such as a word that would read as a number).
// It reports whether it ended the line, as a literal block does.
func (w *yamlWriter) scalar(s string, ind int, block bool) (ended bool) {
	switch {
	case plainSafe(s):
		w.b = append(w.b, s...)
	case block && literalSafe(s):
		w.literal(s, ind)
		return true
	case printableASCII(s) && !wordChars(s):
		w.b = append(w.b, '\'')
		for i := 0; i < len(s); i++ {
			if s[i] == '\'' {
				w.b = append(w.b, '\'')
			}
			w.b = append(w.b, s[i])
		}
		w.b = append(w.b, '\'')
	default:
		w.b = appendDoubleQuoted(w.b, s)
	}
	return false
}

// plainSafe: s is written as it is. It holds only letters, digits and
// " ._/:=@,+-", with no ": ", no ':' or space at its end and no space at
// its start, and begins so that no YAML 1.1 or 1.2 reader takes it for a
// number, a timestamp, a boolean, null or an indicator:
//   - a letter or '/', and it is no word YAML 1.1 reads as a boolean or
//     null (yes, off, y, Null, …);
//   - '-' and then a letter or one '-' (a flag: -c, --config);
//   - a digit, and it holds a letter no number or timestamp spells (g
//     to z but o, t, x and z: 100m and 512Mi, never 0x1f, 1e3 or
//     2001-12-14t21:59:43z).
func plainSafe(s string) bool {
	if s == "" || len(s) > maxKey {
		return false
	}
	word := false
	switch c := s[0]; {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		word = true
	case c == '/':
	case c == '-':
		if len(s) < 2 || !(isLetter(s[1]) || s[1] == '-' && (len(s) < 3 || s[2] != '-')) {
			return false
		}
	case c >= '0' && c <= '9':
		if !strings.ContainsFunc(s, func(r rune) bool {
			l := unicode.ToLower(r)
			return l >= 'g' && l <= 'z' && l != 'o' && l != 't' && l != 'x' && l != 'z'
		}) {
			return false
		}
	default:
		return false
	}
	if !wordChars(s) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ':':
			if i == len(s)-1 || s[i+1] == ' ' {
				return false
			}
		case c == ' ':
			if i == len(s)-1 {
				return false
			}
		}
	}
	if !word {
		return true
	}
	switch s {
	case "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO",
		"true", "True", "TRUE", "false", "False", "FALSE",
		"on", "On", "ON", "off", "Off", "OFF", "null", "Null", "NULL":
		return false
	}
	return true
}

// printableASCII: s is ' ' to '~' only.
func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// wordChars: s holds only the characters of a plain word.
func wordChars(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case isLetter(c), c >= '0' && c <= '9', strings.IndexByte(" ._/:=@,+-", c) >= 0:
		default:
			return false
		}
	}
	return true
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// literalSafe: s spans lines and is read back from a literal block as it
// is: its first character is no space, tab or line break (which would
// move the block's indentation), and every character is printable, a tab
// or a '\n' — no '\r', no other line break of YAML 1.1 (U+0085, U+2028,
// U+2029), no byte-order mark, valid UTF-8.
func literalSafe(s string) bool {
	if len(s) < 2 || s[0] == ' ' || s[0] == '\t' || s[0] == '\n' || !strings.Contains(s, "\n") {
		return false
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < ' ' && c != '\n' && c != '\t' || c == 0x7f {
				return false
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 || r == 0x85 || r == 0x2028 || r == 0x2029 || r == 0xfeff || !unicode.IsPrint(r) {
			return false
		}
		i += n
	}
	return true
}

// literal writes s as a literal block, its lines indented by ind, and
// ends the line; the chomping indicator keeps s's trailing line breaks
// exactly: "|" one, "|-" none, "|+" more.
func (w *yamlWriter) literal(s string, ind int) {
	body := strings.TrimRight(s, "\n")
	switch trail := len(s) - len(body); {
	case trail == 0:
		w.b = append(w.b, "|-\n"...)
	case trail == 1:
		w.b = append(w.b, "|\n"...)
	default:
		w.b = append(w.b, "|+\n"...)
		defer func() { w.b = append(w.b, s[len(body)+1:]...) }()
	}
	for line := range strings.SplitSeq(body, "\n") {
		if line != "" {
			w.indent(ind)
			w.b = append(w.b, line...)
		}
		w.b = append(w.b, '\n')
	}
}

// appendDoubleQuoted writes s double-quoted: '"' and '\' escaped, every
// character outside printable ASCII as \xXX, \uXXXX or \UXXXXXXXX (an
// invalid byte as U+FFFD, as encoding/json writes it).
func appendDoubleQuoted(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= ' ' && c < 0x7f {
			if c == '"' || c == '\\' {
				b = append(b, '\\')
			}
			b = append(b, c)
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		i += n
		switch {
		case r == '\n':
			b = append(b, `\n`...)
		case r == '\t':
			b = append(b, `\t`...)
		case r < 0x100:
			b = append(b, '\\', 'x', hex[r>>4], hex[r&0xf])
		case r < 0x10000:
			b = append(b, '\\', 'u', hex[r>>12], hex[r>>8&0xf], hex[r>>4&0xf], hex[r&0xf])
		default:
			b = append(b, '\\', 'U')
			for sh := 28; sh >= 0; sh -= 4 {
				b = append(b, hex[r>>sh&0xf])
			}
		}
	}
	return append(b, '"')
}
