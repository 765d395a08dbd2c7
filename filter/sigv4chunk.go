package filter

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
)

// An aws-chunked upload frames its body as chunks, each a line with its
// size in hex and its data, a zero-size chunk last, and in the -TRAILER
// forms trailing header lines after it (a checksum the SDK computed as the
// body streamed), the body ending at an empty line. Three forms go
// upstream; Chunks reads each strictly and writes the same bytes but for
// the signatures the real key makes:
//
//   - STREAMING-AWS4-HMAC-SHA256-PAYLOAD: each chunk's line carries a
//     signature of its data chained to the one before, starting from the
//     request's own signature (the seed). The agent's chain is made with
//     the stand-in secret; Chunks checks each link and writes the real
//     key's chain in its place.
//   - STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER: the same chain, and the
//     trailer lines end with x-amz-trailer-signature, which signs them
//     (string to sign AWS4-HMAC-SHA256-TRAILER) chained to the zero chunk's
//     signature; it is checked and made again the same way.
//   - STREAMING-UNSIGNED-PAYLOAD-TRAILER: no signature in the body (only
//     the header signature, which the engine re-signs); chunks and
//     trailers go upstream as sent, as soon as they arrive, but are still
//     read to the grammar, so the body the upstream reads is the one this
//     read.
//
// A signature is 64 hex digits either way and every size goes upstream
// spelled as sent, so the body's length never changes.
//
// The AWS SDK for Go v2 exports no signer for these chunks (its stream
// signer is the event stream's), so the chain is computed here: the
// signing key as SigV4 derives it, each chunk's string to sign as AWS's
// "Transferring Payload in Multiple Chunks" gives it and the trailer's as
// its "Signature calculations for trailing headers" gives it, checked
// against AWS's published chunk example and the trailer signature AWS's
// own signing library (aws-c-auth) is tested with (TestChunksAWSExample,
// TestChunksAWSTrailerExample).

// The x-amz-content-sha256 values of the aws-chunked forms that go
// upstream (Chunks).
const (
	StreamingSignedPayload   = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
	StreamingSignedTrailer   = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"
	StreamingUnsignedTrailer = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
)

// chunkForm is which of the forms a body is in.
type chunkForm uint8

const (
	formSigned chunkForm = iota
	formSignedTrailer
	formUnsignedTrailer
)

// chunkFormOf is the form of an x-amz-content-sha256 value; ok is false
// for one that is not an aws-chunked form Chunks reads.
func chunkFormOf(contentSHA string) (chunkForm, bool) {
	switch contentSHA {
	case StreamingSignedPayload:
		return formSigned, true
	case StreamingSignedTrailer:
		return formSignedTrailer, true
	case StreamingUnsignedTrailer:
		return formUnsignedTrailer, true
	}
	return 0, false
}

// signingKey is SigV4's signing key of secret for date (YYYYMMDD),
// region and service.
func signingKey(secret, date, region, service string) []byte {
	mac := func(key []byte, s string) []byte {
		h := hmac.New(sha256.New, key)
		h.Write([]byte(s))
		return h.Sum(nil)
	}
	return mac(mac(mac(mac([]byte("AWS4"+secret), date), region), service), "aws4_request")
}

// chunkSignature is the signature of one chunk's data, chained to prev.
func chunkSignature(key []byte, amzDate, scope, prev string, data []byte) string {
	sum := sha256.Sum256(data)
	h := hmac.New(sha256.New, key)
	h.Write([]byte("AWS4-HMAC-SHA256-PAYLOAD\n" + amzDate + "\n" + scope + "\n" + prev + "\n" + emptyPayload + "\n" + hex.EncodeToString(sum[:])))
	return hex.EncodeToString(h.Sum(nil))
}

// trailerSignature is the signature of the trailer lines (canonical:
// each "name:value\n", by name), chained to prev, the zero chunk's.
func trailerSignature(key []byte, amzDate, scope, prev, canonical string) string {
	sum := sha256.Sum256([]byte(canonical))
	h := hmac.New(sha256.New, key)
	h.Write([]byte("AWS4-HMAC-SHA256-TRAILER\n" + amzDate + "\n" + scope + "\n" + prev + "\n" + hex.EncodeToString(sum[:])))
	return hex.EncodeToString(h.Sum(nil))
}

