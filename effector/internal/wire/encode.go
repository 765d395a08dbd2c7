package wire

import (
	"bytes"
	"encoding/json"
)

// Marshal encodes v as the wire writes JSON: compact, '<', '>' and '&' as
// they are, map keys sorted, no trailing newline. A shape of this package
// writes itself, compact already: encoding/json would compact its output
// again at every level of nesting.
func Marshal(v any) ([]byte, error) {
	if m, ok := v.(json.Marshaler); ok {
		return m.MarshalJSON()
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// fields writes a JSON object whose members come in the order given; a
// member whose value is nil is left out.
type fields []field

type field struct {
	key string
	val any
}

func (fs fields) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	n := 0
	for _, f := range fs {
		if f.val == nil {
			continue
		}
		v, err := Marshal(f.val)
		if err != nil {
			return nil, err
		}
		if n > 0 {
			b.WriteByte(',')
		}
		k, _ := Marshal(f.key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
		n++
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// opt is v, or nil (left out) when v is the zero value.
func opt[T comparable](v T) any {
	var zero T
	if v == zero {
		return nil
	}
	return v
}

// MarshalJSON writes {"text": …}, {"secret": …} or {"secretPath": …}.
func (p Part) MarshalJSON() ([]byte, error) {
	key := "text"
	switch p.Kind {
	case PartSecret:
		key = "secret"
	case PartSecretPath:
		key = "secretPath"
	}
	return fields{{key, p.Value}}.MarshalJSON()
}

// MarshalJSON writes a start in the pinned member order.
func (s *Start) MarshalJSON() ([]byte, error) {
	f := fields{{"kind", s.Kind}, {"timeoutMs", opt(s.TimeoutMs)}}
	if s.HTTP != nil {
		f = append(f, field{"http", s.HTTP})
	}
	if s.Command != nil {
		f = append(f, field{"command", s.Command})
	}
	if s.Push != nil {
		f = append(f, field{"push", s.Push})
	}
	return f.MarshalJSON()
}

// MarshalJSON writes an http effect in the pinned member order.
func (h *HTTP) MarshalJSON() ([]byte, error) {
	f := fields{{"method", h.Method}, {"url", h.URL}}
	if h.Path != nil {
		f = append(f, field{"path", h.Path})
	}
	if h.Headers != nil {
		f = append(f, field{"headers", h.Headers})
	}
	if h.Auth != nil {
		a := fields{{"type", h.Auth.Type}, {"secret", h.Auth.Secret}}
		if h.Auth.Type == AuthBasic {
			a = append(a, field{"user", h.Auth.User})
		}
		f = append(f, field{"auth", a})
	}
	if b := h.Body; b != nil {
		var bf fields
		switch {
		case b.JSON != nil:
			bf = fields{{"json", b.JSON}}
		case b.Text != nil:
			bf = fields{{"text", *b.Text}}
		default:
			bf = fields{{"file", b.File}}
		}
		bf = append(bf, field{"contentType", opt(b.ContentType)})
		f = append(f, field{"body", bf})
	}
	f = append(f, field{"maxResponseBytes", opt(h.MaxResponseBytes)})
	return f.MarshalJSON()
}

// MarshalJSON writes a command in the pinned member order.
func (c *Command) MarshalJSON() ([]byte, error) {
	f := fields{{"argv", c.Argv}}
	if c.Env != nil {
		f = append(f, field{"env", c.Env})
	}
	f = append(f, field{"dir", opt(c.Dir)}, field{"pin", opt(c.Pin)}, field{"maxOutputBytes", opt(c.MaxOutputBytes)})
	return f.MarshalJSON()
}
