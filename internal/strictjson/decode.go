package strictjson

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
)

// Decode reads b, one JSON document, into v (a pointer) after checking
// every object in it against the Go type it lands in: a struct's keys must
// each be one of its fields' json names, spelled exactly; a key may appear
// once in any object, a map's included. Only then is b handed to
// encoding/json, whose own matching (any case, last repeat wins) no longer
// has anything to choose between. what names the document in each error
// ("custodian.json") and fix ends it ("; render it with controlplane
// render"). A refusal is a *FieldError whose Path names the place in the
// document (`secrets[2].hosts`).
func Decode(b []byte, v any, what, fix string) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return &FieldError{Msg: what + ": decode needs a non-nil pointer"}
	}
	wrap := func(err error) error {
		var fe *FieldError
		if errors.As(err, &fe) {
			return &FieldError{Path: fe.Path, Msg: fe.Msg + fix}
		}
		return &FieldError{Msg: err.Error() + fix}
	}
	raw, ferr := oneValue(b)
	if ferr != nil {
		return prefix(what, wrap(ferr))
	}
	if err := Check(rv.Type().Elem(), raw); err != nil {
		return prefix(what, wrap(err))
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return prefix(what, &FieldError{Path: te.Field, Msg: fmt.Sprintf("want %s, not %s%s", typeWord(te.Type), te.Value, fix)})
		}
		return prefix(what, &FieldError{Msg: Clip(err.Error()) + fix})
	}
	return nil
}

// prefix puts the document's name before the path of a refusal.
func prefix(what string, err error) error {
	if what == "" {
		return err
	}
	var fe *FieldError
	if errors.As(err, &fe) {
		if fe.Path == "" {
			return &FieldError{Msg: what + ": " + fe.Msg}
		}
		return &FieldError{Path: what + ": " + fe.Path, Msg: fe.Msg}
	}
	return fmt.Errorf("%s: %w", what, err)
}

// Clip cuts a message to at most 160 bytes, so that a reason quoting
// encoding/json never carries a long input back.
func Clip(s string) string {
	if len(s) <= 160 {
		return s
	}
	return s[:157] + "…"
}

func typeWord(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number in range"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return t.String()
}

var (
	unmarshalerType     = reflect.TypeFor[json.Unmarshaler]()
	rawMessageType      = reflect.TypeFor[json.RawMessage]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// Check walks raw (one JSON value) against t, the type it will be decoded
// into, and refuses a key given twice in any object, and in an object that
// lands in a struct, a key that is none of its fields' json names (with the
// right spelling named when only the case differs), and a value whose JSON
// type the Go type cannot hold. A value that lands in an interface, a
// json.RawMessage or a type with its own UnmarshalJSON is still checked for
// repeated keys.
func Check(t reflect.Type, raw json.RawMessage) error {
	return check(t, "", raw)
}

func check(t reflect.Type, path string, raw json.RawMessage) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil
	}
	if t != nil && (t == rawMessageType || t.Kind() == reflect.Interface ||
		reflect.PointerTo(t).Implements(unmarshalerType)) {
		t = nil // any shape: only repeated keys are refused
	}
	if t != nil && !IsNull(raw) {
		if err := fits(t, path, raw); err != nil {
			return err
		}
	}
	switch raw[0] {
	case '{':
		keys, vals, err := Members(path, raw)
		if err != nil {
			return err
		}
		var fields *fieldSet
		var elem reflect.Type
		switch {
		case t != nil && t.Kind() == reflect.Struct:
			fields = structFields(t)
		case t != nil && t.Kind() == reflect.Map:
			elem = t.Elem()
		}
		for _, k := range keys {
			et := elem
			if fields != nil {
				ft, ok := fields.byName[k]
				if !ok {
					return unknownKey(path, k, fields)
				}
				et = ft
			}
			if err := check(et, Member(path, k), vals[k]); err != nil {
				return err
			}
		}
	case '[':
		elems, err := Array(path, raw)
		if err != nil {
			return err
		}
		var elem reflect.Type
		if t != nil {
			elem = t.Elem()
		}
		for i, e := range elems {
			if err := check(elem, Index(path, i), e); err != nil {
				return err
			}
		}
	}
	return nil
}

// fits refuses a value (not null) whose JSON type t cannot hold, naming
// its path; encoding/json's own error would name the field without its
// index.
func fits(t reflect.Type, path string, raw json.RawMessage) error {
	c := raw[0]
	ok := true
	if reflect.PointerTo(t).Implements(textUnmarshalerType) && c == '"' {
		return nil
	}
	switch t.Kind() {
	case reflect.String:
		ok = c == '"'
	case reflect.Bool:
		ok = string(raw) == "true" || string(raw) == "false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		_, err := strconv.ParseInt(string(raw), 10, t.Bits())
		ok = err == nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		_, err := strconv.ParseUint(string(raw), 10, t.Bits())
		ok = err == nil
	case reflect.Float32, reflect.Float64:
		ok = c == '-' || c >= '0' && c <= '9'
	case reflect.Struct, reflect.Map:
		ok = c == '{'
	case reflect.Slice:
		ok = c == '[' || c == '"' && t.Elem().Kind() == reflect.Uint8
	case reflect.Array:
		ok = c == '['
	}
	if !ok {
		return Errorf(path, "want %s", typeWord(t))
	}
	return nil
}

// unknownKey refuses k, naming its exact spelling when only the case is
// wrong.
func unknownKey(path, k string, f *fieldSet) error {
	for _, name := range f.names {
		if strings.EqualFold(name, k) {
			return Errorf(Member(path, k), "spelled %s; write %s (keys are matched exactly)", Quote(k), Quote(name))
		}
	}
	return Errorf(Member(path, k), "unknown field (known: %s)", Words(f.names))
}

type fieldSet struct {
	names  []string
	byName map[string]reflect.Type
}

var fieldCache sync.Map // reflect.Type → *fieldSet

// structFields lists the json names of t's fields as encoding/json sees
// them: the tag's name or the Go name, "-" skipped, an untagged embedded
// struct's fields promoted.
func structFields(t reflect.Type) *fieldSet {
	if f, ok := fieldCache.Load(t); ok {
		return f.(*fieldSet)
	}
	f := &fieldSet{byName: map[string]reflect.Type{}}
	addFields(f, t, 0)
	fieldCache.Store(t, f)
	return f
}

func addFields(f *fieldSet, t reflect.Type, depth int) {
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if sf.Anonymous && name == "" {
			et := sf.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct && depth < 8 {
				addFields(f, et, depth+1)
				continue
			}
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		if _, dup := f.byName[name]; dup {
			continue
		}
		f.names = append(f.names, name)
		f.byName[name] = sf.Type
	}
}
