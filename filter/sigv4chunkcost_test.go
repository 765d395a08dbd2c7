package filter

import (
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// manyChunks is a body of n chunks of size bytes and the last one in form:
// the signed form's chain made with the example secret from its seed.
func manyChunks(form chunkForm, n, size int) []byte {
	data := strings.Repeat("x", size)
	if form == formUnsignedTrailer {
		return []byte(strings.Repeat(strconv.FormatInt(int64(size), 16)+"\r\n"+data+"\r\n", n) + "0\r\nx-amz-checksum-crc32:AAAAAA==\r\n\r\n")
	}
	key := signingKey(exampleSecret, exampleDate[:8], "us-east-1", "s3")
	scope := exampleDate[:8] + "/us-east-1/s3/aws4_request"
	chunks := make([][]byte, n+1)
	sigs := make([]string, n+1)
	prev := exampleSeed
	for i := range chunks {
		if i < n {
			chunks[i] = []byte(data)
		}
		prev = chunkSignature(key, exampleDate, scope, prev, chunks[i])
		sigs[i] = prev
	}
	return chunkedBody(chunks, sigs)
}

func newExampleChunks(form chunkForm) *Chunks {
	return newChunks(form, exampleSecret, "real", exampleDate, "us-east-1", "s3", exampleSeed, strings.Repeat("b", 64))
}

// TestChunksCostIsLinear: reading a body of many chunks in one write
// allocates a bounded multiple of the body, not a copy of the rest of the
// write at every line (which made it quadratic: 40000 six-byte chunks in
// one write of 240 kB allocated 5 GB). Bytes counted, not time.
func TestChunksCostIsLinear(t *testing.T) {
	for _, tc := range []struct {
		name    string
		form    chunkForm
		n, size int
		perByte uint64 // allowed bytes allocated per body byte
	}{
		// The output as append grows it (about 5 times its length, at
		// 1.25 a step), and a few hundred bytes a chunk (the HMACs).
		{"signed, 8 KiB chunks", formSigned, 200, 8 << 10, 8},
		{"unsigned trailer, 1-byte chunks", formUnsignedTrailer, 40000, 1, 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := manyChunks(tc.form, tc.n, tc.size)
			c := newExampleChunks(tc.form)
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			out, err := c.Write(body)
			runtime.ReadMemStats(&m1)
			if err != nil || c.End() != nil {
				t.Fatalf("refused: %v", err)
			}
			if len(out) != len(body) {
				t.Fatalf("wrote %d bytes of %d", len(out), len(body))
			}
			if got, limit := m1.TotalAlloc-m0.TotalAlloc, tc.perByte*uint64(len(body))+1<<20; got > limit {
				t.Errorf("%d chunks in one write of %d bytes allocated %d bytes, over %d", tc.n, len(body), got, limit)
			}
		})
	}
}

// TestChunksSignedAtLeast8KiB: in a signed form every chunk with data but
// the last is at least 8 KiB, as AWS requires; a short one followed by
// another with data fails the body, and a short last one is read.
func TestChunksSignedAtLeast8KiB(t *testing.T) {
	for _, tc := range []struct {
		n, size int
		ok      bool
	}{{1, 1, true}, {2, 8 << 10, true}, {2, 8<<10 - 1, false}, {3, 1, false}} {
		c := newExampleChunks(formSigned)
		_, err := c.Write(manyChunks(formSigned, tc.n, tc.size))
		if err == nil {
			err = c.End()
		}
		if (err == nil) != tc.ok {
			t.Errorf("%d chunks of %d bytes: error %v, want ok %v", tc.n, tc.size, err, tc.ok)
		}
	}
}

// BenchmarkChunksMany is the cost of a body of many chunks in one write
// (bytes per op say what TestChunksCostIsLinear bounds).
func BenchmarkChunksMany(b *testing.B) {
	for _, tc := range []struct {
		name    string
		form    chunkForm
		n, size int
	}{{"signed", formSigned, 200, 8 << 10}, {"unsigned", formUnsignedTrailer, 4000, 1}} {
		body := manyChunks(tc.form, tc.n, tc.size)
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if _, err := newExampleChunks(tc.form).Write(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