// Chunks reads one aws-chunked body and re-signs its signed forms:
// Decision.Chunks, which a host puts every byte of the request body
// through (Write, or Reader) on its way upstream. It is one request's,
// used by one goroutine.
type Chunks struct {
	form            chunkForm
	inKey, outKey   []byte
	amzDate, scope  string
	prevIn, prevOut string

	line     []byte // the line being read (a chunk's, or a trailer's)
	size     int64  // the chunk being read: its data's length, -1 reading its line
	short    bool   // signed forms: a data chunk under minChunk was read, so only the zero chunk may follow
	sizeText string // its size as the agent spelled it (hex digits only)
	sig      string // its signature, as the agent sent it
	data     []byte // signed forms: its data and CRLF so far; unsigned: its CRLF so far
	left     int64  // unsigned: data bytes of the chunk still to pass
	trailing bool   // the zero chunk was read: reading trailer lines
	trailers []string
	trailLen int
	done     bool // the body's last line was read: it ends here
	failed   bool // a refusal was returned

	// hold is the signed chunks' share of the process's budget of held
	// bytes (MaxHeldBodies): a chunk's data counts from its first byte
	// until the bytes Write returned it in went on (the next Write), or
	// the body ended (End), was refused, or the request ended (Close).
	hold  Hold
	sent  int         // bytes of hold in the chunks the last Write returned
	spent atomic.Bool // the budget was spent: the refusal is HeldBudgetSpent
}

// SigV4ChunkText is the answer to an aws-chunked body that is not one its
// form allows or does not verify (ChunksRefused).
const SigV4ChunkText = "the aws-chunked body is not framed as its x-amz-content-sha256 form says, or a chunk or trailer signature does not verify with the stand-in secret key (or the body ends before its last line); the request was cut"

// ChunksRefused is a host's answer when Decision.Chunks refused the body
// (Failed), if no answer went out yet: 403, reason signature; or, when a
// chunk would have taken the process past its budget of held bytes, the
// 503 of HeldBudgetSpent, with Retry-After.
func (e *Engine) ChunksRefused(target string, c *Chunks) *Reply {
	if c != nil && c.spent.Load() {
		return heldBudgetReply(HeldChunkText)
	}
	return reply(403, ReasonSignature, SigV4ChunkText)
}

// Failed reports whether c refused the body.
func (c *Chunks) Failed() bool { return c.failed }

// errChunks is every refusal of a chunked body: the host cuts the request,
// and the answer is a reset or the engine's 502 (no value, no signature).
var errChunks = errors.New("the aws-chunked body is malformed or does not verify with the stand-in secret key")

// errChunkBudget is the refusal of a chunk the process's budget of held
// bytes has no room for: the host cuts the request as for errChunks.
var errChunkBudget = errors.New("the aws-chunked body's chunk would take the process past its budget of held bytes")

// minChunk is the least data of a signed chunk but the last one with data:
// AWS requires it ("Chunk size must be at least 8 KB … This chunk size
// applies to all chunks except the last chunk you send", S3 API reference,
// "Transferring Payload in Multiple Chunks"), and it bounds the HMACs a
// body costs the engine (two a chunk) to a few per 8 KiB the agent sends.
// The unsigned form costs no HMAC and keeps any size.
const minChunk = 8 << 10

// maxChunkLine bounds a chunk or trailer line: hex size,
// ";chunk-signature=", 64 hex; a checksum trailer; the trailer signature.
const maxChunkLine = 128

// maxTrailers bounds the trailer lines of a body, and maxTrailerBytes
// their length: an SDK sends one checksum and, signed, the signature.
const (
	maxTrailers     = 8
	maxTrailerBytes = 1024
)

// trailerSigName is the trailer line that signs the others.
const trailerSigName = "x-amz-trailer-signature"

func newChunks(form chunkForm, inSecret, outSecret, amzDate, region, service, seedIn, seedOut string) *Chunks {
	c := &Chunks{form: form, amzDate: amzDate, scope: amzDate[:8] + "/" + region + "/" + service + "/aws4_request", prevIn: seedIn, prevOut: seedOut, size: -1}
	if form != formUnsignedTrailer {
		c.inKey, c.outKey = signingKey(inSecret, amzDate[:8], region, service), signingKey(outSecret, amzDate[:8], region, service)
	}
	return c
}

// Write takes the next bytes of the body and returns the bytes that go
// upstream now: in a signed form each chunk whole once its data arrived
// and its signature verified, with the real key's signature in its line;
// unsigned, each line once read and data as it comes. An error means the
// body is not one its form allows: nothing more may go upstream.
//
// A signed chunk's data counts in the process's budget of held bytes
// (MaxHeldBodies) from its first byte until the bytes returned went on,
// which the next Write, End or Close tells; a chunk the budget has no room
// for is refused (errChunkBudget; ChunksRefused answers it 503).
func (c *Chunks) Write(p []byte) ([]byte, error) {
	c.hold.Give(c.sent) // what the last Write returned went on
	c.sent = 0
	out, err := c.write(p)
	if err != nil {
		c.failed = true
		c.hold.Close()
	}
	return out, err
}

// Close gives back what c holds of the process's budget, for good: a host
// calls it when the request ends (whole, reset or refused); Write after it
// refuses every chunk held.
func (c *Chunks) Close() { c.hold.Close() }

