// Package strictjson is the one reader of every JSON config and wire body
// of the kit: custodian.json, the Envoy plugin configs, the Effector's
// configs and wire, and the controlplane manifest. Decode reads into a Go
// type; Object, Members and Array read a shape field by field.
//
// Invariant: a document is read only if it is exactly one JSON value, no
// object in it gives a key twice, and every key of an object read as a
// struct or an Object is a known field spelled exactly (encoding/json alone
// matches keys in any case and lets the last repeat win). A refusal is a
// *FieldError whose Path names the place (`secrets[2].hosts`), whose text
// says the fix, and which quotes at most 64 bytes of any input.
//
// It is built on encoding/json (v1) and not encoding/json/v2, which is
// strict in the same ways: in Go 1.26 v2 is behind GOEXPERIMENT=jsonv2, and
// every build (the c-shared Envoy module included) would need it.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// FieldError is a refused shape: Path names the field, Msg says what is
// wrong and, where there is one, the fix.
type FieldError struct {
	Path string
	Msg  string
}

func (e *FieldError) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return e.Path + ": " + e.Msg
}

// Errorf is a FieldError at path.
func Errorf(path, format string, a ...any) error {
	return &FieldError{Path: path, Msg: fmt.Sprintf(format, a...)}
}

// Join names a member of the object at path.
func Join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// Member names a member of the object at path as a config's error does: a
// key that is a plain word (letters, digits, '_'; at most 64 bytes) after a
// '.', any other key quoted in brackets and cut short, so that a path never
// carries a long input.
func Member(path, key string) string {
	if !plainWord(key) {
		return path + "[" + Quote(key) + "]"
	}
	return Join(path, key)
}

func plainWord(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// Index names an element of the array at path.
func Index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// Quote renders an input for a reason: quoted, and cut at 64 bytes.
func Quote(s string) string {
	const most = 64
	if len(s) > most {
		cut := most
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return strconv.Quote(s[:cut]) + "…"
	}
	return strconv.Quote(s)
}

// Words lists words joined by ", ".
func Words(list []string) string { return strings.Join(list, ", ") }

// Document checks that b is exactly one JSON value with nothing after it
// but white space, and returns it.
func Document(b []byte) (json.RawMessage, error) {
	raw, err := oneValue(b)
	if err != nil && err.Msg == moreThanOne {
		err.Msg += "; send one object"
	}
	if err != nil {
		return nil, err
	}
	return raw, nil
}

const moreThanOne = "more than one JSON value"

// oneValue is Document without a fix in its words.
func oneValue(b []byte) (json.RawMessage, *FieldError) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return nil, &FieldError{Msg: "not one JSON value: " + syntaxReason(err)}
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &FieldError{Msg: moreThanOne}
	}
	return raw, nil
}

// syntaxReason words a JSON syntax error without quoting the input.
func syntaxReason(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("invalid JSON at byte %d", se.Offset)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "the JSON ends early"
	}
	return "invalid JSON"
}

// IsNull reports whether raw is the JSON null.
func IsNull(raw json.RawMessage) bool { return string(raw) == "null" }

// Object is one JSON object whose keys were checked: each known, spelled
// exactly, present once.
type Object struct {
	Path   string
	Fields map[string]json.RawMessage
}

// DecodeObject reads raw as an object whose keys are all in allowed.
func DecodeObject(path string, raw json.RawMessage, allowed ...string) (*Object, error) {
	keys, vals, err := Members(path, raw)
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		if !Contains(allowed, k) {
			return nil, Errorf(Join(path, k), "unknown field (known: %s)", Words(allowed))
		}
	}
	return &Object{Path: path, Fields: vals}, nil
}

// Members reads raw as an object of arbitrary keys (header names, env
// names), each given once, and returns the keys in the order given.
func Members(path string, raw json.RawMessage) ([]string, map[string]json.RawMessage, error) {
	if len(raw) == 0 || raw[0] != '{' {
		return nil, nil, Errorf(path, "want an object")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if _, err := dec.Token(); err != nil {
		return nil, nil, Errorf(path, "%s", syntaxReason(err))
	}
	var keys []string
	vals := map[string]json.RawMessage{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, nil, Errorf(path, "%s", syntaxReason(err))
		}
		key, _ := t.(string)
		if _, dup := vals[key]; dup {
			return nil, nil, Errorf(Member(path, key), "given twice; give it once")
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, Errorf(Member(path, key), "%s", syntaxReason(err))
		}
		keys = append(keys, key)
		vals[key] = v
	}
	return keys, vals, nil
}

// Contains reports whether s is in list.
func Contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// Has reports whether key was given (null included).
func (o *Object) Has(key string) bool { _, ok := o.Fields[key]; return ok }

