package bundle

import (
	"bytes"
	"io"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkAppend measures rendering and chaining one 4 KiB body chunk, the
// mediator's common record, without the disk.
func BenchmarkAppend(b *testing.B) {
	w := New(io.Discard, Options{})
	fields := map[string]any{"chunk": 1, "body": strings.Repeat("x", 4096)}
	b.SetBytes(4096)
	for b.Loop() {
		if _, err := w.Append(KindHTTPResponse, fields); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendSync is a denial as the mediator records it: one small
// record, then fsync, on the test's temp directory.
func BenchmarkAppendSync(b *testing.B) {
	w, err := Create(filepath.Join(b.TempDir(), "b.jsonl"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	fields := map[string]any{"host": "evil.example", "port": 443, "decision": "deny", "rule": "default-deny"}
	for b.Loop() {
		if _, err := w.Append(KindEgressDecision, fields); err != nil {
			b.Fatal(err)
		}
		if err := w.Sync(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerify checks a sealed bundle of 1000 records of 4 KiB.
func BenchmarkVerify(b *testing.B) {
	var buf bytes.Buffer
	w := New(&buf, Options{})
	fields := map[string]any{"chunk": 1, "body": strings.Repeat("x", 4096)}
	for range 1000 {
		w.Append(KindHTTPResponse, fields)
	}
	w.Seal()
	data := buf.Bytes()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if res, err := VerifyReader(bytes.NewReader(data)); err != nil || res.Status != Verified {
			b.Fatal(res, err)
		}
	}
}

// BenchmarkAppendStruct is the mediator's chunk record as it writes it: a
// struct, whose keys are known by its type.
func BenchmarkAppendStruct(b *testing.B) {
	w := New(io.Discard, Options{})
	body := strings.Repeat("x", 4096)
	fields := ResponseRecord{Request: 7, BodyChunk: BodyChunk{Chunk: new(int), Body: &body}}
	b.SetBytes(4096)
	for b.Loop() {
		if _, err := w.Append(KindHTTPResponse, fields); err != nil {
			b.Fatal(err)
		}
	}
}
