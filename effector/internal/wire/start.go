package wire

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"

	sj "jr2.dev/boundary/internal/strictjson"
)

// Kinds a start may name.
const (
	KindHTTP    = "http"
	KindCommand = "command"
	KindPush    = "push"
)

// kinds are the kinds a start may name, in the order reasons list them.
var kinds = []string{KindHTTP, KindCommand, KindPush}

// MaxBody is the most a request body may hold; a longer one cannot be
// verified and is refused as unsigned.
const MaxBody = 4 << 20

// Defaults and bounds of a start's numbers.
const (
	DefaultTimeoutMs        = 30_000
	MaxTimeoutMs            = 24 * 60 * 60 * 1000
	DefaultMaxResponseBytes = 1 << 20
	MaxMaxResponseBytes     = 64 << 20
	DefaultMaxOutputBytes   = 1 << 20
	MaxMaxOutputBytes       = 64 << 20
)

// PartKind says what a Part stands for.
type PartKind uint8

// The three kinds of part.
const (
	PartText       PartKind = iota + 1 // {"text": "…"}: the text itself
	PartSecret                         // {"secret": "NAME"}: the held value
	PartSecretPath                     // {"secretPath": "NAME"}: the path of the value's file (commands)
)

// Part is one piece of a value on the wire. A secret never travels: a
// PartSecret or PartSecretPath carries the secret's name.
type Part struct {
	Kind PartKind
	// Value is the text of a PartText, else the secret's name.
	Value string
}

// Text, Secret and SecretPath build parts.
func Text(s string) Part          { return Part{Kind: PartText, Value: s} }
func Secret(name string) Part     { return Part{Kind: PartSecret, Value: name} }
func SecretPath(name string) Part { return Part{Kind: PartSecretPath, Value: name} }

// Value is a list of parts, joined in order.
type Value []Part

// Secrets lists the names of the secrets v's parts name, in order.
func (v Value) Secrets() []string {
	var names []string
	for _, p := range v {
		if p.Kind != PartText {
			names = append(names, p.Value)
		}
	}
	return names
}

// Start is the body of POST /effects/{id}.
type Start struct {
	Kind string
	// TimeoutMs is the effect's timeout; 0 means DefaultTimeoutMs.
	TimeoutMs int64
	HTTP      *HTTP
	Command   *Command
	Push      *Push
}

// HTTP is an http effect.
type HTTP struct {
	Method string
	URL    Value
	// Path segments are percent-encoded and appended after URL's path.
	Path []string
	// Headers maps a header name, as given, to its value.
	Headers map[string]Value
	Auth    *Auth
	Body    *Body
	// MaxResponseBytes bounds the returned body; 0 means the default.
	MaxResponseBytes int64
}

// Auth types.
const (
	AuthBearer = "bearer"
	AuthBasic  = "basic"
	AuthText   = "text"
)

// Auth fills Authorization from a secret.
type Auth struct {
	Type   string
	Secret string
	// User is the Basic user name (type basic only).
	User string
}

// Body is one of JSON, Text or File.
type Body struct {
	// JSON, when not nil, is sent as it is (compacted).
	JSON json.RawMessage
	// Text, when not nil, is sent as it is.
	Text *string
	// File is a path in the worktree (a Sandbox Effector's only).
	File        string
	ContentType string
}

// Command is a credentialed command.
type Command struct {
	Argv           []string
	Env            map[string]Value
	Dir            string
	Pin            string
	MaxOutputBytes int64
}

// Methods an http effect may use.
var Methods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}

// framing lists the header names that frame or route a request; every
// proxy-* name is one too (see Framing).
var framing = []string{"host", "content-length", "transfer-encoding", "connection", "upgrade", "te", "trailer", "keep-alive"}

// FramingHeaders is the list of framing header names, for tests and
// fixtures, with "proxy-authorization" standing for the proxy-* family.
func FramingHeaders() []string {
	return append(append([]string(nil), framing...), "proxy-authorization", "proxy-connection")
}

// Framing reports whether a header name frames or routes a request.
func Framing(name string) bool {
	n := strings.ToLower(name)
	return sj.Contains(framing, n) || strings.HasPrefix(n, "proxy-")
}

// ValidSecretName reports whether name can name a secret: 1–253 of
// [A-Za-z0-9._-], a Kubernetes Secret key.
func ValidSecretName(name string) bool { return secretNameChars.all(name, 253) }

