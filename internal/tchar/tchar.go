// Package tchar is the one check of an HTTP token (RFC 9110 section 5.6.2):
// one or more tchar, the characters of a method, a header name or an auth
// scheme. Every reader of such a word asks it here; a caller that wants
// less (lowercase only, no '_', a bound on the length) says so beside the
// call.
package tchar

// table marks the tchar bytes: ALPHA, DIGIT and "!#$%&'*+-.^_`|~".
var table = func() (t [256]bool) {
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()

// Is reports whether c is a tchar.
func Is(c byte) bool { return table[c] }

// Token reports whether s is a token: not empty, and every byte a tchar.
func Token(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !table[s[i]] {
			return false
		}
	}
	return true
}
