package contract

import (
	"errors"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// Limits of a host name in text form (RFC 1035 §2.3.4: 255 bytes on the
// wire is 253 characters of text without the trailing dot).
const (
	MaxName  = 253
	MaxLabel = 63
)

// Reasons CheckName and CheckHost give. They carry none of the name:
// callers may log them.
var (
	ErrEmpty        = errors.New("empty name")
	ErrTooLong      = errors.New("name longer than 253 bytes")
	ErrEmptyLabel   = errors.New("empty label (a leading, trailing or doubled dot)")
	ErrLabelTooLong = errors.New("label longer than 63 bytes")
	ErrByte         = errors.New("byte not allowed in a host name (a-z, 0-9, '-', '_')")
	ErrHyphen       = errors.New("label starts or ends with '-'")
	ErrNumeric      = errors.New("final label is all digits, which reads as an IP address")
	ErrZone         = errors.New("an IP address with a zone names an interface, not a host")
	ErrSpelling     = errors.New("an IP address is written in its one form (IPv6 compressed, as netip writes it)")
)

// Lower returns s with ASCII A-Z folded to a-z; other bytes are kept, so
// CheckName still refuses them.
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

// CheckName reports why name is not a host name, or nil: lowercase, 1 to
// 253 bytes of dot-separated labels of 1 to 63 bytes drawn from a-z, 0-9,
// '-' and '_', no label starting or ending with '-', and a final label that
// is not all digits (such a name reads as an IPv4 spelling to a resolver,
// "127.1" or "2130706433", so it would name one host here and dial
// another). No trailing dot: callers trim it. It does not fold case: call
// Lower first where input may carry an uppercase byte.
//
// The underscore is a name's: real DNS names carry it (_dmarc, service
// labels, some CDN hosts). Where a codec in front of the engine refuses it
// (Envoy's in a CONNECT target), the engine says so at that place.
func CheckName(name string) error {
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

// IsIP reports whether h (a host, unbracketed) is an IP literal in the
// form CheckHost accepts.
func IsIP(h string) bool {
	a, err := netip.ParseAddr(h)
	return err == nil && a.Zone() == "" && a.String() == h
}

// CheckHost reports why h is not a host, or nil: a host name (CheckName),
// or an IP literal without a zone written as netip writes it (IPv4 dotted
// decimal with no leading zero, IPv6 unbracketed and compressed, in
// lowercase), so that each address has one spelling and a comparison of
// two hosts is a comparison of strings.
func CheckHost(h string) error {
	if a, err := netip.ParseAddr(h); err == nil {
		var buf [64]byte // on the stack: SplitTarget runs per request
		switch {
		case a.Zone() != "":
			return ErrZone
		case string(a.AppendTo(buf[:0])) != h:
			return ErrSpelling
		}
		return nil
	}
	if strings.Contains(h, ":") {
		return ErrByte
	}
	return CheckName(h)
}

// ErrNotAHost is SplitTarget's words for a host CheckHost refuses.
var ErrNotAHost = errors.New("not a host name or an IP address")

// SplitTarget reads a host:port target: the host lowercased without a
// trailing dot, held to CheckHost (an IPv6 host in brackets), an IP
// literal given back in its one spelling ("[::ffff:7f00:1]" is
// "::ffff:127.0.0.1"), as a name is given back in lowercase; the port a
// number from 1 to 65535 written as one (no sign, no leading zero). A
// config that must be written canonically compares JoinTarget's result
// with what it read.
func SplitTarget(t string) (host string, port int, err error) {
	h, p, err := net.SplitHostPort(t)
	if err != nil {
		return "", 0, errors.New("want host:port")
	}
	if h == "" {
		return "", 0, errors.New("the host is empty")
	}
	n, ok := PortNumber(p)
	if !ok {
		return "", 0, errors.New("the port must be a number from 1 to 65535")
	}
	h = Lower(strings.TrimSuffix(h, "."))
	if a, err := netip.ParseAddr(h); err == nil && a.Zone() == "" {
		var buf [64]byte
		if b := a.AppendTo(buf[:0]); string(b) != h {
			h = string(b) // the address's one spelling, as the case is folded
		}
		return h, n, nil
	}
	if CheckHost(h) != nil {
		return "", 0, ErrNotAHost
	}
	return h, n, nil
}

// PortNumber reads a port written as its number is (decimal digits, no
// sign, no leading zero), 1–65535.
func PortNumber(p string) (int, bool) {
	if p == "" || len(p) > 5 || p[0] == '0' {
		return 0, false
	}
	n := 0
	for i := 0; i < len(p); i++ {
		if p[i] < '0' || p[i] > '9' {
			return 0, false
		}
		n = n*10 + int(p[i]-'0')
	}
	return n, n <= 65535
}

// JoinTarget is the canonical spelling of a target: host:port, an IPv6 host
// in brackets.
func JoinTarget(host string, port int) string {
	return net.JoinHostPort(host, strconv.Itoa(port))
}

// UpstreamHost is the Host a bound target's upstream gets, whatever the
// agent spelled: the canonical host (an IPv6 host in brackets), with the
// port unless it is 443. Every host sends this one.
func UpstreamHost(target string) string {
	host, port, err := SplitTarget(target)
	if err != nil {
		return target
	}
	if port != 443 {
		return JoinTarget(host, port)
	}
	if strings.Contains(host, ":") {
		return "[" + host + "]"
	}
	return host
}