// DecodeStart reads a start body strictly and checks its shape. The error
// is the 400 reason.
func DecodeStart(b []byte) (*Start, error) {
	raw, err := sj.Document(b)
	if err != nil {
		return nil, err
	}
	o, err := sj.DecodeObject("", raw, "kind", "timeoutMs", "http", "command", "push")
	if err != nil {
		return nil, err
	}
	s := &Start{}
	if s.Kind, _, err = o.Str("kind", true); err != nil {
		return nil, err
	}
	if s.TimeoutMs, _, err = o.Int("timeoutMs", false, 1, MaxTimeoutMs); err != nil {
		return nil, err
	}
	if !sj.Contains(kinds, s.Kind) {
		return nil, sj.Errorf("kind", "%s is not a kind this Effector runs (%s)", sj.Quote(s.Kind), strings.Join(kinds, ", "))
	}
	for _, other := range kinds {
		if other != s.Kind && o.Has(other) {
			return nil, sj.Errorf(other, "not allowed with kind %q", s.Kind)
		}
	}
	v, ok, err := o.Raw(s.Kind)
	if err == nil && !ok {
		err = sj.Errorf(s.Kind, "required with kind %q", s.Kind)
	}
	if err != nil {
		return nil, err
	}
	switch s.Kind {
	case KindHTTP:
		s.HTTP, err = decodeHTTP(s.Kind, v)
	case KindCommand:
		s.Command, err = decodeCommand(s.Kind, v)
	default:
		s.Push, err = decodePush(s.Kind, v)
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

func decodeHTTP(path string, raw json.RawMessage) (*HTTP, error) {
	o, err := sj.DecodeObject(path, raw, "method", "url", "path", "headers", "auth", "body", "maxResponseBytes")
	if err != nil {
		return nil, err
	}
	h := &HTTP{}
	if h.Method, _, err = o.Str("method", true); err != nil {
		return nil, err
	}
	if !sj.Contains(Methods, h.Method) {
		return nil, sj.Errorf(sj.Join(path, "method"), "%s is not allowed; use one of %s", sj.Quote(h.Method), sj.Words(Methods))
	}
	urlRaw, _, err := o.Array("url", true)
	if err != nil {
		return nil, err
	}
	if h.URL, err = decodeValue(sj.Join(path, "url"), urlRaw, false); err != nil {
		return nil, err
	}
	if err := checkURLParts(sj.Join(path, "url"), h.URL); err != nil {
		return nil, err
	}
	if v, ok, err := o.Raw("path"); err != nil {
		return nil, err
	} else if ok {
		if h.Path, err = sj.Strings(sj.Join(path, "path"), v); err != nil {
			return nil, err
		}
	}
	if v, ok, err := o.Raw("headers"); err != nil {
		return nil, err
	} else if ok {
		if h.Headers, err = decodeHeaders(sj.Join(path, "headers"), v); err != nil {
			return nil, err
		}
	}
	if v, ok, err := o.Raw("auth"); err != nil {
		return nil, err
	} else if ok {
		if h.Auth, err = decodeAuth(sj.Join(path, "auth"), v); err != nil {
			return nil, err
		}
		for name := range h.Headers {
			if strings.EqualFold(name, "authorization") {
				return nil, sj.Errorf(sj.Join(sj.Join(path, "headers"), name), "auth fills Authorization; give one or the other")
			}
		}
	}
	if v, ok, err := o.Raw("body"); err != nil {
		return nil, err
	} else if ok {
		if h.Body, err = decodeBody(sj.Join(path, "body"), v); err != nil {
			return nil, err
		}
		if h.Body.ContentType != "" {
			for name := range h.Headers {
				if strings.EqualFold(name, "content-type") {
					return nil, sj.Errorf(sj.Join(sj.Join(path, "headers"), name), "body.contentType sets Content-Type; give one or the other")
				}
			}
		}
	}
	if h.MaxResponseBytes, _, err = o.Int("maxResponseBytes", false, 1, MaxMaxResponseBytes); err != nil {
		return nil, err
	}
	return h, nil
}

// decodeValue reads a list of parts; secretPath is allowed only for
// commands.
func decodeValue(path string, elems []json.RawMessage, secretPath bool) (Value, error) {
	v := make(Value, 0, len(elems))
	for i, r := range elems {
		p := sj.Index(path, i)
		o, err := sj.DecodeObject(p, r, "text", "secret", "secretPath")
		if err != nil {
			return nil, err
		}
		if len(o.Fields) != 1 {
			return nil, sj.Errorf(p, "want exactly one of text, secret, secretPath")
		}
		if o.Has("secretPath") && !secretPath {
			return nil, sj.Errorf(sj.Join(p, "secretPath"), "for commands only; an http effect names a secret with {\"secret\": NAME}")
		}
		for key := range o.Fields {
			s, _, err := o.Str(key, true)
			if err != nil {
				return nil, err
			}
			switch key {
			case "text":
				v = append(v, Text(s))
			case "secret", "secretPath":
				if !ValidSecretName(s) {
					return nil, sj.Errorf(sj.Join(p, key), "%s is not a secret name (1–253 of A-Z a-z 0-9 . _ -)", sj.Quote(s))
				}
				if key == "secret" {
					v = append(v, Secret(s))
				} else {
					v = append(v, SecretPath(s))
				}
			}
		}
	}
	return v, nil
}

// checkURLParts holds a url's parts to the rule: a secret stands only
// after the host and before any '?' or '#', so it is one path segment.
func checkURLParts(path string, v Value) error {
	if len(v) == 0 {
		return sj.Errorf(path, "required: at least one part")
	}
	var before strings.Builder
	for i, p := range v {
		if p.Kind == PartText {
			before.WriteString(p.Value)
			continue
		}
		pre := before.String()
		if strings.ContainsAny(pre, "?#") {
			return sj.Errorf(sj.Index(path, i), "a secret may not stand after '?' or '#'; it is sent only as a path segment")
		}
		scheme := strings.Index(pre, "://")
		if scheme < 0 || !strings.Contains(pre[scheme+3:], "/") {
			return sj.Errorf(sj.Index(path, i), "a secret may stand only in the url's path, after the host and a '/'")
		}
	}
	return nil
}

func decodeHeaders(path string, raw json.RawMessage) (map[string]Value, error) {
	names, vals, err := sj.Members(path, raw)
	if err != nil {
		return nil, err
	}
	h := make(map[string]Value, len(names))
	seen := map[string]string{}
	for _, name := range names {
		p := sj.Join(path, name)
		if !validHeaderName(name) {
			return nil, sj.Errorf(path, "%s is not a header name", sj.Quote(name))
		}
		if Framing(name) {
			return nil, sj.Errorf(p, "a header that frames or routes the request is not allowed (host, content-length, transfer-encoding, connection, upgrade, te, trailer, keep-alive, proxy-*)")
		}
		lower := strings.ToLower(name)
		if other, dup := seen[lower]; dup {
			return nil, sj.Errorf(p, "the same header as %s; give each name once", sj.Quote(other))
		}
		seen[lower] = name
		elems, err := sj.Array(p, vals[name])
		if err != nil {
			return nil, err
		}
		v, err := decodeValue(p, elems, false)
		if err != nil {
			return nil, err
		}
		h[name] = v
	}
	return h, nil
}

func decodeAuth(path string, raw json.RawMessage) (*Auth, error) {
	o, err := sj.DecodeObject(path, raw, "type", "secret", "user")
	if err != nil {
		return nil, err
	}
	a := &Auth{}
	if a.Type, _, err = o.Str("type", true); err != nil {
		return nil, err
	}
	if a.Secret, _, err = o.Str("secret", true); err != nil {
		return nil, err
	}
	if !ValidSecretName(a.Secret) {
		return nil, sj.Errorf(sj.Join(path, "secret"), "%s is not a secret name (1–253 of A-Z a-z 0-9 . _ -)", sj.Quote(a.Secret))
	}
	user, hasUser, err := o.Str("user", false)
	if err != nil {
		return nil, err
	}
	switch a.Type {
	case AuthBearer, AuthText:
		if hasUser {
			return nil, sj.Errorf(sj.Join(path, "user"), "only for type basic")
		}
	case AuthBasic:
		if !hasUser {
			return nil, sj.Errorf(sj.Join(path, "user"), "required with type basic")
		}
		if strings.Contains(user, ":") {
			return nil, sj.Errorf(sj.Join(path, "user"), "a Basic user may not hold ':'")
		}
		a.User = user
	default:
		return nil, sj.Errorf(sj.Join(path, "type"), "%s is not an auth type (bearer, basic, text)", sj.Quote(a.Type))
	}
	return a, nil
}

func decodeBody(path string, raw json.RawMessage) (*Body, error) {
	o, err := sj.DecodeObject(path, raw, "json", "text", "file", "contentType")
	if err != nil {
		return nil, err
	}
	b := &Body{}
	n := 0
	if v, ok := o.Fields["json"]; ok {
		n++
		if err := sj.NoDuplicateKeys(sj.Join(path, "json"), v); err != nil {
			return nil, err
		}
		var c bytes.Buffer
		if err := json.Compact(&c, v); err != nil {
			return nil, sj.Errorf(sj.Join(path, "json"), "not JSON")
		}
		b.JSON = c.Bytes()
	}
	if t, ok, err := o.Str("text", false); err != nil {
		return nil, err
	} else if ok {
		n++
		b.Text = &t
	}
	if f, ok, err := o.Str("file", false); err != nil {
		return nil, err
	} else if ok {
		n++
		if f == "" {
			return nil, sj.Errorf(sj.Join(path, "file"), "empty; name a file in the worktree")
		}
		b.File = f
	}
	if n != 1 {
		return nil, sj.Errorf(path, "want exactly one of json, text, file")
	}
	if b.ContentType, _, err = o.Str("contentType", false); err != nil {
		return nil, err
	}
	if o.Has("contentType") && b.JSON != nil {
		return nil, sj.Errorf(sj.Join(path, "contentType"), "a json body is sent as application/json; set a content-type header to send another type")
	}
	if o.Has("contentType") && (b.ContentType == "" || strings.ContainsAny(b.ContentType, "\r\n\x00")) {
		return nil, sj.Errorf(sj.Join(path, "contentType"), "want a media type")
	}
	return b, nil
}

func decodeCommand(path string, raw json.RawMessage) (*Command, error) {
	o, err := sj.DecodeObject(path, raw, "argv", "env", "dir", "pin", "maxOutputBytes")
	if err != nil {
		return nil, err
	}
	c := &Command{}
	argv, _, err := o.Raw("argv")
	if err == nil && argv == nil {
		err = sj.Errorf(sj.Join(path, "argv"), "required")
	}
	if err != nil {
		return nil, err
	}
	if c.Argv, err = sj.Strings(sj.Join(path, "argv"), argv); err != nil {
		return nil, err
	}
	if len(c.Argv) == 0 {
		return nil, sj.Errorf(sj.Join(path, "argv"), "required: at least the program")
	}
	for i, a := range c.Argv {
		if strings.IndexByte(a, 0) >= 0 {
			return nil, sj.Errorf(sj.Index(sj.Join(path, "argv"), i), "holds a NUL byte")
		}
	}
	if c.Argv[0] == "" {
		return nil, sj.Errorf(sj.Index(sj.Join(path, "argv"), 0), "empty; name the program")
	}
	if v, ok, err := o.Raw("env"); err != nil {
		return nil, err
	} else if ok {
		names, vals, err := sj.Members(sj.Join(path, "env"), v)
		if err != nil {
			return nil, err
		}
		c.Env = make(map[string]Value, len(names))
		for _, name := range names {
			p := sj.Join(sj.Join(path, "env"), name)
			if !validEnvName(name) {
				return nil, sj.Errorf(sj.Join(path, "env"), "%s is not an environment name", sj.Quote(name))
			}
			elems, err := sj.Array(p, vals[name])
			if err != nil {
				return nil, err
			}
			if c.Env[name], err = decodeValue(p, elems, true); err != nil {
				return nil, err
			}
		}
	}
	if c.Dir, _, err = o.Str("dir", false); err != nil {
		return nil, err
	}
	if c.Pin, _, err = o.Str("pin", false); err != nil {
		return nil, err
	}
	if c.MaxOutputBytes, _, err = o.Int("maxOutputBytes", false, 1, MaxMaxOutputBytes); err != nil {
		return nil, err
	}
	return c, nil
}

// Secrets lists every secret name the start names, each once, sorted.
func (s *Start) Secrets() []string {
	if s.HTTP != nil {
		return s.HTTP.Secrets()
	}
	if s.Command != nil {
		var vs []Value
		for _, v := range s.Command.Env {
			vs = append(vs, v)
		}
		return names(vs, "")
	}
	return nil
}

// Secrets lists every secret name the http effect names — in its url, its
// headers and its auth — each once, sorted.
func (h *HTTP) Secrets() []string {
	vs := []Value{h.URL}
	for _, v := range h.Headers {
		vs = append(vs, v)
	}
	auth := ""
	if h.Auth != nil {
		auth = h.Auth.Secret
	}
	return names(vs, auth)
}

// names is the sorted set of the secrets the values name, and extra.
func names(vs []Value, extra string) []string {
	set := map[string]bool{}
	if extra != "" {
		set[extra] = true
	}
	for _, v := range vs {
		for _, n := range v.Secrets() {
			set[n] = true
		}
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
