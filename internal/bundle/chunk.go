package bundle

import (
	"bytes"
	"unicode/utf8"
)

// BodyChunk is a body chunk's part of a record (http-request-body,
// http-response), shared by every writer of those kinds: its index, and
// its bytes as text when they are UTF-8, else as base64.
type BodyChunk struct {
	Chunk      *int    `json:"chunk,omitempty"`
	Body       *string `json:"body,omitempty"`
	BodyBase64 []byte  `json:"body_base64,omitempty"`
}

// ChunkOf is chunk i holding p.
func ChunkOf(i int, p []byte) BodyChunk {
	c := BodyChunk{Chunk: &i}
	if utf8.Valid(p) {
		s := string(p)
		c.Body = &s
	} else {
		c.BodyBase64 = bytes.Clone(p)
	}
	return c
}

// ResponseRecord is an http-response record: the status and headers as the
// client got them (local: the writer answered itself), then one record per
// body chunk, then the end with the count, the bytes, or the error.
type ResponseRecord struct {
	Request uint64      `json:"request"`
	Status  int         `json:"status,omitempty"`
	Headers [][2]string `json:"headers,omitempty"`
	Local   bool        `json:"local,omitempty"`
	BodyChunk
	End    bool   `json:"end,omitempty"`
	Chunks int    `json:"chunks,omitempty"`
	Bytes  int64  `json:"bytes,omitempty"`
	Error  string `json:"error,omitempty"`
}

// RequestBodyRecord is an http-request-body record: one per chunk as read
// from the child (scrubbed: a form of a held value is its label), then one
// closing record with the count, the bytes and the sha-256 of the whole
// body as recorded (past the budget too), and "cut" when the run's budget
// stopped recording chunks.
type RequestBodyRecord struct {
	Request uint64 `json:"request"`
	BodyChunk
	End      bool   `json:"end,omitempty"`
	Chunks   int    `json:"chunks,omitempty"`
	Bytes    int64  `json:"bytes,omitempty"`
	SHA256   string `json:"sha256,omitempty"`
	Cut      bool   `json:"cut,omitempty"`
	Read     int64  `json:"read,omitempty"` // bytes read from the child, before scrubbing
	Error    string `json:"error,omitempty"`
	Scrubbed bool   `json:"scrubbed,omitempty"` // read and bytes differ: a form was replaced by its label
}
