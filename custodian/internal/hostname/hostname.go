// Package hostname holds the one rule for what a host name is in a contained
// run, shared by the policy loader, the DNS message parser and the SNI parser,
// so that a name one of them accepts is a name the others accept.
//
// Invariant: Check returns nil only for a lowercase name of 1 to 253 bytes,
// made of dot-separated labels of 1 to 63 bytes drawn from a-z, 0-9, '-' and
// '_', no label starting or ending with '-', and a final label that is not all
// digits (such a name reads as an IPv4 spelling, "127.1" or "2130706433").
// No trailing dot: the root is implied. A name that passes cannot carry a
// space, a quote, a control byte, '=' or '%', so it is safe in a log line and
// a record as it is.
//
// The underscore is accepted because real DNS names carry it (_dmarc, service
// labels, some CDN hosts); refusing it would only turn such queries into
// errors without making anything safer.
package hostname

import (
	"errors"
	"strings"
)

// Limits of a name in text form (RFC 1035 §2.3.4: 255 bytes on the wire is
// 253 characters of text without the trailing dot).
const (
	MaxName  = 253
	MaxLabel = 63
)

// Reasons Check gives. They carry none of the name: callers may log them.
var (
	ErrEmpty        = errors.New("empty name")
	ErrTooLong      = errors.New("name longer than 253 bytes")
	ErrEmptyLabel   = errors.New("empty label (a leading, trailing or doubled dot)")
	ErrLabelTooLong = errors.New("label longer than 63 bytes")
	ErrByte         = errors.New("byte not allowed in a host name (a-z, 0-9, '-', '_')")
	ErrHyphen       = errors.New("label starts or ends with '-'")
	ErrNumeric      = errors.New("final label is all digits, which reads as an IP address")
)

// Lower returns s with ASCII A-Z folded to a-z; other bytes are kept, so
// Check still refuses them.
func Lower(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if b[j] >= 'A' && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

// Check reports why name is not a host name, or nil. It does not fold case:
// an uppercase byte is refused, so call Lower first where input may carry
// one.
func Check(name string) error {
	if name == "" {
		return ErrEmpty
	}
	if len(name) > MaxName {
		return ErrTooLong
	}
	start := 0
	for start <= len(name) {
		end := strings.IndexByte(name[start:], '.')
		if end < 0 {
			end = len(name)
		} else {
			end += start
		}
		if err := checkLabel(name[start:end], end == len(name)); err != nil {
			return err
		}
		start = end + 1
	}
	return nil
}

func checkLabel(l string, last bool) error {
	switch {
	case l == "":
		return ErrEmptyLabel
	case len(l) > MaxLabel:
		return ErrLabelTooLong
	case l[0] == '-' || l[len(l)-1] == '-':
		return ErrHyphen
	}
	digits := true
	for i := 0; i < len(l); i++ {
		c := l[i]
		switch {
		case c >= '0' && c <= '9':
		case c >= 'a' && c <= 'z', c == '-', c == '_':
			digits = false
		default:
			return ErrByte
		}
	}
	if last && digits {
		return ErrNumeric
	}
	return nil
}
