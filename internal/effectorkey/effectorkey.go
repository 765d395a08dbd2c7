// Package effectorkey derives an Effector placement's key from the
// instance's signing key: key = HMAC-SHA256(signingKey, "effector:" +
// placement).
//
// Invariant: the signing key and the derived key are returned to the caller
// only; nothing here logs, prints or stores either.
package effectorkey

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
)

// Derive returns HMAC-SHA256(signingKey, "effector:"+placement).
func Derive(signingKey []byte, placement string) []byte {
	m := hmac.New(sha256.New, signingKey)
	m.Write([]byte("effector:" + placement))
	return m.Sum(nil)
}

// Hex is Derive as 64 lowercase hex characters, the form the Effector reads
// from JR2_EFFECTOR_KEY.
func Hex(signingKey []byte, placement string) string {
	return hex.EncodeToString(Derive(signingKey, placement))
}

// TrimNewline takes one trailing "\n" or "\r\n" off b, as every secret file
// of the project is read.
func TrimNewline(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
		if n := len(b); n > 0 && b[n-1] == '\r' {
			b = b[:n-1]
		}
	}
	return b
}

// ReadSigningKey reads a signing-key file: its bytes with one trailing
// newline taken off. An empty key is refused.
func ReadSigningKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	b = TrimNewline(b)
	if len(b) == 0 {
		return nil, errors.New("signing key: the file is empty; write the instance's signing key into it")
	}
	return b, nil
}

// ParseHexKey decodes a placement key file's contents: 64 lowercase hex
// characters, one trailing newline allowed.
func ParseHexKey(b []byte) ([]byte, error) {
	s := string(TrimNewline(b))
	if len(s) != 64 || strings.ToLower(s) != s {
		return nil, errors.New("placement key: want 64 lowercase hex characters (controlplane key prints it)")
	}
	k, err := hex.DecodeString(s)
	if err != nil {
		return nil, errors.New("placement key: want 64 lowercase hex characters (controlplane key prints it)")
	}
	return k, nil
}
