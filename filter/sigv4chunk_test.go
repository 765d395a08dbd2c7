package filter

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
)

// AWS's published example of a signed aws-chunked upload ("Transferring
// Payload in Multiple Chunks"): 66560 bytes of "a" in a chunk of 65536,
// one of 1024 and the empty last one, with the example key.
const (
	exampleSecret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
	exampleDate   = "20130524T000000Z"
	exampleSeed   = "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9"
)

var exampleSigs = []string{
	"ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648",
	"0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497",
	"b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9",
}

// chunkedBody frames data's chunks with sigs.
func chunkedBody(chunks [][]byte, sigs []string) []byte {
	var b bytes.Buffer
	for i, c := range chunks {
		b.WriteString(strconv.FormatInt(int64(len(c)), 16) + ";chunk-signature=" + sigs[i] + "\r\n")
		b.Write(c)
		b.WriteString("\r\n")
	}
	return b.Bytes()
}

var exampleChunks = [][]byte{bytes.Repeat([]byte("a"), 65536), bytes.Repeat([]byte("a"), 1024), {}}

// TestChunksAWSExample: the chain Chunks checks is AWS's own: the
// published example verifies, and what Chunks writes in its place verifies
// as the chain of the other key, seeded by the other signature.
func TestChunksAWSExample(t *testing.T) {
	const otherSecret, otherSeed = "another-secret-key-Kq7Zr2Vw9Ty4", "1111111111111111111111111111111111111111111111111111111111111111"
	c := newChunks(formSigned, exampleSecret, otherSecret, exampleDate, "us-east-1", "s3", exampleSeed, otherSeed)
	body := chunkedBody(exampleChunks, exampleSigs)
	out, err := io.ReadAll(c.Reader(io.NopCloser(iotestHalves(body))))
	if err != nil {
		t.Fatalf("AWS's example did not verify: %v", err)
	}
	if len(out) != len(body) {
		t.Fatalf("the re-signed body is %d bytes, the agent's %d", len(out), len(body))
	}
	if bytes.Contains(out, []byte(exampleSigs[0])) {
		t.Fatal("the stand-in chain's signature went upstream")
	}
	back := newChunks(formSigned, otherSecret, exampleSecret, exampleDate, "us-east-1", "s3", otherSeed, exampleSeed)
	again, err := io.ReadAll(back.Reader(io.NopCloser(bytes.NewReader(out))))
	if err != nil || !bytes.Equal(again, body) {
		t.Fatalf("the re-signed chain does not verify as the other key's: %v", err)
	}
}

// TestChunksRefused: a chunk changed, a signature from another chain, a
// body cut before its final chunk, bytes after it, and a malformed line
// all fail the body.
func TestChunksRefused(t *testing.T) {
	good := chunkedBody(exampleChunks, exampleSigs)
	changed := bytes.Replace(append([]byte(nil), good...), []byte("aaaa"), []byte("aaab"), 1)
	for name, body := range map[string][]byte{
		"a chunk changed":       changed,
		"another seed":          good, // checked with the wrong seed below
		"cut before the end":    good[:len(good)-90],
		"bytes after the end":   append(append([]byte(nil), good...), 'x'),
		"a malformed line":      []byte("zz;chunk-signature=" + exampleSigs[0] + "\r\n"),
		"a line without an end": []byte(strings.Repeat("1", 200)),
	} {
		seed := exampleSeed
		if name == "another seed" {
			seed = exampleSigs[2]
		}
		c := newChunks(formSigned, exampleSecret, "x-secret-Kq7Zr2Vw9Ty4Hn6Xp3", exampleDate, "us-east-1", "s3", seed, exampleSeed)
		if _, err := io.ReadAll(c.Reader(io.NopCloser(bytes.NewReader(body)))); !errors.Is(err, errChunks) {
			t.Errorf("%s: %v, want the refusal", name, err)
		}
	}
}

// iotestHalves reads b in pieces that cut chunk lines and data anywhere.
func iotestHalves(b []byte) io.Reader {
	var rs []io.Reader
	for len(b) > 0 {
		n := min(len(b), 7777)
		rs = append(rs, bytes.NewReader(b[:n]))
		b = b[n:]
	}
	return io.MultiReader(rs...)
}

