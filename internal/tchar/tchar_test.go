package tchar

import (
	"regexp"
	"testing"
)

// rfc9110 is the grammar as the RFC writes it: token = 1*tchar.
var rfc9110 = regexp.MustCompile("^[!#$%&'*+\\-.^_`|~0-9A-Za-z]+$")

// TestEveryByte: each of the 256 bytes is a tchar exactly when the RFC's
// grammar says so, alone and inside a word.
func TestEveryByte(t *testing.T) {
	for c := 0; c < 256; c++ {
		s := string([]byte{byte(c)})
		if Is(byte(c)) != rfc9110.MatchString(s) || Token(s) != rfc9110.MatchString(s) {
			t.Errorf("byte %#x: Is %v, Token %v, grammar %v", c, Is(byte(c)), Token(s), rfc9110.MatchString(s))
		}
		w := "Bearer" + s + "x"
		if Token(w) != rfc9110.MatchString(w) {
			t.Errorf("%q: Token %v, grammar %v", w, Token(w), rfc9110.MatchString(w))
		}
	}
	for _, s := range []string{"", " ", "a b", "é", "GET\r\n"} {
		if Token(s) {
			t.Errorf("Token(%q) is true", s)
		}
	}
}

// FuzzToken holds Token to the grammar on any input.
func FuzzToken(f *testing.F) {
	for _, s := range []string{"GET", "x-api-key", "a_b", "", "a:b", "jr2-held-X"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if Token(s) != rfc9110.MatchString(s) {
			t.Fatalf("Token(%q) = %v, the grammar says %v", s, Token(s), rfc9110.MatchString(s))
		}
	})
}
