package filter

import (
	"bytes"
	"strings"
)

// splitRequestTarget cuts a request target into its path and its query
// (without the '?'); hasQuery tells an empty query from none.
func splitRequestTarget(t string) (path, query string, hasQuery bool) {
	if i := strings.IndexByte(t, '?'); i >= 0 {
		return t[:i], t[i+1:], true
	}
	return t, "", false
}

// encodedSeparator reports whether path holds %2f, %2e or %5c in any case:
// an encoded '/', '.' or '\' that a server behind the Custodian might read
// as the separator the path check did not see.
func encodedSeparator(path string) bool {
	for {
		i := strings.IndexByte(path, '%')
		if i < 0 || i+2 >= len(path) {
			return false
		}
		a, b := path[i+1], path[i+2]|0x20
		if a == '2' && (b == 'f' || b == 'e') || a == '5' && b == 'c' {
			return true
		}
		path = path[i+1:]
	}
}

// badEscape reports whether path holds a '%' that is not followed by two
// hex digits.
func badEscape(path string) bool {
	for {
		i := strings.IndexByte(path, '%')
		if i < 0 {
			return false
		}
		if i+2 >= len(path) {
			return true
		}
		if _, ok := unhex(path[i+1]); !ok {
			return true
		}
		if _, ok := unhex(path[i+2]); !ok {
			return true
		}
		path = path[i+3:]
	}
}

// NormalizePath is what the path check judges and what goes upstream: every
// '\' read as '/', a segment that is "." or ".." before a ';' (Tomcat's
// "..;jsessionid") read as that dot segment, and dot segments removed as
// RFC 3986 section 5.2.4 does. Empty segments are kept. path must start
// with '/'. A path that holds neither a '\' nor a dot segment is its own
// normal form and is returned as it is, without a copy.
func NormalizePath(path string) string {
	if isNormal(path) {
		return path
	}
	var buf [256]byte
	return string(appendNormal(buf[:0], path))
}

// appendNormal appends NormalizePath(path) to dst, building it in place:
// dst gets "/" and the kept segments joined by '/', a ".." taking back the
// last one.
func appendNormal(dst []byte, path string) []byte {
	base := len(dst)
	dst = append(dst, '/')
	kept, trail := 0, false
	rest := path[1:]
	for {
		end := strings.IndexAny(rest, `/\`)
		seg, last := rest, end < 0
		if !last {
			seg = rest[:end]
		}
		switch dotSegment(seg) {
		case ".":
			trail = last
		case "..":
			if kept > 0 {
				kept--
				// back to the '/' before the last kept segment, or to the
				// leading '/' when it was the only one
				i := bytes.LastIndexByte(dst[base+1:], '/')
				dst = dst[:base+1+max(i, 0)]
			}
			trail = last
		default:
			if kept > 0 {
				dst = append(dst, '/')
			}
			dst = append(dst, seg...)
			kept++
		}
		if last {
			break
		}
		rest = rest[end+1:]
	}
	if trail && kept > 0 {
		dst = append(dst, '/')
	}
	return dst
}

// isNormal reports whether path starts with '/' and holds no '\' and no
// segment that dotSegment reads as "." or "..": NormalizePath would
// rebuild it byte for byte. Every segment follows a '/', so only one
// after a "/." can be a dot segment.
func isNormal(path string) bool {
	if path == "" || path[0] != '/' || strings.IndexByte(path, '\\') >= 0 {
		return false
	}
	for i := strings.Index(path, "/."); i >= 0; {
		seg := path[i+1:]
		if end := strings.IndexByte(seg, '/'); end >= 0 {
			seg = seg[:end]
		}
		if d := dotSegment(seg); d == "." || d == ".." {
			return false
		}
		next := strings.Index(path[i+1:], "/.")
		if next < 0 {
			break
		}
		i += 1 + next
	}
	return true
}

// dotSegment returns "." or ".." when seg is that dot segment, alone or
// before a ';' parameter; otherwise seg.
func dotSegment(seg string) string {
	base := seg
	if i := strings.IndexByte(seg, ';'); i >= 0 {
		base = seg[:i]
	}
	if base == "." || base == ".." {
		return base
	}
	return seg
}

// pathAllowed reports whether the normalised path is under one of the
// prefixes. No prefixes allow every path. A prefix that ends in '/' matches
// by string; one that does not matches itself and what follows a '/' after
// it ("/v1" allows "/v1" and "/v1/x", never "/v1x").
func pathAllowed(path string, prefixes []string) bool {
	if len(prefixes) == 0 {
		return true
	}
	for _, p := range prefixes {
		if path == p || strings.HasPrefix(path, p) && (strings.HasSuffix(p, "/") || path[len(p)] == '/') {
			return true
		}
	}
	return false
}

// percentDecode decodes every valid %XX escape of s and leaves the rest
// as it is (a '+' stays a '+').
func percentDecode(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if h, ok1 := unhex(s[i+1]); ok1 {
				if l, ok2 := unhex(s[i+2]); ok2 {
					b = append(b, h<<4|l)
					i += 2
					continue
				}
			}
		}
		b = append(b, s[i])
	}
	return string(b)
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
