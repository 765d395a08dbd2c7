package scrub

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"testing"
)

const benchChunk = 64 << 10

// benchSecrets makes n secrets shaped like real ones: API tokens, and
// passwords with characters every encoder treats differently, each with
// what an Effector builds from it (a Bearer header and a url).
func benchSecrets(n int) []Secret {
	r := rand.New(rand.NewPCG(uint64(n), 1))
	const tokenChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	const pwChars = tokenChars + "/+=?&<>\"\\% !*'()~"
	secrets := make([]Secret, n)
	for i := range secrets {
		chars, l := tokenChars, 40+r.IntN(24)
		if i%2 == 1 {
			chars, l = pwChars, 16+r.IntN(16)
		}
		v := make([]byte, l)
		for k := range v {
			v[k] = chars[r.IntN(len(chars))]
		}
		secrets[i] = Secret{Name: fmt.Sprintf("secret-%d", i), Value: v, Built: [][]byte{
			append([]byte("Bearer "), v...),
			[]byte("https://api.example.com/v1/" + url64(v) + "/items"),
		}}
	}
	return secrets
}

func url64(v []byte) string { return base64.RawURLEncoding.EncodeToString(v) }

// benchText is 64 KiB of mixed text without a secret in it: prose, JSON,
// SSE framing, base64 and hex blobs (which walk deep into the automaton,
// since forms are made of the same characters) and urls.
func benchText() []byte {
	r := rand.New(rand.NewPCG(42, 42))
	words := []string{"the", "request", "failed", "because", "token", "was", "expired", "retry", "after", "seconds", "error", "user", "id"}
	var b bytes.Buffer
	for b.Len() < benchChunk {
		switch r.IntN(6) {
		case 0, 1:
			for k := 0; k < 12; k++ {
				b.WriteString(words[r.IntN(len(words))])
				b.WriteByte(' ')
			}
		case 2:
			fmt.Fprintf(&b, "data: {\"id\":%d,\"delta\":\"%s\",\"ok\":true}\n\n", r.IntN(1e6), words[r.IntN(len(words))])
		case 3:
			blob := make([]byte, 48)
			for k := range blob {
				blob[k] = byte(r.IntN(256))
			}
			b.WriteString(base64.StdEncoding.EncodeToString(blob))
			b.WriteByte('\n')
		case 4:
			blob := make([]byte, 20)
			for k := range blob {
				blob[k] = byte(r.IntN(256))
			}
			b.WriteString("sha1=" + hex.EncodeToString(blob) + " ")
		default:
			fmt.Fprintf(&b, "GET https://api.example.com/v1/items/%d?page=%d&sort=asc HTTP/1.1\r\n", r.IntN(1e5), r.IntN(50))
		}
	}
	return b.Bytes()[:benchChunk]
}

// BenchmarkScrub is the pass path: 64 KiB chunks of text without a form
// through a Stream, with 1, 16 and 64 secrets (scripts/bench.sh prints these
// rows, with allocations per chunk: none).
func BenchmarkScrub(b *testing.B) {
	data := benchText()
	for _, n := range []int{1, 16, 64} {
		s := mustNew(b, benchSecrets(n))
		if got := s.Bytes(data); !bytes.Equal(got, data) {
			b.Fatal("the bench text holds a form")
		}
		b.Run(fmt.Sprintf("secrets=%d", n), func(b *testing.B) {
			st := s.NewStream()
			dst := make([]byte, 0, 2*benchChunk)
			b.SetBytes(benchChunk)
			b.ReportAllocs()
			b.ReportMetric(float64(s.Len()), "forms")
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				dst = st.Write(dst[:0], data)
			}
		})
	}
}

// BenchmarkScrubMatches is the same with one secret form every ~512 bytes.
func BenchmarkScrubMatches(b *testing.B) {
	for _, n := range []int{1, 16, 64} {
		secrets := benchSecrets(n)
		s := mustNew(b, secrets)
		forms := allForms(secrets)
		data := benchText()
		for i, at := 0, 0; at+200 < len(data); i, at = i+1, at+512 {
			copy(data[at:], forms[(i*7)%len(forms)].b)
		}
		b.Run(fmt.Sprintf("secrets=%d", n), func(b *testing.B) {
			st := s.NewStream()
			dst := make([]byte, 0, 2*benchChunk)
			b.SetBytes(benchChunk)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				dst = st.Write(dst[:0], data)
			}
		})
	}
}

func BenchmarkBaseline(b *testing.B) {
	data := benchText()
	b.Run("bytes.Index", func(b *testing.B) {
		pat := benchSecrets(1)[0].Value
		b.SetBytes(benchChunk)
		for i := 0; i < b.N; i++ {
			if bytes.Index(data, pat) >= 0 {
				b.Fatal("found")
			}
		}
	})
	for _, n := range []int{1, 16, 64} {
		secrets := benchSecrets(n)
		forms := allForms(secrets)
		b.Run(fmt.Sprintf("naive-replace/secrets=%d", n), func(b *testing.B) {
			b.SetBytes(benchChunk)
			for i := 0; i < b.N; i++ {
				out := data
				for _, f := range forms {
					out = bytes.ReplaceAll(out, f.b, []byte("[secret:"+secrets[f.owner].Name+"]"))
				}
			}
		})
	}
}

// BenchmarkNew measures building a Scrubber, and reports the automaton's
// size.
func BenchmarkNew(b *testing.B) {
	for _, n := range []int{1, 16, 64} {
		secrets := benchSecrets(n)
		b.Run(fmt.Sprintf("secrets=%d", n), func(b *testing.B) {
			var s *Scrubber
			for i := 0; i < b.N; i++ {
				s = mustNew(b, secrets)
			}
			b.ReportMetric(float64(s.Len()), "forms")
			b.ReportMetric(float64(s.a.states()), "states")
			b.ReportMetric(float64(s.a.size())/(1<<20), "MiB")
		})
	}
}