// TestChunksKeepTheSizeSpelling: a size the agent spells with leading
// zeros or in capitals verifies (the chunk signature covers the data, not
// the line) and goes upstream spelled as sent, so the body keeps its
// length and its Content-Length stays true; a sign, a space or a 0x
// prefix, which parsers read differently, is refused.
func TestChunksKeepTheSizeSpelling(t *testing.T) {
	good := chunkedBody(exampleChunks, exampleSigs)
	first := []byte(strconv.FormatInt(int64(len(exampleChunks[0])), 16) + ";")
	if !bytes.HasPrefix(good, first) {
		t.Fatalf("the example body does not start with %q", first)
	}
	for _, tc := range []struct {
		size string
		ok   bool
	}{
		{"0" + string(first[:len(first)-1]), true},
		{strings.ToUpper("00" + string(first[:len(first)-1])), true},
		{"+" + string(first[:len(first)-1]), false},
		{" " + string(first[:len(first)-1]), false},
		{"0x" + string(first[:len(first)-1]), false},
	} {
		body := append([]byte(tc.size+";"), good[len(first):]...)
		c := newChunks(formSigned, exampleSecret, "x-secret-Kq7Zr2Vw9Ty4Hn6Xp3", exampleDate, "us-east-1", "s3", exampleSeed, exampleSeed)
		out, err := io.ReadAll(c.Reader(io.NopCloser(bytes.NewReader(body))))
		switch {
		case tc.ok && err != nil:
			t.Errorf("size %q: %v, want it re-signed", tc.size, err)
		case tc.ok && (len(out) != len(body) || !bytes.HasPrefix(out, []byte(tc.size+";"))):
			t.Errorf("size %q: %d bytes upstream starting %.20q; want %d starting as sent", tc.size, len(out), out, len(body))
		case !tc.ok && !errors.Is(err, errChunks):
			t.Errorf("size %q: %v, want the refusal", tc.size, err)
		}
	}
}

// FuzzChunks: whatever bytes the agent sends, in whichever form, and
// however the host's reads split them, Chunks never panics, gives the
// same answer for every split, and what it passes upstream is exactly as
// long as what it read.
func FuzzChunks(f *testing.F) {
	f.Add(chunkedBody(exampleChunks, exampleSigs), 7, uint8(formSigned))
	f.Add([]byte("0;chunk-signature="+exampleSigs[0]+"\r\n\r\n"), 1, uint8(formSigned))
	f.Add([]byte("+1;chunk-signature="+exampleSigs[0]+"\r\nx\r\n"), 3, uint8(formSigned))
	f.Add(trailerBody(exampleTrailers, exampleTrailerSig), 66600, uint8(formSignedTrailer))
	f.Add([]byte("6\r\nhello \r\n0\r\nx-amz-checksum-crc32:gtnkmQ==\r\n\r\n"), 9, uint8(formUnsignedTrailer))
	f.Add([]byte("0\r\n\r\n"), 2, uint8(formUnsignedTrailer))
	f.Add(manyChunks(formSigned, 3, 1), 100, uint8(formSigned)) // short chunks before the last: refused
	f.Add(manyChunks(formUnsignedTrailer, 50, 1), 37, uint8(formUnsignedTrailer))
	f.Fuzz(func(t *testing.T, body []byte, cut int, form uint8) {
		form %= uint8(formUnsignedTrailer) + 1
		run := func(parts ...[]byte) ([]byte, error) {
			c := newChunks(chunkForm(form), exampleSecret, "x-secret-Kq7Zr2Vw9Ty4Hn6Xp3", exampleDate, "us-east-1", "s3", exampleSeed, exampleSeed)
			var out []byte
			for _, p := range parts {
				o, err := c.Write(p)
				if err != nil {
					return nil, err
				}
				out = append(out, o...)
			}
			return out, c.End()
		}
		whole, errWhole := run(body)
		if cut < 0 {
			cut = -cut
		}
		if len(body) > 0 {
			cut %= len(body) + 1
		} else {
			cut = 0
		}
		split, errSplit := run(body[:cut], body[cut:])
		if (errWhole == nil) != (errSplit == nil) || !bytes.Equal(whole, split) {
			t.Fatalf("split at %d: %v / %v, %d / %d bytes", cut, errWhole, errSplit, len(whole), len(split))
		}
		if errWhole == nil && len(whole) != len(body) {
			t.Fatalf("a verified body of %d bytes went upstream as %d", len(body), len(whole))
		}
	})
}