// Raw returns key's value, refusing null; ok is false when key is absent.
func (o *Object) Raw(key string) (json.RawMessage, bool, error) {
	v, ok := o.Fields[key]
	if !ok {
		return nil, false, nil
	}
	if IsNull(v) {
		return nil, true, Errorf(Join(o.Path, key), "must not be null")
	}
	return v, true, nil
}

// present is Raw that also refuses the absence of a required key.
func (o *Object) present(key string, required bool) (json.RawMessage, bool, error) {
	v, ok, err := o.Raw(key)
	if err == nil && !ok && required {
		err = Errorf(Join(o.Path, key), "required")
	}
	return v, ok, err
}

// Str reads key as a string.
func (o *Object) Str(key string, required bool) (string, bool, error) {
	v, ok, err := o.present(key, required)
	if err != nil || !ok {
		return "", ok, err
	}
	s, err := String(Join(o.Path, key), v)
	return s, true, err
}

// Bool reads key as true or false.
func (o *Object) Bool(key string, required bool) (bool, bool, error) {
	v, ok, err := o.present(key, required)
	if err != nil || !ok {
		return false, ok, err
	}
	switch string(v) {
	case "true":
		return true, true, nil
	case "false":
		return false, true, nil
	}
	return false, true, Errorf(Join(o.Path, key), "want true or false")
}

// Int reads key as a whole number in [lo, hi].
func (o *Object) Int(key string, required bool, lo, hi int64) (int64, bool, error) {
	v, ok, err := o.present(key, required)
	if err != nil || !ok {
		return 0, ok, err
	}
	n, perr := strconv.ParseInt(string(v), 10, 64)
	if perr != nil {
		return 0, true, Errorf(Join(o.Path, key), "want a whole number from %d to %d", lo, hi)
	}
	if n < lo || n > hi {
		return 0, true, Errorf(Join(o.Path, key), "%d is out of range; want %d to %d", n, lo, hi)
	}
	return n, true, nil
}

// Array reads key as an array and returns its elements.
func (o *Object) Array(key string, required bool) ([]json.RawMessage, bool, error) {
	v, ok, err := o.present(key, required)
	if err != nil || !ok {
		return nil, ok, err
	}
	elems, err := Array(Join(o.Path, key), v)
	return elems, true, err
}

// Array reads raw as an array and returns its elements.
func Array(path string, raw json.RawMessage) ([]json.RawMessage, error) {
	var elems []json.RawMessage
	if len(raw) == 0 || raw[0] != '[' || json.Unmarshal(raw, &elems) != nil {
		return nil, Errorf(path, "want an array")
	}
	return elems, nil
}

// String reads raw as a string.
func String(path string, raw json.RawMessage) (string, error) {
	if s, ok := plainString(raw); ok {
		return s, nil
	}
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", Errorf(path, "want a string")
	}
	return s, nil
}

// Strings reads raw as an array of strings.
func Strings(path string, raw json.RawMessage) ([]string, error) {
	elems, err := Array(path, raw)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(elems))
	for i, e := range elems {
		s, err := String(Index(path, i), e)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// NoDuplicateKeys walks raw (any JSON value) and refuses an object inside
// it that gives a key twice.
func NoDuplicateKeys(path string, raw json.RawMessage) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	type frame struct {
		keys   map[string]bool
		object bool
	}
	var stack []frame
	expectKey := false
	for {
		t, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return Errorf(path, "%s", syntaxReason(err))
		}
		if d, ok := t.(json.Delim); ok {
			switch d {
			case '{':
				stack = append(stack, frame{keys: map[string]bool{}, object: true})
				expectKey = true
				continue
			case '[':
				stack = append(stack, frame{})
			case '}', ']':
				stack = stack[:len(stack)-1]
			}
			expectKey = len(stack) > 0 && stack[len(stack)-1].object
			continue
		}
		if expectKey {
			k, _ := t.(string)
			top := stack[len(stack)-1]
			if top.keys[k] {
				return Errorf(path, "an object gives the key %s twice; give each key once", Quote(k))
			}
			top.keys[k] = true
			expectKey = false
			continue
		}
		expectKey = len(stack) > 0 && stack[len(stack)-1].object
	}
}

// plainString reads a JSON string that needs no unescaping — no '\\', no
// control byte, valid UTF-8 — without a second scan.
func plainString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	in := raw[1 : len(raw)-1]
	for _, c := range in {
		if c == '\\' || c == '"' || c < 0x20 {
			return "", false
		}
	}
	if !utf8.Valid(in) {
		return "", false
	}
	return string(in), true
}
