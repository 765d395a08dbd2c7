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
	c := newChunks(exampleSecret, otherSecret, exampleDate, "us-east-1", "s3", exampleSeed, otherSeed)
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
	back := newChunks(otherSecret, exampleSecret, exampleDate, "us-east-1", "s3", otherSeed, exampleSeed)
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
		c := newChunks(exampleSecret, "x-secret-Kq7Zr2Vw9Ty4Hn6Xp3", exampleDate, "us-east-1", "s3", seed, exampleSeed)
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
		c := newChunks(exampleSecret, "x-secret-Kq7Zr2Vw9Ty4Hn6Xp3", exampleDate, "us-east-1", "s3", exampleSeed, exampleSeed)
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

// FuzzChunks: whatever bytes the agent sends and however the host's reads
// split them, Chunks never panics, gives the same answer for every split,
// and what it passes upstream is exactly as long as what it read.
func FuzzChunks(f *testing.F) {
	f.Add(chunkedBody(exampleChunks, exampleSigs), 7)
	f.Add([]byte("0;chunk-signature="+exampleSigs[0]+"\r\n\r\n"), 1)
	f.Add([]byte("+1;chunk-signature="+exampleSigs[0]+"\r\nx\r\n"), 3)
	f.Fuzz(func(t *testing.T, body []byte, cut int) {
		run := func(parts ...[]byte) ([]byte, error) {
			c := newChunks(exampleSecret, "x-secret-Kq7Zr2Vw9Ty4Hn6Xp3", exampleDate, "us-east-1", "s3", exampleSeed, exampleSeed)
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
