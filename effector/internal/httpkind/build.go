package httpkind

import (
	"encoding/base64"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"jr2.dev/boundary/effector/internal/wire"
	sj "jr2.dev/boundary/internal/strictjson"
)

// Values looks up a held secret's value by name.
type Values func(name string) ([]byte, bool)

// built is a request as the Effector will send it, or the reason it will
// not: a refusal is an outcome (the agent's parameters can cause it), not a
// malformed start.
type built struct {
	url     *url.URL
	header  map[string]string // canonical name → value
	refused string
	// forms maps a secret's name to what was built from its value.
	forms map[string][][]byte
	// shown is the url as the agent asked for it: each secret's part as
	// its label, for the receipts and the mode's canonical form.
	shown string
}

// refuse keeps the first reason the request will not be sent.
func (b *built) refuse(reason string) {
	if b.refused == "" {
		b.refused = reason
	}
}

func (b *built) add(name string, s string) {
	if b.forms == nil {
		b.forms = map[string][][]byte{}
	}
	b.forms[name] = append(b.forms[name], []byte(s))
}

// escapeSegment percent-encodes s as one path segment: every byte but the
// RFC 3986 unreserved characters (A-Z a-z 0-9 - . _ ~) becomes %XX, upper
// case.
func escapeSegment(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// joinURL joins the url's parts, a secret as one encoded path segment.
func joinURL(parts wire.Value, values Values) (string, error) {
	raw, _, missing := joinParts(parts, values, func(v []byte) string { return escapeSegment(string(v)) })
	if missing >= 0 {
		return "", sj.Errorf(sj.Index("http.url", missing), "%s: this Effector holds no such secret", sj.Quote(parts[missing].Value))
	}
	return raw, nil
}

// appendSegments appends the path segments, each percent-encoded, after
// raw's path and before its query; the path's one trailing '/' is the
// joint. A segment that is ".", ".." or empty is refused, with the reason.
func appendSegments(raw string, segs []string) (string, string) {
	if len(segs) == 0 {
		return raw, ""
	}
	for i, s := range segs {
		if s == "" || s == "." || s == ".." {
			return "", fmt.Sprintf("path[%d]: %s is not a path segment an effect may send", i, sj.Quote(s))
		}
	}
	cut := len(raw)
	if i := strings.IndexAny(raw, "?#"); i >= 0 {
		cut = i
	}
	head, tail := raw[:cut], raw[cut:]
	if !strings.HasSuffix(head, "/") {
		head += "/"
	}
	enc := make([]string, len(segs))
	for i, s := range segs {
		enc[i] = escapeSegment(s)
	}
	return head + strings.Join(enc, "/") + tail, ""
}

// parseTarget parses the built url and checks what a malformed
// definition would get wrong.
func parseTarget(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, sj.Errorf("http.url", "not a url (%s)", parseReason(err))
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return nil, sj.Errorf("http.url", "the scheme must be https or http")
	}
	if u.Opaque != "" || u.Host == "" || u.Hostname() == "" {
		return nil, sj.Errorf("http.url", "name the host: scheme://host/path")
	}
	if u.User != nil {
		return nil, sj.Errorf("http.url", "credentials in the url are not allowed; use auth")
	}
	// The path is sent as written, or not at all: where Go would re-encode
	// it (a space, a non-ASCII byte), it would also decode an encoded '/'
	// of a segment into a path separator.
	if written := writtenPath(raw); written != "" && written != u.EscapedPath() {
		return nil, sj.Errorf("http.url", "the path holds a character that must be percent-encoded; write it encoded")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, sj.Errorf("http.url", "the port must be 1 to 65535")
		}
	}
	return u, nil
}

// writtenPath is the path of a url as its text spells it: after the
// authority, before any '?' or '#'.
func writtenPath(raw string) string {
	rest := raw
	if i := strings.Index(rest, "://"); i >= 0 {
		rest = rest[i+3:]
	}
	if i := strings.IndexAny(rest, "?#"); i >= 0 {
		rest = rest[:i]
	}
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		return rest[i:]
	}
	return ""
}

// parseReason is url.Parse's complaint without the url it quotes.
func parseReason(err error) string {
	if ue, ok := err.(*url.Error); ok {
		err = ue.Err
	}
	s := err.Error()
	if i := strings.Index(s, ":"); i >= 0 {
		s = s[:i]
	}
	return s
}

// port is u's port, or the scheme's.
func port(u *url.URL) int {
	if p := u.Port(); p != "" {
		n, _ := strconv.Atoi(p)
		return n
	}
	if u.Scheme == "http" {
		return 80
	}
	return 443
}

// hostKey is how a url's host is compared with a target's: lower case,
// no brackets.
func hostKey(u *url.URL) string { return strings.ToLower(u.Hostname()) }

// joinParts joins a value's parts, each secret's value through enc, and
// lists the secrets it named. missing is the index of a part naming a
// secret that is not held, or -1.
func joinParts(v wire.Value, values Values, enc func([]byte) string) (joined string, names []string, missing int) {
	var b strings.Builder
	for i, p := range v {
		if p.Kind == wire.PartText {
			b.WriteString(p.Value)
			continue
		}
		val, ok := values(p.Value)
		if !ok {
			return "", nil, i
		}
		b.WriteString(enc(val))
		names = append(names, p.Value)
	}
	return b.String(), names, -1
}

// validHeaderValue reports whether s can be sent as a header value: no
// control byte but tab.
func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// authorization is the Authorization value auth builds from v, and the
// Basic pair when there is one.
func authorization(a *wire.Auth, v []byte) (value, pair string) {
	switch a.Type {
	case wire.AuthBearer:
		return "Bearer " + string(v), ""
	case wire.AuthBasic:
		pair = a.User + ":" + string(v)
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(pair)), pair
	}
	return string(v), ""
}

// hostPort renders a target for a reason.
func hostPort(scheme, host string, port int) string {
	return scheme + "://" + net.JoinHostPort(host, strconv.Itoa(port))
}