// exampleTrailerSig is the trailer signature AWS's own signing library
// (aws-c-auth, sigv4_trailing_headers_signing_test) makes for the trailer
// lines first:1st, second:2nd, third:3rd after AWS's published chunk
// example above, chained to its zero chunk's signature.
const exampleTrailerSig = "df5735bd9f3295cd9386572292562fefc93ba94e80a0a1ddcbd652c4e0a75e6c"

// trailerBody is the signed -TRAILER body of AWS's example: its chunks,
// the zero chunk's line, the trailer lines and the trailer signature.
func trailerBody(trailers []string, sig string) []byte {
	b := chunkedBody(exampleChunks[:2], exampleSigs[:2])
	b = append(b, "0;chunk-signature="+exampleSigs[2]+"\r\n"...)
	for _, t := range trailers {
		b = append(b, t+"\r\n"...)
	}
	return append(b, "x-amz-trailer-signature:"+sig+"\r\n\r\n"...)
}

var exampleTrailers = []string{"first:1st", "second:2nd", "third:3rd"}

// TestChunksAWSTrailerExample: the trailer signature Chunks checks is
// AWS's own (its library's test vector verifies), and what Chunks writes
// in its place verifies as the other key's chain, the body's length kept.
func TestChunksAWSTrailerExample(t *testing.T) {
	const otherSecret, otherSeed = "another-secret-key-Kq7Zr2Vw9Ty4", "1111111111111111111111111111111111111111111111111111111111111111"
	body := trailerBody(exampleTrailers, exampleTrailerSig)
	c := newChunks(formSignedTrailer, exampleSecret, otherSecret, exampleDate, "us-east-1", "s3", exampleSeed, otherSeed)
	out, err := io.ReadAll(c.Reader(io.NopCloser(iotestHalves(body))))
	if err != nil {
		t.Fatalf("AWS's trailer example did not verify: %v", err)
	}
	if len(out) != len(body) || bytes.Contains(out, []byte(exampleTrailerSig)) || !bytes.Contains(out, []byte("\r\nthird:3rd\r\nx-amz-trailer-signature:")) {
		t.Fatalf("the re-signed body: %d bytes (want %d), the stand-in trailer signature in it or the trailers not as sent", len(out), len(body))
	}
	back := newChunks(formSignedTrailer, otherSecret, exampleSecret, exampleDate, "us-east-1", "s3", otherSeed, exampleSeed)
	again, err := io.ReadAll(back.Reader(io.NopCloser(bytes.NewReader(out))))
	if err != nil || !bytes.Equal(again, body) {
		t.Fatalf("the re-signed chain does not verify as the other key's: %v", err)
	}
	// The trailer lines are signed in name order, whatever order they came in.
	shuffled := trailerBody([]string{"third:3rd", "first:1st", "second:2nd"}, exampleTrailerSig)
	c = newChunks(formSignedTrailer, exampleSecret, otherSecret, exampleDate, "us-east-1", "s3", exampleSeed, otherSeed)
	if _, err := io.ReadAll(c.Reader(io.NopCloser(bytes.NewReader(shuffled)))); err != nil {
		t.Fatalf("trailers out of name order: %v", err)
	}
}

