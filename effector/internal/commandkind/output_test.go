package commandkind

import (
	"strings"
	"testing"

	"jr2.dev/boundary/effector/internal/effect"
	"jr2.dev/boundary/filter/scrub"
)

func testScrubber(t testing.TB) *effect.Scrubber {
	t.Helper()
	sc, err := scrub.New([]scrub.Secret{{Name: "TOKEN", Value: []byte(sentinel)}, {Name: "OTHER", Value: []byte(other)}})
	if err != nil {
		t.Fatal(err)
	}
	return effect.Held(sc)
}

// feed writes s to a capture in chunks of n bytes.
func feed(c *capture, s string, n int) {
	for len(s) > 0 {
		k := min(n, len(s))
		c.Write([]byte(s[:k]))
		s = s[k:]
	}
}

// TestCaptureScrubsBeforeBounding: a value that straddles the bound is
// replaced whole before the cut, the cut never splits a label, and the
// result is the same however the output was chunked.
func TestCaptureScrubsBeforeBounding(t *testing.T) {
	label := "[secret:TOKEN]"
	cases := []struct {
		name      string
		out       string
		max       int
		want      string
		truncated bool
	}{
		{"fits", "a " + sentinel + " b", 100, "a " + label + " b", false},
		{"value straddles the bound", "0123456789" + sentinel + "tail", 14, "0123456789", true},
		{"label fits exactly", "0123456789" + sentinel + "tail", 10 + len(label), "0123456789" + label, true},
		{"a cut inside the raw value", "ab" + sentinel, 5, "ab", true},
		{"no secret, cut", strings.Repeat("x", 50), 20, strings.Repeat("x", 20), true},
		{"UTF-8 not split", "ab\u00e9\u00e9", 3, "ab", true},
		{"exactly the bound", strings.Repeat("y", 20), 20, strings.Repeat("y", 20), false},
	}
	for _, c := range cases {
		for _, chunk := range []int{1, 3, 7, 1 << 20} {
			cp := newCapture(testScrubber(t), c.max)
			feed(cp, c.out, chunk)
			got, cut := cp.result()
			if got != c.want || cut != c.truncated {
				t.Errorf("%s (chunks of %d): %q cut %v, want %q cut %v", c.name, chunk, got, cut, c.want, c.truncated)
			}
			if strings.Contains(got, sentinel) || strings.Contains(got, sentinel[:8]) {
				t.Errorf("%s (chunks of %d): a part of the value is left: %q", c.name, chunk, got)
			}
		}
	}
}

// TestCaptureDropsPastTheBound: output far past the bound is read and
// dropped; what is kept stays near the bound.
func TestCaptureDropsPastTheBound(t *testing.T) {
	cp := newCapture(testScrubber(t), 1000)
	chunk := []byte(strings.Repeat("z", 4096))
	for range 1000 {
		cp.Write(chunk)
	}
	if len(cp.raw) > 1000+len(chunk) {
		t.Errorf("kept %d raw bytes for a bound of 1000", len(cp.raw))
	}
	got, cut := cp.result()
	if len(got) != 1000 || !cut {
		t.Errorf("result %d bytes, cut %v", len(got), cut)
	}
}
