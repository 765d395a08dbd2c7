package wire

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strconv"
	"strings"
	"time"
)

// Header names of the signed wire.
const (
	HeaderTime      = "X-Jr2-Time"
	HeaderNonce     = "X-Jr2-Nonce"
	HeaderSignature = "X-Jr2-Signature"
)

// Window is how far a request's time may be from the replica's clock.
const Window = 5 * time.Minute

// BodySHA256 is the lowercase hex SHA-256 of a body, as the signing lines
// carry it.
func BodySHA256(body []byte) string {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])
}

// RequestLines is S, what a request's signature covers: the lines joined
// by "\n", no trailing newline. address is the replica's POD_IP:port,
// target the request target as sent (path and ?query), timeMs the
// X-Jr2-Time header as sent.
func RequestLines(method, address, target, timeMs, nonce string, body []byte) string {
	return strings.Join([]string{"jr2-effector-request", method, address, target, timeMs, nonce, BodySHA256(body)}, "\n")
}

// ResponseLines is R, what an answer's signature covers.
func ResponseLines(status int, method, target, nonce string, body []byte) string {
	return strings.Join([]string{"jr2-effector-response", strconv.Itoa(status), method, target, nonce, BodySHA256(body)}, "\n")
}

// Sign is the unpadded base64url HMAC-SHA256 of lines under key.
func Sign(key []byte, lines string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(lines))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// Verify reports whether sig is Sign(key, lines), compared in constant
// time. Only the unpadded base64url spelling is accepted.
func Verify(key []byte, lines, sig string) bool {
	got, err := base64.RawURLEncoding.Strict().DecodeString(sig)
	if err != nil || len(got) != sha256.Size {
		return false
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(lines))
	return hmac.Equal(got, m.Sum(nil))
}

// ParseTime reads X-Jr2-Time: Unix milliseconds in canonical decimal (no
// sign, no leading zero, at most 16 digits).
func ParseTime(s string) (int64, bool) {
	if s == "" || len(s) > 16 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// ValidNonce reports whether s is 1–64 of [A-Za-z0-9_-].
func ValidNonce(s string) bool { return validWord(s, 64, false) }

// ValidID reports whether s is an effect id: 1–128 of [A-Za-z0-9._-].
func ValidID(s string) bool { return validWord(s, 128, true) }

func validWord(s string, most int, dot bool) bool {
	if s == "" || len(s) > most {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '_', c == '-':
		case c == '.' && dot:
		default:
			return false
		}
	}
	return true
}
