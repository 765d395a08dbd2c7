// Package logline formats the log contract's lines: a fixed prefix
// (jr2.custodian, jr2.effector) followed by key=value pairs, one line per
// event.
//
// Invariant: a line carries only the words a caller passes as values, and
// every value is reduced to a safe token (no space, quote, control byte or
// '=' survives), so one agent-controlled field can never forge a second pair
// or a second line. What may be passed is the caller's contract: never a
// secret value, a stand-in, a path, a query, a header value or a body.
//
// A Writer writes whole lines only, in the order they were logged. A
// buffered Writer (NewBufferedWriter, for a host's per-request lines) keeps
// them for at most its interval and writes what waits in one Write, as
// Envoy's access log does; an Event line, and Flush, write at once, and
// its owner calls Close before it exits, so no line is lost on a graceful
// stop (only a crash loses the last interval's lines).
package logline

import (
	"io"
	"strings"
	"sync"
	"time"
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
	n := len(prefix) + len(kv) // a space or '=' before each field
	for _, f := range kv {
		n += max(len(f), 1) // token keeps the length; "" becomes "-"
	}
	b.Grow(n + 2) // a key without its value gets "=-"
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

// Writer writes whole lines to an io.Writer, safe for concurrent use:
// one Write per line, or, buffered, one Write per batch of whole lines.
type Writer struct {
	mu     sync.Mutex
	w      io.Writer
	prefix string
	buf    []byte        // lines not yet written (buffered), or the line being written
	every  time.Duration // 0: unbuffered
	timer  *time.Timer   // flushes buf, armed while buf holds a line
	armed  bool
}

// flushAt is how many waiting bytes a buffered Writer writes at once,
// whatever its interval.
const flushAt = 32 << 10

// NewWriter returns a Writer that writes prefix-ed lines to w, each line
// in one Write as it is logged.
func NewWriter(w io.Writer, prefix string) *Writer {
	return &Writer{w: w, prefix: prefix}
}

// NewBufferedWriter returns a Writer that gathers the lines Log writes and
// writes them in one Write at most every interval after the first one
// waiting (at once past 32 KiB). Event lines are written at once, after
// what waits. The owner calls Close before it exits.
func NewBufferedWriter(w io.Writer, prefix string, every time.Duration) *Writer {
	if every <= 0 {
		return NewWriter(w, prefix)
	}
	return &Writer{w: w, prefix: prefix, every: every}
}

// Event writes one line that starts with a bare event word, as Event, and
// whatever lines wait before it.
func (l *Writer) Event(word string, kv ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = appendLine(l.buf, l.prefix+" "+token(word), kv)
	l.flushLocked()
}

// Log writes one line. Errors of the underlying writer are dropped: a log
// that cannot be written must not stop a decision.
func (l *Writer) Log(kv ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = appendLine(l.buf, l.prefix, kv)
	switch {
	case l.every == 0 || len(l.buf) >= flushAt:
		l.flushLocked()
	case !l.armed:
		l.armed = true
		if l.timer == nil {
			l.timer = time.AfterFunc(l.every, l.Flush)
		} else {
			l.timer.Reset(l.every)
		}
	}
}

// Close writes the lines that wait and makes l unbuffered: a line logged
// after it (a handler still finishing after a stop) is written at once.
func (l *Writer) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.flushLocked()
	l.every = 0
}

// Flush writes the lines that wait, if any.
func (l *Writer) Flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.flushLocked()
}

func (l *Writer) flushLocked() {
	if len(l.buf) > 0 {
		_, _ = l.w.Write(l.buf)
	}
	l.buf = l.buf[:0]
	if cap(l.buf) > 2*flushAt {
		l.buf = nil // one burst does not pin a large buffer
	}
	if l.armed {
		l.armed = false
		l.timer.Stop()
	}
}

// appendLine appends prefix and the pairs, as Format renders them, and a
// newline.
func appendLine(dst []byte, prefix string, kv []string) []byte {
	return append(AppendFormat(dst, prefix, kv...), '\n')
}

// AppendFormat appends the line Format renders to dst: a host that keeps
// its buffer writes a line without allocating.
func AppendFormat(dst []byte, prefix string, kv ...string) []byte {
	dst = append(dst, prefix...)
	for i := 0; i < len(kv); i += 2 {
		dst = append(dst, ' ')
		dst = appendToken(dst, kv[i])
		dst = append(dst, '=')
		if i+1 < len(kv) {
			dst = appendToken(dst, kv[i+1])
		} else {
			dst = append(dst, '-')
		}
	}
	return dst
}

// appendToken appends token(s) without building it.
func appendToken(dst []byte, s string) []byte {
	if s == "" {
		return append(dst, '-')
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; safe(c) {
			dst = append(dst, c)
		} else {
			dst = append(dst, '_')
		}
	}
	return dst
}
