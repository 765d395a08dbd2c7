package filter

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"io"
	"strconv"
	"strings"
)

// A signed aws-chunked upload (x-amz-content-sha256:
// STREAMING-AWS4-HMAC-SHA256-PAYLOAD) signs each chunk of the body with
// the signature of the one before, starting from the request's own
// signature (the seed). The agent's chain is made with the stand-in
// secret; Chunks checks each link of it and writes the real key's chain in
// its place as the body streams. A signature is 64 hex digits either way,
// so the body's length does not change.
//
// The AWS SDK for Go v2 exports no signer for these chunks (its stream
// signer is the event stream's), so the chain is computed here: the
// signing key as SigV4 derives it, and each chunk's string to sign as
// AWS's "Transferring Payload in Multiple Chunks" gives it, checked
// against AWS's published example (TestChunksAWSExample).

// StreamingSignedPayload is the x-amz-content-sha256 of a signed
// aws-chunked upload that Chunks re-signs. Its trailer form
// (…-PAYLOAD-TRAILER) is refused (ReasonAWSChunked).
const StreamingSignedPayload = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"

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

// Chunks re-signs one signed aws-chunked body: Decision.Chunks, which a
// host puts every byte of the request body through (Write, or Reader) on
// its way upstream. It is one request's, used by one goroutine.
type Chunks struct {
	inKey, outKey   []byte
	amzDate, scope  string
	prevIn, prevOut string

	line     []byte // the chunk line being read
	size     int    // the chunk being read: its data's length, -1 reading its line
	sizeText string // its size as the agent spelled it (hex digits only)
	sig      string // its signature, as the agent sent it
	data     []byte // its data and CRLF so far
	done     bool   // the final (empty) chunk was read: the body ends here
	failed   bool   // a refusal was returned
}

// SigV4ChunkText is the answer to a signed aws-chunked body that does not
// verify (ChunksRefused).
const SigV4ChunkText = "a chunk of the signed aws-chunked body does not verify with the stand-in secret key (or the body ends before its final chunk); the request was cut"

// ChunksRefused is a host's answer when Decision.Chunks refused the body
// (Failed), if no answer went out yet: 403, reason signature.
func (e *Engine) ChunksRefused(target string) *Reply {
	return reply(403, ReasonSignature, SigV4ChunkText)
}

// Failed reports whether c refused the body.
func (c *Chunks) Failed() bool { return c.failed }

// errChunks is every refusal of a chunked body: the host cuts the request,
// and the answer is a reset or the engine's 502 (no value, no signature).
var errChunks = errors.New("the signed aws-chunked body does not verify with the stand-in secret key")

// maxChunkLine bounds a chunk line: hex size, ";chunk-signature=", 64 hex.
const maxChunkLine = 128

func newChunks(inSecret, outSecret, amzDate, region, service, seedIn, seedOut string) *Chunks {
	return &Chunks{
		inKey: signingKey(inSecret, amzDate[:8], region, service), outKey: signingKey(outSecret, amzDate[:8], region, service),
		amzDate: amzDate, scope: amzDate[:8] + "/" + region + "/" + service + "/aws4_request",
		prevIn: seedIn, prevOut: seedOut, size: -1,
	}
}

// Write takes the next bytes of the body and returns the bytes that go
// upstream now: each chunk whole once its data arrived and its signature
// verified, with the real key's signature in its line. An error means the
// body is not one the stand-in chain signed: nothing more may go upstream.
func (c *Chunks) Write(p []byte) ([]byte, error) {
	out, err := c.write(p)
	if err != nil {
		c.failed = true
	}
	return out, err
}

func (c *Chunks) write(p []byte) ([]byte, error) {
	var out []byte
	for len(p) > 0 {
		if c.done {
			return nil, errChunks
		}
		if c.size < 0 {
			i := strings.IndexByte(string(p), '\n')
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
			if err := c.readLine(); err != nil {
				return nil, err
			}
			continue
		}
		n := min(len(p), c.size+2-len(c.data))
		c.data = append(c.data, p[:n]...)
		p = p[n:]
		if len(c.data) < c.size+2 {
			continue
		}
		chunk, err := c.finish()
		if err != nil {
			return nil, err
		}
		out = append(out, chunk...)
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

// readLine reads "<hex size>;chunk-signature=<signature>\r\n".
func (c *Chunks) readLine() error {
	line := strings.TrimSuffix(string(c.line), "\r\n")
	c.line = c.line[:0]
	hexSize, sig, ok := strings.Cut(line, ";chunk-signature=")
	if !ok || !isHexDigits(hexSize) || len(sig) != 64 || !isLowerHex(sig) {
		return errChunks
	}
	size, err := strconv.ParseInt(hexSize, 16, 64)
	if err != nil || size > MaxSignedBody {
		return errChunks
	}
	// The size goes upstream as the agent spelled it (leading zeros,
	// either case), so the body keeps its length and Content-Length stays
	// true; only the signature, 64 hex either way, changes.
	c.size, c.sizeText, c.sig, c.data = int(size), hexSize, sig, c.data[:0]
	return nil
}

// finish checks the chunk read and returns it re-signed.
func (c *Chunks) finish() ([]byte, error) {
	data := c.data[:c.size]
	if string(c.data[c.size:]) != "\r\n" {
		return nil, errChunks
	}
	if subtle.ConstantTimeCompare([]byte(chunkSignature(c.inKey, c.amzDate, c.scope, c.prevIn, data)), []byte(c.sig)) != 1 {
		return nil, errChunks
	}
	sig := chunkSignature(c.outKey, c.amzDate, c.scope, c.prevOut, data)
	c.prevIn, c.prevOut = c.sig, sig
	out := make([]byte, 0, len(data)+100)
	out = append(append(append(out, c.sizeText...), ";chunk-signature="+sig+"\r\n"...), c.data...)
	if c.size == 0 {
		c.done = true // its CRLF is the body's last
	}
	c.size = -1
	return out, nil
}

// End reports whether the body ended where a signed aws-chunked body
// ends: after its final chunk. A host calls it at the body's end.
func (c *Chunks) End() error {
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

func (cr *chunkReader) Close() error { return cr.r.Close() }
