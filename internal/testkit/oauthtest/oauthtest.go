// Package oauthtest is what the tests' own token endpoints share: the
// check of a JWT bearer assertion (RFC 7523) as Google's endpoint makes
// it, so that the engine's and the e2e suite's endpoints verify the same.
//
// Invariant: test code only; nothing outside _test.go files imports it.
package oauthtest

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
)

// Assertion reports whether a is a JWT whose RS256 signature pub verifies
// and whose iss, aud and scope claims are the ones given.
func Assertion(a string, pub *rsa.PublicKey, iss, aud, scope string) bool {
	parts := strings.Split(a, ".")
	if pub == nil || len(parts) != 3 {
		return false
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return false
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], sig) != nil {
		return false
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	var c struct{ Iss, Aud, Scope string }
	return err == nil && json.Unmarshal(raw, &c) == nil && c.Iss == iss && c.Aud == aud && c.Scope == scope
}
