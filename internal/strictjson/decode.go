package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
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
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	rawMessageType  = reflect.TypeFor[json.RawMessage]()
)

// Check walks raw (one JSON value) against t, the type it will be decoded
// into, and refuses a key given twice in any object, and in an object that
// lands in a struct, a key that is none of its fields' json names (with the
// right spelling named when only the case differs). A value that lands in
// an interface, a json.RawMessage or a type with its own UnmarshalJSON is
// still checked for repeated keys.
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
	if t == nil || t == rawMessageType || t.Kind() == reflect.Interface ||
		reflect.PointerTo(t).Implements(unmarshalerType) {
		return NoDuplicateKeys(path, raw)
	}
	switch raw[0] {
	case '{':
		switch t.Kind() {
		case reflect.Struct:
			fields := structFields(t)
			keys, vals, err := Members(path, raw)
			if err != nil {
				return err
			}
			for _, k := range keys {
				ft, ok := fields.byName[k]
				if !ok {
					return unknownKey(path, k, fields)
				}
				if err := check(ft, Join(path, k), vals[k]); err != nil {
					return err
				}
			}
			return nil
		case reflect.Map:
			keys, vals, err := Members(path, raw)
			if err != nil {
				return err
			}
			for _, k := range keys {
				if err := check(t.Elem(), Join(path, k), vals[k]); err != nil {
					return err
				}
			}
			return nil
		}
		return NoDuplicateKeys(path, raw)
	case '[':
		if t.Kind() != reflect.Slice && t.Kind() != reflect.Array {
			return NoDuplicateKeys(path, raw)
		}
		elems, err := Array(path, raw)
		if err != nil {
			return err
		}
		for i, e := range elems {
			if err := check(t.Elem(), Index(path, i), e); err != nil {
				return err
			}
		}
	}
	return nil
}

// unknownKey refuses k, naming its exact spelling when only the case is
// wrong.
func unknownKey(path, k string, f *fieldSet) error {
	for _, name := range f.names {
		if strings.EqualFold(name, k) {
			return Errorf(Join(path, k), "spelled %s; write %s (keys are matched exactly)", Quote(k), Quote(name))
		}
	}
	return Errorf(Join(path, k), "unknown field (known: %s)", Words(f.names))
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