// TestChunksTrailerRefused: a signed -TRAILER body whose trailer was
// changed, lacks its signature, has a line after it, repeats a line, or
// spells one outside the grammar, fails; and so does one of the plain
// signed form that has trailer lines at all.
func TestChunksTrailerRefused(t *testing.T) {
	for name, tc := range map[string]struct {
		form chunkForm
		body []byte
	}{
		"a trailer changed":           {formSignedTrailer, trailerBody([]string{"first:1st", "second:2nd", "third:3RD"}, exampleTrailerSig)},
		"a trailer added":             {formSignedTrailer, trailerBody(append([]string{"fourth:4th"}, exampleTrailers...), exampleTrailerSig)},
		"no trailer signature":        {formSignedTrailer, append(chunkedBody(exampleChunks[:2], exampleSigs[:2]), "0;chunk-signature="+exampleSigs[2]+"\r\nfirst:1st\r\n\r\n"...)},
		"a line after the signature":  {formSignedTrailer, bytes.Replace(trailerBody(exampleTrailers, exampleTrailerSig), []byte("\r\n\r\n"), []byte("\r\nfifth:5th\r\n\r\n"), 1)},
		"a trailer twice":             {formSignedTrailer, trailerBody([]string{"first:1st", "first:1st"}, exampleTrailerSig)},
		"a trailer name in capitals":  {formSignedTrailer, trailerBody([]string{"First:1st", "second:2nd", "third:3rd"}, exampleTrailerSig)},
		"a trailer value with spaces": {formSignedTrailer, trailerBody([]string{"first: 1st", "second:2nd", "third:3rd"}, exampleTrailerSig)},
		"a bare LF":                   {formSignedTrailer, bytes.Replace(trailerBody(exampleTrailers, exampleTrailerSig), []byte("first:1st\r\n"), []byte("first:1st\n"), 1)},
		"bytes after the end":         {formSignedTrailer, append(trailerBody(exampleTrailers, exampleTrailerSig), '0')},
		"trailers in the plain form":  {formSigned, trailerBody(exampleTrailers, exampleTrailerSig)},
		"the trailer form cut short":  {formSignedTrailer, trailerBody(exampleTrailers, exampleTrailerSig)[:66700]},
	} {
		c := newChunks(tc.form, exampleSecret, "x-secret-Kq7Zr2Vw9Ty4Hn6Xp3", exampleDate, "us-east-1", "s3", exampleSeed, exampleSeed)
		if _, err := io.ReadAll(c.Reader(io.NopCloser(bytes.NewReader(tc.body)))); !errors.Is(err, errChunks) {
			t.Errorf("%s: %v, want the refusal", name, err)
		}
	}
}

// TestChunksUnsignedTrailer: an unsigned -TRAILER body (what the SDKs'
// flexible checksums send by default) goes upstream byte for byte, data as
// it arrives; one that breaks the grammar — a size not plain hex, a chunk
// signature, a trailer signature, a missing CRLF, an end before the empty
// line — fails.
func TestChunksUnsignedTrailer(t *testing.T) {
	good := []byte("6\r\nhello \r\n0006\r\nstream\r\n0\r\nx-amz-checksum-crc32:gtnkmQ==\r\n\r\n")
	c := newChunks(formUnsignedTrailer, "", "", exampleDate, "us-east-1", "s3", exampleSeed, exampleSeed)
	out, err := c.Write(good[:6])
	if err != nil || string(out) != "6\r\nhel" {
		t.Fatalf("the first bytes: %q, %v; want the size line and the data so far", out, err)
	}
	rest, err := c.Write(good[6:])
	if err != nil || c.End() != nil || string(out)+string(rest) != string(good) {
		t.Fatalf("the body went on as %q, %v; want it as sent", string(out)+string(rest), err)
	}
	for name, body := range map[string]string{
		"a size with 0x":        "0x6\r\nhello \r\n0\r\n\r\n",
		"a size with a sign":    "+6\r\nhello \r\n0\r\n\r\n",
		"a chunk extension":     "6;chunk-signature=" + exampleSigs[0] + "\r\nhello \r\n0\r\n\r\n",
		"a trailer signature":   "6\r\nhello \r\n0\r\nx-amz-checksum-crc32:gtnkmQ==\r\nx-amz-trailer-signature:" + exampleSigs[0] + "\r\n\r\n",
		"no CRLF after data":    "6\r\nhello !!0\r\n\r\n",
		"no empty line":         "6\r\nhello \r\n0\r\nx-amz-checksum-crc32:gtnkmQ==\r\n",
		"a trailer with no ':'": "6\r\nhello \r\n0\r\nx-amz-checksum-crc32\r\n\r\n",
		"bytes after the end":   "0\r\n\r\n0",
	} {
		c := newChunks(formUnsignedTrailer, "", "", exampleDate, "us-east-1", "s3", exampleSeed, exampleSeed)
		if _, err := io.ReadAll(c.Reader(io.NopCloser(strings.NewReader(body)))); !errors.Is(err, errChunks) {
			t.Errorf("%s: %v, want the refusal", name, err)
		}
	}
}

