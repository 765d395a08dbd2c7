package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"jr2.dev/boundary/internal/strictjson"
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
	str    string // a string's text; a number's, as written
	truth  bool   // a boolean's value
	items  []*value
	keys   []string
	fields map[string]*value
}

// readJSON reads exactly one JSON value from b into a tree built with the
// one strict reader (package strictjson): a key given twice in one object
// is refused with its path; so is anything after the value. The wording of
// a document that is not one JSON value is the manifest's own.
func readJSON(b []byte) (*value, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return nil, syntaxError(dec, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("the manifest holds more than one JSON value; write one object")
	}
	return tree("", raw)
}

// tree is the value raw, one well-formed JSON value, whose objects
// strictjson.Members read.
func tree(path string, raw json.RawMessage) (*value, error) {
	switch raw[0] {
	case '{':
		keys, vals, err := strictjson.Members(path, raw)
		if err != nil {
			return nil, err
		}
		v := &value{kind: kObject, keys: keys, fields: make(map[string]*value, len(keys))}
		for _, k := range keys {
			item, err := tree(member(path, k), vals[k])
			if err != nil {
				return nil, err
			}
			v.fields[k] = item
		}
		return v, nil
	case '[':
		elems, err := strictjson.Array(path, raw)
		if err != nil {
			return nil, err
		}
		v := &value{kind: kArray, items: make([]*value, 0, len(elems))}
		for i, e := range elems {
			item, err := tree(index(path, i), e)
			if err != nil {
				return nil, err
			}
			v.items = append(v.items, item)
		}
		return v, nil
	case '"':
		s, err := strictjson.String(path, raw)
		if err != nil {
			return nil, err
		}
		return &value{kind: kString, str: s}, nil
	case 'n':
		return &value{kind: kNull}, nil
	case 't', 'f':
		return &value{kind: kBool, truth: raw[0] == 't'}, nil
	}
	return &value{kind: kNumber, str: string(raw)}, nil
}

// syntaxError words a decoder error with its place and no input beyond the
// one character encoding/json names.
func syntaxError(dec *json.Decoder, err error) error {
	if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("the manifest ends before its JSON value does; write a complete JSON object")
	}
	return fmt.Errorf("the manifest is not JSON near byte %d (%v); write a JSON object", dec.InputOffset(), err)
}

// member, quote and index name a place in the manifest as every config's
// errors do (package strictjson).
func member(path, key string) string { return strictjson.Member(path, key) }

func quote(s string) string { return strictjson.Quote(s) }

func index(path string, i int) string { return strictjson.Index(path, i) }
