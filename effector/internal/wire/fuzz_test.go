package wire

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// seedFixtures adds every fixture of a prefix as a seed.
func seedFixtures(f *testing.F, prefix string) {
	paths, _ := filepath.Glob(filepath.Join(fixtures, prefix+"*.json"))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err == nil {
			f.Add(b)
		}
	}
	for _, r := range rejects {
		f.Add([]byte(r.body))
	}
}

// FuzzDecodeStart: the decoder never panics, and what it accepts encodes
// to bytes it decodes to the same start.
func FuzzDecodeStart(f *testing.F) {
	seedFixtures(f, "request.")
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeStart(b)
		if err != nil {
			if len(err.Error()) > 600 {
				t.Fatalf("a reason of %d bytes", len(err.Error()))
			}
			return
		}
		enc, err := Marshal(s)
		if err != nil {
			t.Fatalf("accepted and cannot encode: %v", err)
		}
		again, err := DecodeStart(enc)
		if err != nil {
			t.Fatalf("re-encoded start refused: %v\n%s", err, enc)
		}
		if !reflect.DeepEqual(again, s) {
			t.Fatalf("round trip differs:\n%#v\n%#v", s, again)
		}
	})
}

// FuzzDecodeAnswer: the answer decoders never panic, and an accepted state
// encodes to bytes that decode the same.
func FuzzDecodeAnswer(f *testing.F) {
	seedFixtures(f, "response.")
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := DecodeError(b); err == nil {
			return
		}
		s, err := DecodeState(b)
		if err != nil {
			return
		}
		enc, err := Marshal(s)
		if err != nil {
			t.Fatalf("accepted and cannot encode: %v", err)
		}
		again, err := DecodeState(enc)
		if err != nil || !reflect.DeepEqual(again, s) {
			t.Fatalf("round trip: %v\n%s", err, enc)
		}
	})
}
