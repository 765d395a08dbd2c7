// Package strength refuses a held value whose guess space is below a floor
// of 2^64 candidates (FloorBits), estimated from its length, character
// classes, repeats and runs (Bits).
//
// Why: the scrubber replaces every form of a held value in what the agent
// reads, so an agent that can make a bound upstream (or an effect's
// command) echo its guesses learns which one comes back as
// "[secret:NAME]": the scrubber is a membership oracle. The defence is at
// load (filter.LoadValues and filter.New, which the contained run's broker
// also goes through, and the Effector's config), because nothing earlier
// sees a value. docs/scrub.md ("The guess floor") is the contract.
//
// Invariant: nothing here holds, returns or formats a byte of a value; an
// error says why and what to do, never what the value is (not even its
// length or its estimate).
//
// Not covered: a value a human chose, or one with structure the model does
// not see. Words, names, keyboard walks ("qwerty"), dates and timestamps,
// l33t spellings and reused passwords are not discounted, so
// "Password2024!xyz" and "2024-01-31T12:00:00" pass. Use a generated
// credential.
package strength

import (
	"errors"
	"math"
)

// FloorBits is the fewest candidates, as a power of two, a held value's
// shape may leave an attacker. Measured on random draws, a generated value
// clears it reliably (fewer than 1 in 1,000 refused) from about 24 hex
// characters, 16 letters and digits, or 30 digits (digits step often: 3 in
// 10); a 32-hex 128-bit key always does. The refusal's fix asks for 24 or
// more random letters and digits (about 137 bits by this estimate). An
// 8-digit number is at most 27 bits.
const FloorBits = 64

// ErrWeak is the refusal of a value below the floor. Its text names the
// reason and the fix; the caller adds the secret's name.
var ErrWeak = errors.New("the value is too easy to guess: for its length and the kinds of characters it uses " +
	"(after discounting repeats and runs such as 1234 or aaaa) it is one of fewer than 2^64 candidates, " +
	"and an agent that can make a bound host echo its guesses learns which one the scrubber replaces; " +
	"write a generated credential (24 or more random letters and digits) and restart")

// Check returns ErrWeak when Bits(v) is below FloorBits, and nil otherwise.
func Check(v []byte) error {
	if Bits(v) < FloorBits {
		return ErrWeak
	}
	return nil
}

// Class sizes (see Bits, step 2).
const (
	sizeDigit  = 10
	sizeHex    = 6  // a-f, or A-F
	sizeLetter = 20 // g-z, or G-Z
	sizeSymbol = 33 // printable ASCII that is no letter or digit, space included
	sizeOther  = 256 - 95
)

var log2Step = math.Log2(3)

// Bits estimates log2 of the number of candidates for v: the size of a
// family of strings that holds v and that an attacker who knows v's length
// and the kinds of characters it uses can enumerate. An empty value is 0.
//
//  1. Period: when v is a shorter string u repeated (the last copy may be
//     cut short: "abcabcab"), only u counts — the attacker enumerates u and
//     the repetition is free.
//  2. Alphabet: N is the sum of the sizes of the character classes u uses:
//     digits 10; lower-case a-f 6 and g-z 20; upper-case A-F 6 and G-Z 20
//     (hex is told apart, so a hex string counts 16, not 36 or 62); the
//     other 33 printable ASCII characters, space included; and any other
//     byte 161.
//  3. Runs: a character that is the one before it, or the one before it
//     plus or minus one, is a step: it costs log2(3) bits (which of the
//     three), and nothing when it takes the same step as the character
//     before it ("aaaa", "123456", "fedcba" cost one free character and
//     one step). Every other character is free and costs log2(N).
//
// Bits is the sum over u's characters: the log2 of the size of the family
// of strings that have u's length, classes and pattern of free, step and
// same-step positions, repeated as v is. It is exact for that model, so a
// lower bound on the search only for an attacker who knows no more than
// the model says. It errs in the usual direction: the discounts charge a
// random token a few bits it did not lose, never the reverse.
func Bits(v []byte) float64 {
	u := v[:period(v)]
	n := alphabet(u)
	if n == 0 {
		return 0
	}
	free := math.Log2(float64(n)) // at least log2(6): a step is always a discount
	var bits float64
	for i := range u {
		switch {
		case i == 0 || !isStep(u[i-1], u[i]):
			bits += free
		case i >= 2 && isStep(u[i-2], u[i-1]) && int(u[i])-int(u[i-1]) == int(u[i-1])-int(u[i-2]):
			// the same step as the one before: free to an attacker who took it
		default:
			bits += log2Step
		}
	}
	return bits
}

// isStep reports whether c is prev, or prev plus or minus one.
func isStep(prev, c byte) bool {
	d := int(c) - int(prev)
	return d >= -1 && d <= 1
}

// period is the length of the shortest u such that v is u repeated, the
// last copy possibly cut short: len(v) less its longest proper border
// (Knuth–Morris–Pratt's failure function).
func period(v []byte) int {
	if len(v) == 0 {
		return 0
	}
	border := make([]int, len(v))
	k := 0
	for i := 1; i < len(v); i++ {
		for k > 0 && v[i] != v[k] {
			k = border[k-1]
		}
		if v[i] == v[k] {
			k++
		}
		border[i] = k
	}
	return len(v) - border[len(v)-1]
}

// alphabet is the sum of the sizes of the classes u's bytes fall in.
func alphabet(u []byte) int {
	var used [7]bool
	for _, c := range u {
		used[class(c)] = true
	}
	sizes := [7]int{sizeDigit, sizeHex, sizeLetter, sizeHex, sizeLetter, sizeSymbol, sizeOther}
	n := 0
	for i, ok := range used {
		if ok {
			n += sizes[i]
		}
	}
	return n
}

func class(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return 0
	case c >= 'a' && c <= 'f':
		return 1
	case c >= 'g' && c <= 'z':
		return 2
	case c >= 'A' && c <= 'F':
		return 3
	case c >= 'G' && c <= 'Z':
		return 4
	case c >= 0x20 && c <= 0x7e:
		return 5
	}
	return 6
}
