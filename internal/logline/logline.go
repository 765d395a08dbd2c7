// Package logline formats the log contract's lines: a fixed prefix
// (jr2.custodian, jr2.effector) followed by key=value pairs, one line per
// event.
//
// Invariant: a line carries only the words a caller passes as values, and
// every value is reduced to a safe token (no space, quote, control byte or
// '=' survives), so one agent-controlled field can never forge a second pair
// or a second line. What may be passed is the caller's contract: never a
// secret value, a stand-in, a path, a query, a header value or a body.
package logline

import (
	"io"
	"strings"
	"sync"
)

// Prefixes of the two log contracts.
const (
	Custodian = "jr2.custodian"
	Effector  = "jr2.effector"
)

// Format renders prefix and the pairs kv[0]=kv[1], kv[2]=kv[3], …
// An odd trailing key is rendered with the value "-". An empty value is
// rendered as "-".
func Format(prefix string, kv ...string) string {
	var b strings.Builder
	b.WriteString(prefix)
	for i := 0; i < len(kv); i += 2 {
		b.WriteByte(' ')
		b.WriteString(token(kv[i]))
		b.WriteByte('=')
		if i+1 < len(kv) {
			b.WriteString(token(kv[i+1]))
		} else {
			b.WriteString("-")
		}
	}
	return b.String()
}

// Event renders prefix, a bare event word (such as "ready"), then the pairs
// as Format does.
func Event(prefix, word string, kv ...string) string {
	return Format(prefix+" "+token(word), kv...)
}

// token keeps the bytes of s that are printable ASCII other than space,
// '"' and '='; every other byte becomes '_'. An empty s becomes "-".
func token(s string) string {
	if s == "" {
		return "-"
	}
	clean := true
	for i := 0; i < len(s); i++ {
		if !safe(s[i]) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	b := []byte(s)
	for i := range b {
		if !safe(b[i]) {
			b[i] = '_'
		}
	}
	return string(b)
}

func safe(c byte) bool {
	return c > ' ' && c < 0x7f && c != '"' && c != '='
}

// Writer writes whole lines to an io.Writer, one Write per line, safe for
// concurrent use.
type Writer struct {
	mu     sync.Mutex
	w      io.Writer
	prefix string
}

// NewWriter returns a Writer that writes prefix-ed lines to w.
func NewWriter(w io.Writer, prefix string) *Writer {
	return &Writer{w: w, prefix: prefix}
}

// Event writes one line that starts with a bare event word, as Event.
func (l *Writer) Event(word string, kv ...string) {
	l.write(Event(l.prefix, word, kv...))
}

// Log writes one line. Errors of the underlying writer are dropped: a log
// that cannot be written must not stop a decision.
func (l *Writer) Log(kv ...string) {
	l.write(Format(l.prefix, kv...))
}

func (l *Writer) write(line string) {
	line += "\n"
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = io.WriteString(l.w, line)
}
