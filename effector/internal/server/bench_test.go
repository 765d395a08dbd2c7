package server

import (
	"bytes"
	"encoding/hex"
	"strconv"
	"testing"

	"jr2.dev/boundary/effector/internal/effect"
	"jr2.dev/boundary/filter/scrub"
)

// BenchmarkScrubberFor measures what an effect that names a secret costs
// at its start: the effect's scrubber over the held secrets' automaton
// (built once) and what the effect built, for 2 and 16 held secrets — a
// bearer value alone (covered by the held value's forms, which is
// remembered: no automaton of its own), and a bearer value, a filled
// header and the url three ways with the value escaped in the url (the
// path is its own automaton; the url differs per effect).
func BenchmarkScrubberFor(b *testing.B) {
	for _, n := range []int{2, 16} {
		held := []scrub.Secret{
			{Name: "effector-key", Value: testKey},
			{Name: "effector-key", Value: []byte(hex.EncodeToString(testKey))},
		}
		for i := 0; i < n; i++ {
			held = append(held, scrub.Secret{Name: "S" + strconv.Itoa(i), Value: append(bytes.Repeat([]byte{byte('a' + i)}, 40), " /+"...)})
		}
		global, err := scrub.New(held)
		if err != nil {
			b.Fatal(err)
		}
		scrubs := effect.NewScrubbers(global) // as New makes it, once
		v := string(held[2].Value)
		esc := "/v1/items/" + v[:40] + "%20%2F+/x"
		url := "https://api.example.com" + esc + "?q=1"
		for _, c := range []struct {
			name  string
			built map[string][][]byte
		}{
			{"bearer", map[string][][]byte{"S0": {[]byte("Bearer " + v)}}},
			{"bearer+header+url", map[string][][]byte{"S0": {[]byte("Bearer " + v), []byte("key " + v), []byte(url), []byte(esc + "?q=1"), []byte(esc)}}},
		} {
			b.Run("held="+strconv.Itoa(n)+"/"+c.name, func(b *testing.B) {
				for b.Loop() {
					sc, err := scrubs.For(c.built)
					if err != nil {
						b.Fatal(err)
					}
					sc.Folded() // what settle scrubs header names with
				}
			})
		}
	}
}