// TestChunksHeldBudget: a signed chunk held whole until its signature
// verified counts in the process's budget of held bytes from its first
// byte, is given back once the bytes it went out in went on (the next
// Write) and at the body's end; a chunk past the budget is refused with
// the budget's 503, and a body cut mid-chunk (Close) holds nothing after.
func TestChunksHeldBudget(t *testing.T) {
	base := HeldBytes()
	body := chunkedBody(exampleChunks, exampleSigs)
	const otherSeed = "1111111111111111111111111111111111111111111111111111111111111111"
	newC := func() *Chunks {
		return newChunks(formSigned, exampleSecret, "another-secret-key-Kq7Zr2Vw9Ty4", exampleDate, "us-east-1", "s3", exampleSeed, otherSeed)
	}

	c := newC()
	half := 100 + 65536/2
	if out, err := c.Write(body[:half]); err != nil || len(out) != 0 {
		t.Fatalf("half a chunk: %d bytes out, %v", len(out), err)
	}
	if got := HeldBytes() - base; got != int64(half-len("10000;chunk-signature=")-64-2) {
		t.Fatalf("half a chunk held: %d bytes counted", got)
	}
	first := len("10000;chunk-signature=") + 64 + 2 + 65536 + 2
	if out, err := c.Write(body[half:first]); err != nil || len(out) != first {
		t.Fatalf("the first chunk: %d bytes out, %v", len(out), err)
	}
	if got := HeldBytes() - base; got != 65536+2 {
		t.Fatalf("the chunk being sent: %d bytes counted, want %d", got, 65536+2)
	}
	if _, err := c.Write(body[first : first+1]); err != nil || HeldBytes() != base {
		t.Fatalf("after the chunk went on: %v, %d bytes counted", err, HeldBytes()-base)
	}
	if out, err := c.Write(body[first+1:]); err != nil || c.End() != nil || len(out) != len(body)-first { // the byte before is the next line's first
		t.Fatalf("the rest: %d bytes, %v", len(out), err)
	}
	if HeldBytes() != base {
		t.Fatalf("after the body's end: %d bytes counted", HeldBytes()-base)
	}

	// Cut mid-chunk: the host closes it.
	c = newC()
	if _, err := c.Write(body[:half]); err != nil || HeldBytes() == base {
		t.Fatalf("half a chunk: %v, %d held", err, HeldBytes()-base)
	}
	c.Close()
	if HeldBytes() != base {
		t.Fatalf("after Close: %d bytes counted", HeldBytes()-base)
	}
	if _, err := c.Write(body[half:]); err == nil || HeldBytes() != base {
		t.Fatalf("a Write after Close: %v, %d bytes counted", err, HeldBytes()-base)
	}

	// The budget spent by others: the chunk is refused, 503.
	var other Hold
	if !other.Take(MaxHeldBodies - int(HeldBytes()) - 1000) {
		t.Fatal("the budget is taken already")
	}
	defer other.Release()
	c = newC()
	if _, err := c.Write(body[:half]); !errors.Is(err, errChunkBudget) || !c.Failed() {
		t.Fatalf("a chunk past the budget: %v", err)
	}
	r := (&Engine{}).ChunksRefused("x:443", c)
	if r.Status != 503 || r.Reason != ReasonHeldBudget || len(r.Headers) != 1 || r.Headers[0].Name != "retry-after" || r.Body != "jr2 custodian: "+HeldChunkText {
		t.Fatalf("the refusal: %+v", r)
	}
	if r := (&Engine{}).ChunksRefused("x:443", newC()); r.Status != 403 || r.Reason != ReasonSignature {
		t.Fatalf("a chunk that does not verify: %+v", r)
	}
	other.Release()
	if HeldBytes() != base {
		t.Fatalf("after the refusal: %d bytes counted", HeldBytes()-base)
	}
}
