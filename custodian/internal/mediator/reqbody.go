package mediator

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"io"
	"sync"

	"jr2.dev/boundary/filter/scrub"
	"jr2.dev/boundary/internal/bundle"
)

// DefaultBodyBudget is how many bytes of request bodies one run records
// when Options.BodyBudget is 0. Past it, a body's further bytes are hashed
// but not recorded, and its closing record says "cut".
const DefaultBodyBudget = 64 << 20

// modeBodyMax bounds a request body a mode other than live reads whole
// before anything is decided (its hash is part of the canonical form).
const modeBodyMax = 16 << 20

// bodyRecorder records one request body as it is read. Each chunk goes
// through the engine's streaming scrubber (which holds a tail that could
// be the start of a value's form), so a value split across two reads is
// still recorded as its label.
type bodyRecorder struct {
	m      *Mediator
	req    uint64
	st     *scrub.Stream
	sum    hash.Hash
	chunks int
	bytes  int64
	cut    bool
	ended  bool
	read   int64
	buf    []byte
}

func (m *Mediator) newBodyRecorder(req uint64) *bodyRecorder {
	return &bodyRecorder{m: m, req: req, st: m.o.Broker.Engine().Scrubber().NewStream(), sum: sha256.New()}
}

// write records p (raw bytes as the child sent them).
func (b *bodyRecorder) write(p []byte) error {
	b.read += int64(len(p))
	b.buf = b.st.Write(b.buf[:0], p)
	return b.emit(b.buf)
}

// emit records scrubbed bytes as one chunk, within the run's budget.
func (b *bodyRecorder) emit(p []byte) error {
	if len(p) == 0 {
		return nil
	}
	b.sum.Write(p)
	b.bytes += int64(len(p))
	if b.cut || b.m.bodyBudget.Add(-int64(len(p))) < 0 {
		b.cut = true
		return nil
	}
	rec := httpRequestBody{Request: b.req, BodyChunk: bundle.ChunkOf(b.chunks, p)}
	b.chunks++
	_, err := b.m.record(bundle.KindRequestBody, rec)
	return err
}

// end flushes the scrubber's held tail and writes the closing record;
// why is "" for a body read to its end.
func (b *bodyRecorder) end(why string) error {
	if b.ended {
		return nil
	}
	b.ended = true
	if err := b.emit(b.st.Flush(b.buf[:0])); err != nil {
		return err
	}
	_, err := b.m.record(bundle.KindRequestBody, httpRequestBody{Request: b.req, End: true, Chunks: b.chunks,
		Bytes: b.bytes, Read: b.read, SHA256: hex.EncodeToString(b.sum.Sum(nil)), Cut: b.cut, Error: why, Scrubbed: b.read != b.bytes})
	return err
}

// recordedBody wraps a live request's body: each read is recorded before
// the transport gets its bytes, so nothing of a body leaves unrecorded; a
// read that cannot be recorded fails the body (and so the request).
type recordedBody struct {
	rc  io.ReadCloser
	rec *bodyRecorder
	mu  sync.Mutex
	err error
}

var errBodyNotRecorded = errors.New("the request body could not be recorded, so it was not sent")

func (r *recordedBody) Read(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return 0, r.err
	}
	n, err := r.rc.Read(p)
	if n > 0 {
		if rerr := r.rec.write(p[:n]); rerr != nil {
			r.err = errBodyNotRecorded
			return 0, r.err
		}
	}
	if err == io.EOF {
		if rerr := r.rec.end(""); rerr != nil {
			r.err = errBodyNotRecorded
			return 0, r.err
		}
	}
	return n, err
}

func (r *recordedBody) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.rec.ended {
		r.rec.end("not read to its end")
	}
	return r.rc.Close()
}

// readWhole reads a body whole for a mode that decides on its hash,
// recording it as it goes. It returns nil for no body, and ok false when
// the body is over modeBodyMax or could not be read or recorded.
func readWhole(rc io.Reader, rec *bodyRecorder) (body []byte, ok bool, err error) {
	body, err = io.ReadAll(io.LimitReader(rc, modeBodyMax+1))
	if err != nil {
		return nil, false, err
	}
	if len(body) > modeBodyMax {
		return nil, false, nil
	}
	if err := rec.write(body); err != nil {
		return nil, false, err
	}
	if err := rec.end(""); err != nil {
		return nil, false, err
	}
	return body, true, nil
}
