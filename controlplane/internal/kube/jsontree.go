package kube

import (
	"encoding/json"
	"errors"
	"fmt"
)

// jsonTree reads the JSON that encoding/json wrote of an object into the
// tree json.Decoder with UseNumber gives — map[string]any, []any, string,
// json.Number, bool, nil — the same values (TestJSONTreeIsDecoders). The
// decoder's reflection and its scan of every byte twice were a third
// of the YAML writer's time on a Pod of 400 targets; this reads each byte
// once. A string with an escape is unquoted by encoding/json itself.
func jsonTree(b []byte) (any, error) {
	r := treeReader{b: b}
	v, err := r.value(0)
	if err != nil {
		return nil, err
	}
	r.space()
	if r.i != len(r.b) {
		return nil, r.errorf("text after the value")
	}
	return v, nil
}

// maxTreeDepth is encoding/json's own nesting limit.
const maxTreeDepth = 10000

type treeReader struct {
	b []byte
	i int
}

func (r *treeReader) errorf(format string, args ...any) error {
	return fmt.Errorf("json tree at byte %d: %s", r.i, fmt.Sprintf(format, args...))
}

func (r *treeReader) space() {
	for r.i < len(r.b) {
		switch r.b[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

func (r *treeReader) value(depth int) (any, error) {
	if depth > maxTreeDepth {
		return nil, r.errorf("nested too deep")
	}
	r.space()
	if r.i >= len(r.b) {
		return nil, r.errorf("unexpected end")
	}
	switch c := r.b[r.i]; {
	case c == '{':
		return r.object(depth)
	case c == '[':
		return r.array(depth)
	case c == '"':
		return r.str()
	case c == 't':
		return true, r.word("true")
	case c == 'f':
		return false, r.word("false")
	case c == 'n':
		return nil, r.word("null")
	case c == '-' || c >= '0' && c <= '9':
		return r.number()
	}
	return nil, r.errorf("unexpected %q", r.b[r.i])
}

func (r *treeReader) word(w string) error {
	if len(r.b)-r.i < len(w) || string(r.b[r.i:r.i+len(w)]) != w {
		return r.errorf("want %s", w)
	}
	r.i += len(w)
	return nil
}

func (r *treeReader) object(depth int) (any, error) {
	r.i++ // {
	m := map[string]any{}
	r.space()
	if r.i < len(r.b) && r.b[r.i] == '}' {
		r.i++
		return m, nil
	}
	for {
		r.space()
		if r.i >= len(r.b) || r.b[r.i] != '"' {
			return nil, r.errorf("want a member's name")
		}
		k, err := r.str()
		if err != nil {
			return nil, err
		}
		r.space()
		if r.i >= len(r.b) || r.b[r.i] != ':' {
			return nil, r.errorf("want ':'")
		}
		r.i++
		v, err := r.value(depth + 1)
		if err != nil {
			return nil, err
		}
		m[k] = v // the last of a name given twice, as the decoder keeps
		if end, err := r.after('}'); err != nil || end {
			return m, err
		}
	}
}

func (r *treeReader) array(depth int) (any, error) {
	r.i++ // [
	a := []any{}
	r.space()
	if r.i < len(r.b) && r.b[r.i] == ']' {
		r.i++
		return a, nil
	}
	for {
		v, err := r.value(depth + 1)
		if err != nil {
			return nil, err
		}
		a = append(a, v)
		if end, err := r.after(']'); err != nil || end {
			return a, err
		}
	}
}

// after reads what follows a member or an element: ',' (another comes)
// or end, the object's or the array's close (end is true).
func (r *treeReader) after(close byte) (end bool, err error) {
	r.space()
	switch {
	case r.i >= len(r.b):
		return false, r.errorf("unexpected end")
	case r.b[r.i] == ',':
		r.i++
		return false, nil
	case r.b[r.i] == close:
		r.i++
		return true, nil
	}
	return false, r.errorf("want ',' or %q", close)
}

// str reads a string: its bytes as they are when it holds no escape, no
// control character and only ASCII (what encoding/json writes of most
// values), else encoding/json's unquoting of it.
func (r *treeReader) str() (string, error) {
	start := r.i
	r.i++ // "
	plain := true
	for r.i < len(r.b) {
		switch c := r.b[r.i]; {
		case c == '"':
			r.i++
			if plain {
				return string(r.b[start+1 : r.i-1]), nil
			}
			var s string
			if err := json.Unmarshal(r.b[start:r.i], &s); err != nil {
				return "", r.errorf("a string: %v", err)
			}
			return s, nil
		case c == '\\':
			plain = false
			r.i += 2
		case c < ' ' || c >= 0x80:
			plain = false
			r.i++
		default:
			r.i++
		}
	}
	return "", errors.New("json tree: a string without its end")
}

// number reads a number's text as JSON spells it, checked by
// encoding/json's grammar (json.Valid of the literal).
func (r *treeReader) number() (any, error) {
	start := r.i
	for r.i < len(r.b) && numberByte(r.b[r.i]) {
		r.i++
	}
	lit := r.b[start:r.i]
	if !json.Valid(lit) {
		return nil, r.errorf("a number %q", lit)
	}
	return json.Number(lit), nil
}

func numberByte(c byte) bool {
	return c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
}
