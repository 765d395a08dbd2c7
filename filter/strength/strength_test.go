package strength

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Weak values: each is refused. The first rows are the oracle an
// adversarial pass used (an 8-digit number: the scrubber showed which
// guess was the value) and the shapes a human or a test fixture picks.
func TestCheckRefusesWeakValues(t *testing.T) {
	for _, c := range []struct{ name, v string }{
		{"8-digit number", "48213976"},
		{"8-digit run", "12345678"},
		{"20-digit run", "01234567890123456789"},
		{"long number", "3141592653589793"},
		{"short word", "s3cr3t-pw"},
		{"one character repeated", strings.Repeat("a", 200)},
		{"a word repeated", strings.Repeat("hunter2", 10)},
		{"a token repeated", strings.Repeat("Xk9#", 40)},
		{"alphabet", "abcdefghijklmnopqrstuvwxyz"},
		{"alphabet backwards", "ZYXWVUTSRQPONMLKJIHGFEDCBA9876543210"},
		{"12 hex", "9f3ac2e8b1d4"},
		{"hex run repeated", "0123456789abcdef0123456789abcdef"},
		{"10 letters and digits", "aZ3kQ9mX2p"},
		{"spaces", "                                        "},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := Check([]byte(c.v)); err != ErrWeak {
				t.Fatalf("Check = %v (Bits %.1f), want ErrWeak", err, Bits([]byte(c.v)))
			}
		})
	}
}

// Strong values: real credential shapes, drawn at random, always pass.
func TestCheckAcceptsGeneratedCredentials(t *testing.T) {
	alnum := "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	draw := func(n int, set string) string {
		b := make([]byte, n)
		rand.Read(b)
		for i := range b {
			b[i] = set[int(b[i])%len(set)]
		}
		return string(b)
	}
	randBytes := func(n int) []byte {
		b := make([]byte, n)
		rand.Read(b)
		return b
	}
	for _, c := range []struct {
		name string
		gen  func() string
	}{
		{"anthropic key", func() string {
			return "sk-ant-api03-" + base64.RawURLEncoding.EncodeToString(randBytes(70))
		}},
		{"github PAT", func() string { return "ghp_" + draw(36, alnum) }},
		{"24 letters and digits (the fix's advice)", func() string { return draw(24, alnum) }},
		{"32 hex (128 bits)", func() string { return hex.EncodeToString(randBytes(16)) }},
		{"uuid", func() string {
			h := hex.EncodeToString(randBytes(16))
			return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
		}},
		{"40 digits", func() string { return draw(40, "0123456789") }},
		{"demo value", func() string { return "sk-demo-" + hex.EncodeToString(randBytes(16)) }},
		{"binary key", func() string { return string(randBytes(32)) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			for range 500 {
				v := c.gen()
				if err := Check([]byte(v)); err != nil {
					t.Fatalf("Check(%q) = %v (Bits %.1f), want nil", v, err, Bits([]byte(v)))
				}
			}
		})
	}
}

// The estimate, pinned on values whose arithmetic is easy to follow.
func TestBits(t *testing.T) {
	l := math.Log2
	for _, c := range []struct {
		v    string
		want float64
	}{
		{"", 0},
		{"7", l(10)},
		{"9a", l(16) * 2},           // hex: digits and a-f
		{"9z", l(30) * 2},           // digits and g-z
		{"Az", l(26) * 2},           // A-F and g-z
		{"a!", l(39) * 2},           // a-f and symbols
		{"1357", l(10) * 4},         // no steps of one
		{"1234", l(10) + l(3)},      // a run: one free, one step, the same step twice
		{"4321", l(10) + l(3)},      // a run backwards
		{"34332", l(10) + 4*l(3)},   // four steps, each a new one
		{"12a34", 3*l(16) + 2*l(3)}, // two runs
		{"1111", l(10)},             // period 1
		{"13571357135", l(10) * 4},  // period 4, last copy cut
		{"1a1b", l(16) * 4},         // no period, no steps
		{"\x00\xff", l(161) * 2},    // other bytes
		{"\x00\x01", l(161) + l(3)}, // other bytes, a step
		{"9:", l(43) + l(3)},        // a step across classes
		{strings.Repeat("x", 99) + "y", l(20) + 2*l(3)},        // no period; x to x, then the same, then x to y
		{"zz9zz9zz9zz9zz9zz9zz9zz9zz9z", l(30) + l(3) + l(30)}, // period 3: "zz9"
	} {
		if got := Bits([]byte(c.v)); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("Bits(%q) = %.4f, want %.4f", c.v, got, c.want)
		}
	}
}

// The refusal says why and what to do, and is the same text whatever the
// value: it cannot carry a byte of it, its length or its estimate.
func TestErrWeakHoldsNothingOfTheValue(t *testing.T) {
	msg := ErrWeak.Error()
	for _, want := range []string{"too easy to guess", "2^64", "generated credential", "restart"} {
		if !strings.Contains(msg, want) {
			t.Errorf("ErrWeak %q does not say %q", msg, want)
		}
	}
	for _, v := range []string{"48213976", "SENTINEL-1", strings.Repeat("ab", 30)} {
		err := Check([]byte(v))
		if err != ErrWeak {
			t.Fatalf("Check(%q) = %v, want ErrWeak", v, err)
		}
		if strings.Contains(err.Error(), v) {
			t.Fatalf("the refusal holds the value %q", v)
		}
	}
}

func naivePeriod(v []byte) int {
	for p := 1; p <= len(v); p++ {
		ok := true
		for i := p; i < len(v); i++ {
			if v[i] != v[i-p] {
				ok = false
				break
			}
		}
		if ok {
			return p
		}
	}
	return 0
}

// raw is the estimate with no discount: len(v)·log2(alphabet(v)).
func raw(v []byte) float64 {
	if len(v) == 0 {
		return 0
	}
	return float64(len(v)) * math.Log2(float64(alphabet(v)))
}

// FuzzBits: the period is the shortest; a discount never adds (Bits is at
// most the undiscounted count); repeating a value adds nothing beyond one
// copy; and Check agrees with Bits.
func FuzzBits(f *testing.F) {
	for _, s := range []string{"", "a", "12345678", "abcabcab", "sk-ant-SENTINEL-value-0123456789", "\x00\x01\xff", "aaaaaaaab"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		if len(v) > 4096 {
			return
		}
		if got, want := period(v), naivePeriod(v); got != want {
			t.Fatalf("period(%q) = %d, want %d", v, got, want)
		}
		b := Bits(v)
		if b < 0 || b > raw(v)+1e-9 {
			t.Fatalf("Bits(%q) = %f, outside [0, %f]", v, b, raw(v))
		}
		if twice := Bits(bytes.Repeat(v, 2)); twice > raw(v)+1e-9 {
			t.Fatalf("Bits(%q twice) = %f, more than one copy's %f", v, twice, raw(v))
		}
		if (Check(v) == nil) != (b >= FloorBits) {
			t.Fatalf("Check(%q) = %v with Bits %f", v, Check(v), b)
		}
	})
}

// docs/scrub.md states the floor the code enforces.
func TestDocsStateTheFloor(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "scrub.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), fmt.Sprintf("floor of 2^%d candidates", FloorBits)) {
		t.Errorf("docs/scrub.md does not state the floor 2^%d", FloorBits)
	}
}
