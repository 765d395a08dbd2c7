package bundle

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"io"
	"sync"
	"sync/atomic"
)

// BodyStream is a streaming scrubber (filter/scrub.Stream, the Effector's
// effect.Stream): Write passes on what it can decide, Flush the rest at the
// end.
type BodyStream interface {
	Write(dst, p []byte) []byte
	Flush(dst []byte) []byte
}

// BodyRecorder writes one request body's http-request-body records as the
// body is read, shared by every writer of that kind (the contained run's
// mediator, the Effector's receipts). Each read goes through the writer's
// streaming scrubber, which holds back a tail that could begin a value's
// form, so a value split across two reads is still recorded as its label.
// Chunks are recorded while the budget (shared by every body of one run,
// or one Effector) lasts; past it, bytes are hashed but not recorded and
// the closing record says "cut". It is not safe for concurrent use.
type BodyRecorder struct {
	rec      Recorder
	req      uint64
	st       BodyStream
	budget   *atomic.Int64
	maxChunk int
	sum      hash.Hash
	chunks   int
	bytes    int64
	read     int64
	cut      bool
	ended    bool
	buf      []byte
}

// NewBodyRecorder records the body of the request whose http-request
// record is seq req into rec. maxChunk bounds one chunk record's bytes (0:
// each read is one chunk).
func NewBodyRecorder(rec Recorder, req uint64, st BodyStream, budget *atomic.Int64, maxChunk int) *BodyRecorder {
	return &BodyRecorder{rec: rec, req: req, st: st, budget: budget, maxChunk: maxChunk, sum: sha256.New()}
}

// ErrBodyNotRecorded is a body read that could not be recorded: the body
// fails, so nothing of it leaves unrecorded.
var ErrBodyNotRecorded = errors.New("the request body could not be recorded, so it was not sent")

// Write records p, raw bytes of the body as read.
func (b *BodyRecorder) Write(p []byte) error {
	b.read += int64(len(p))
	b.buf = b.st.Write(b.buf[:0], p)
	return b.emit(b.buf)
}

// emit records scrubbed bytes as chunks, within the budget.
func (b *BodyRecorder) emit(p []byte) error {
	b.sum.Write(p)
	b.bytes += int64(len(p))
	for len(p) > 0 {
		n := len(p)
		if b.maxChunk > 0 {
			n = min(n, b.maxChunk)
		}
		if b.cut || b.budget.Add(-int64(n)) < 0 {
			b.cut = true
			return nil
		}
		if _, err := b.rec.Append(KindRequestBody, RequestBodyRecord{Request: b.req, BodyChunk: ChunkOf(b.chunks, p[:n])}); err != nil {
			return err
		}
		b.chunks++
		p = p[n:]
	}
	return nil
}

// End flushes the scrubber's held tail and writes the closing record; why
// is "" for a body read to its end. A second End does nothing.
func (b *BodyRecorder) End(why string) error {
	if b.ended {
		return nil
	}
	b.ended = true
	if err := b.emit(b.st.Flush(b.buf[:0])); err != nil {
		return err
	}
	_, err := b.rec.Append(KindRequestBody, RequestBodyRecord{Request: b.req, End: true, Chunks: b.chunks,
		Bytes: b.bytes, Read: b.read, SHA256: hex.EncodeToString(b.sum.Sum(nil)), Cut: b.cut, Error: why, Scrubbed: b.read != b.bytes})
	return err
}

// RecordedBody wraps a live request's body: each read is recorded before
// the transport gets its bytes, so nothing of a body leaves unrecorded; a
// read that cannot be recorded fails the body (and so the request) with
// ErrBodyNotRecorded. The body ends at io.EOF, or once length bytes are
// read when length is known (>= 0: a transport that frames the body by its
// length reads no further); Close ends a body not read to its end. Read
// and Close may be called from different goroutines.
func RecordedBody(rc io.ReadCloser, rec *BodyRecorder, length int64) io.ReadCloser {
	return &recordedBody{rc: rc, rec: rec, left: length}
}

type recordedBody struct {
	rc   io.ReadCloser
	rec  *BodyRecorder
	left int64 // bytes until the known end; < 0 unknown
	mu   sync.Mutex
	err  error
}

func (r *recordedBody) Read(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return 0, r.err
	}
	if r.rec.ended {
		return 0, io.EOF // past the known end, or after Close: no byte goes unrecorded
	}
	n, err := r.rc.Read(p)
	if n > 0 {
		if rerr := r.rec.Write(p[:n]); rerr != nil {
			r.err = ErrBodyNotRecorded
			return 0, r.err
		}
	}
	if r.left >= 0 {
		r.left -= int64(n)
	}
	if err == io.EOF || r.left == 0 {
		if rerr := r.rec.End(""); rerr != nil {
			r.err = ErrBodyNotRecorded
			return 0, r.err
		}
	}
	return n, err
}

func (r *recordedBody) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.rec.ended {
		r.rec.End("not read to its end")
	}
	return r.rc.Close()
}
