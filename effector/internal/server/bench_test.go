package server

import (
	"bytes"
	"encoding/hex"
	"strconv"
	"testing"

	"jr2.dev/boundary/filter/scrub"
)

// BenchmarkScrubberFor measures what an effect that names a secret costs
// at its start: one scrubber over every held secret, the key and the
// strings the effect built (here a bearer value, a filled header and the
// url three ways), for 2 and 16 held secrets.
func BenchmarkScrubberFor(b *testing.B) {
	for _, n := range []int{2, 16} {
		b.Run("held="+strconv.Itoa(n), func(b *testing.B) {
			held := []scrub.Secret{
				{Name: "effector-key", Value: testKey},
				{Name: "effector-key", Value: []byte(hex.EncodeToString(testKey))},
			}
			for i := 0; i < n; i++ {
				held = append(held, scrub.Secret{Name: "S" + strconv.Itoa(i), Value: bytes.Repeat([]byte{byte('a' + i)}, 40)})
			}
			s := &Server{o: Options{Held: held}}
			v := string(held[2].Value)
			url := "https://api.example.com/v1/items/" + v + "/x?q=1"
			built := map[string][][]byte{"S0": {[]byte("Bearer " + v), []byte("key " + v), []byte(url), []byte("/v1/items/" + v + "/x?q=1"), []byte("/v1/items/" + v + "/x")}}
			for b.Loop() {
				if _, err := s.scrubberFor(built); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