func (c *Chunks) write(p []byte) ([]byte, error) {
	var out []byte
	for len(p) > 0 {
		switch {
		case c.done:
			return nil, errChunks
		case c.size < 0: // a line: a chunk's, or a trailer's
			i := bytes.IndexByte(p, '\n')
			if i < 0 {
				c.line = append(c.line, p...)
				p = nil
			} else {
				c.line = append(c.line, p[:i+1]...)
				p = p[i+1:]
			}
			if len(c.line) > maxChunkLine {
				return nil, errChunks
			}
			if i < 0 {
				break
			}
			var err error
			if c.trailing {
				out, err = c.readTrailer(out)
			} else {
				out, err = c.readLine(out)
			}
			if err != nil {
				return nil, err
			}
		case c.form == formUnsignedTrailer && c.left > 0: // data, as it comes
			n := int(min(int64(len(p)), c.left))
			out = append(out, p[:n]...)
			p, c.left = p[n:], c.left-int64(n)
		case c.form == formUnsignedTrailer: // the CRLF after the data
			n := min(len(p), 2-len(c.data))
			c.data = append(c.data, p[:n]...)
			p = p[n:]
			if len(c.data) < 2 {
				continue
			}
			if string(c.data) != "\r\n" {
				return nil, errChunks
			}
			out = append(out, c.data...)
			c.size = -1
		default: // a signed chunk's data and CRLF, held whole
			n := int(min(int64(len(p)), c.size+2-int64(len(c.data))))
			if !c.hold.Take(n) {
				c.spent.Store(true)
				return nil, errChunkBudget
			}
			c.data = append(c.data, p[:n]...)
			p = p[n:]
			if int64(len(c.data)) < c.size+2 {
				continue
			}
			var err error
			if out, err = c.finish(out); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// isHexDigits reports whether s is 1–16 hex digits, either case: a chunk
// size with no sign, space or prefix that another parser could read
// otherwise.
func isHexDigits(s string) bool {
	if len(s) == 0 || len(s) > 16 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// readLine reads a chunk's line: "<hex size>;chunk-signature=<signature>\r\n"
// in a signed form, "<hex size>\r\n" unsigned, and appends to out what
// goes upstream of it now.
func (c *Chunks) readLine(out []byte) ([]byte, error) {
	line, ok := strings.CutSuffix(string(c.line), "\r\n")
	c.line = c.line[:0]
	if !ok {
		return nil, errChunks
	}
	hexSize, sig := line, ""
	if c.form != formUnsignedTrailer {
		hexSize, sig, ok = strings.Cut(line, ";chunk-signature=")
		if !ok || len(sig) != 64 || !isLowerHex(sig) {
			return nil, errChunks
		}
	}
	if !isHexDigits(hexSize) {
		return nil, errChunks
	}
	size, err := strconv.ParseInt(hexSize, 16, 64)
	if err != nil || c.form != formUnsignedTrailer && (size > MaxSignedBody || c.short && size > 0) {
		return nil, errChunks
	}
	c.short = size < minChunk
	// The size goes upstream as the agent spelled it (leading zeros,
	// either case), so the body keeps its length and Content-Length stays
	// true; only the signature, 64 hex either way, changes.
	c.size, c.sizeText, c.sig, c.data = size, hexSize, sig, c.data[:0]
	switch {
	case c.form == formUnsignedTrailer && size == 0:
		c.size, c.trailing = -1, true // the trailer lines follow
		return append(append(out, hexSize...), "\r\n"...), nil
	case c.form == formUnsignedTrailer:
		c.left = size
		return append(append(out, hexSize...), "\r\n"...), nil
	case c.form == formSignedTrailer && size == 0:
		// The zero chunk has no data line: the trailer lines follow.
		out, err := c.resign(out, nil)
		if err != nil {
			return nil, err
		}
		c.size, c.trailing = -1, true
		return out, nil
	}
	return out, nil
}

// finish checks the signed chunk read and appends it to out re-signed.
func (c *Chunks) finish(out []byte) ([]byte, error) {
	data := c.data[:c.size]
	if string(c.data[c.size:]) != "\r\n" {
		return nil, errChunks
	}
	out, err := c.resign(out, data)
	if err != nil {
		return nil, err
	}
	out = append(out, c.data...)
	c.sent += len(c.data) // held until out went on
	if c.size == 0 {
		c.done = true // its CRLF is the body's last
	}
	c.size = -1
	return out, nil
}

// resign checks the signature of a chunk whose data is data and appends
// to out its line signed with the real key's chain.
func (c *Chunks) resign(out, data []byte) ([]byte, error) {
	if subtle.ConstantTimeCompare([]byte(chunkSignature(c.inKey, c.amzDate, c.scope, c.prevIn, data)), []byte(c.sig)) != 1 {
		return nil, errChunks
	}
	sig := chunkSignature(c.outKey, c.amzDate, c.scope, c.prevOut, data)
	c.prevIn, c.prevOut = c.sig, sig
	out = append(append(out, c.sizeText...), ";chunk-signature="...)
	return append(append(out, sig...), "\r\n"...), nil
}

// isTrailerName reports whether s is a trailer name as the SDKs send one:
// lowercase letters, digits and '-'.
func isTrailerName(s string) bool {
	return s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyz0123456789-") == ""
}

// isTrailerValue reports whether s is printable ASCII with no space: a
// checksum (base64) or a signature, which no parser trims or folds.
func isTrailerValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return s != ""
}

// readTrailer reads one line after the zero chunk: "name:value\r\n", or
// the empty line that ends the body, and appends to out what goes upstream
// now. The lines go upstream at the end, the trailer signature (the signed
// form's last line) made again.
func (c *Chunks) readTrailer(out []byte) ([]byte, error) {
	line, ok := strings.CutSuffix(string(c.line), "\r\n")
	c.trailLen += len(c.line)
	c.line = c.line[:0]
	if !ok || c.trailLen > maxTrailerBytes {
		return nil, errChunks
	}
	if line != "" {
		name, value, found := strings.Cut(line, ":")
		if !found || !isTrailerName(name) || !isTrailerValue(value) || len(c.trailers) == maxTrailers {
			return nil, errChunks
		}
		for _, t := range c.trailers {
			if n, _, _ := strings.Cut(t, ":"); n == name || n == trailerSigName {
				return nil, errChunks // twice, or a line after the signature
			}
		}
		if name == trailerSigName && (c.form != formSignedTrailer || len(value) != 64 || !isLowerHex(value)) {
			return nil, errChunks
		}
		c.trailers = append(c.trailers, line)
		return out, nil
	}
	c.done = true
	if c.form == formUnsignedTrailer {
		return append(out, c.trailerBytes("")...), nil
	}
	// Signed: the last line is the signature of the ones before it.
	n := len(c.trailers)
	if n == 0 {
		return nil, errChunks
	}
	name, sig, _ := strings.Cut(c.trailers[n-1], ":")
	if name != trailerSigName {
		return nil, errChunks
	}
	signed := slices.Clone(c.trailers[:n-1])
	slices.Sort(signed)
	canonical := ""
	for _, t := range signed {
		canonical += t + "\n"
	}
	if subtle.ConstantTimeCompare([]byte(trailerSignature(c.inKey, c.amzDate, c.scope, c.prevIn, canonical)), []byte(sig)) != 1 {
		return nil, errChunks
	}
	return append(out, c.trailerBytes(trailerSignature(c.outKey, c.amzDate, c.scope, c.prevOut, canonical))...), nil
}

// trailerBytes is the trailer lines and the empty line as they go
// upstream, the signature line's value sig when a signed form's.
func (c *Chunks) trailerBytes(sig string) []byte {
	var out []byte
	for i, t := range c.trailers {
		if sig != "" && i == len(c.trailers)-1 {
			t = trailerSigName + ":" + sig
		}
		out = append(append(out, t...), "\r\n"...)
	}
	return append(out, "\r\n"...)
}

// End reports whether the body ended where an aws-chunked body ends:
// after its last line. A host calls it at the body's end.
// What c held is given back either way.
func (c *Chunks) End() error {
	c.hold.Close()
	if !c.done {
		c.failed = true
		return errChunks
	}
	return nil
}

// Reader is r's body re-signed: what a Go host sends upstream in r's
// place. A body that does not verify ends in an error, so the upstream
// never sees it end well.
func (c *Chunks) Reader(r io.ReadCloser) io.ReadCloser { return &chunkReader{c: c, r: r} }

type chunkReader struct {
	c   *Chunks
	r   io.ReadCloser
	buf [32 << 10]byte
	out []byte
	err error
}

func (cr *chunkReader) Read(p []byte) (int, error) {
	for len(cr.out) == 0 {
		if cr.err != nil {
			return 0, cr.err
		}
		n, err := cr.r.Read(cr.buf[:])
		out, werr := cr.c.Write(cr.buf[:n])
		cr.out = out
		switch {
		case werr != nil:
			cr.out, cr.err = nil, werr
		case err == io.EOF:
			cr.err = io.EOF
			if eerr := cr.c.End(); eerr != nil {
				cr.out, cr.err = nil, eerr
			}
		case err != nil:
			cr.err = err
		}
	}
	n := copy(p, cr.out)
	cr.out = cr.out[n:]
	return n, nil
}

func (cr *chunkReader) Close() error {
	cr.c.Close()
	return cr.r.Close()
}
