package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"
)

// kind is the JSON type of a value.
type kind int

const (
	kNull kind = iota
	kBool
	kNumber
	kString
	kArray
	kObject
)

func (k kind) String() string {
	return [...]string{"null", "a boolean", "a number", "a string", "a list", "an object"}[k]
}

// value is one JSON value, read strictly: an object's keys are kept in
// document order and each may appear once.
type value struct {
	kind   kind
	str    string // a string's text
	items  []*value
	keys   []string
	fields map[string]*value
}

// readJSON reads exactly one JSON value from b. A key given twice in one
// object is refused with its path; so is anything after the value.
func readJSON(b []byte) (*value, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	v, err := readValue(dec, "")
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("the manifest holds more than one JSON value; write one object")
	}
	return v, nil
}

func readValue(dec *json.Decoder, path string) (*value, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, syntaxError(dec, err)
	}
	switch t := tok.(type) {
	case nil:
		return &value{kind: kNull}, nil
	case bool:
		return &value{kind: kBool}, nil
	case json.Number:
		return &value{kind: kNumber}, nil
	case string:
		return &value{kind: kString, str: t}, nil
	case json.Delim:
		if t == '[' {
			v := &value{kind: kArray}
			for dec.More() {
				item, err := readValue(dec, index(path, len(v.items)))
				if err != nil {
					return nil, err
				}
				v.items = append(v.items, item)
			}
			if _, err := dec.Token(); err != nil {
				return nil, syntaxError(dec, err)
			}
			return v, nil
		}
		v := &value{kind: kObject, fields: map[string]*value{}}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, syntaxError(dec, err)
			}
			key, _ := kt.(string) // inside an object the decoder yields only string keys
			at := member(path, key)
			if _, dup := v.fields[key]; dup {
				return nil, fmt.Errorf("%s: given twice; write each field once", at)
			}
			item, err := readValue(dec, at)
			if err != nil {
				return nil, err
			}
			v.keys = append(v.keys, key)
			v.fields[key] = item
		}
		if _, err := dec.Token(); err != nil {
			return nil, syntaxError(dec, err)
		}
		return v, nil
	}
	return nil, fmt.Errorf("the manifest is not JSON near byte %d; write a JSON object", dec.InputOffset())
}

// syntaxError words a decoder error with its place and no input beyond the
// one character encoding/json names.
func syntaxError(dec *json.Decoder, err error) error {
	if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("the manifest ends before its JSON value does; write a complete JSON object")
	}
	return fmt.Errorf("the manifest is not JSON near byte %d (%v); write a JSON object", dec.InputOffset(), err)
}

// member names a field of the object at path. A key that is not a plain
// word is quoted (and cut short), so a path never carries a long input.
func member(path, key string) string {
	if !plainWord(key) {
		return path + "[" + quote(key) + "]"
	}
	if path == "" {
		return key
	}
	return path + "." + key
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

// quote renders an input for a message: quoted, cut at 64 bytes.
func quote(s string) string {
	const most = 64
	if len(s) <= most {
		return strconv.Quote(s)
	}
	cut := most
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + "…"
}

// index names an element of the list at path.
func index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }
