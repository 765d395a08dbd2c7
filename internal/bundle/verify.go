package bundle

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// Status is the verdict of Verify.
type Status int

// The verdicts, with the exit codes of `custodian verify` (spec run.md).
const (
	Verified  Status = iota // exit 0
	Truncated               // exit 3
	Tampered                // exit 4
)

// Result is what Verify found:
//
//   - VERIFIED: every line chains and the seal ends the file (exit 0).
//   - TRUNCATED (verifiable prefix of N records): the lines 1..N chain and
//     no seal follows, possibly with a torn last line, a prefix of a line
//     cut by a kill mid-write, which is not counted (exit 3). The last
//     record of an unsealed bundle has no successor to vouch for it: it is
//     counted when it is well formed and chains, but an edit inside it
//     cannot be told from the original.
//   - TAMPERED (record K): line K is not what the writer wrote (exit 4). K is
//     the record whose bytes changed where the chain can tell (a broken link
//     whose later side is vouched for by its own successor or seal points at
//     the earlier side), else the first record not vouched for. A bundle
//     re-sealed with another key is TAMPERED at record 1 (the key it
//     names) or at the seal (the signature) under VerifyKeyed with the key
//     the run printed.
type Result struct {
	Status Status
	// Records is the number of records that chain from the start: all of
	// them with the seal when Verified, the verifiable prefix when
	// Truncated, the records before Record when Tampered.
	Records uint64
	// Record is the first record found altered, when Tampered.
	Record uint64
}

// String renders the verdict as `custodian verify` prints it.
func (r Result) String() string {
	switch r.Status {
	case Verified:
		return "VERIFIED"
	case Truncated:
		return fmt.Sprintf("TRUNCATED (verifiable prefix of %d records)", r.Records)
	default:
		return fmt.Sprintf("TAMPERED (record %d)", r.Record)
	}
}

// ExitCode is the exit code of `custodian verify` for r: 0, 3 or 4.
func (r Result) ExitCode() int {
	switch r.Status {
	case Verified:
		return 0
	case Truncated:
		return 3
	default:
		return 4
	}
}

// Verify checks the bundle at path. The error is for a file that cannot be
// read; every content fault is a verdict.
func Verify(path string) (Result, error) {
	f, err := os.Open(path)
	if err != nil {
		return Result{}, fmt.Errorf("bundle: %w", err)
	}
	defer f.Close()
	return VerifyReader(f)
}

// VerifyReader checks a bundle read from r, streaming: it holds two lines
// at a time, whatever the bundle's size.
func VerifyReader(r io.Reader) (Result, error) { return VerifyKeyed(r, nil) }

// VerifyKeyed is VerifyReader holding the bundle to a public key: the
// run-start record must name it and the seal must carry its signature, or
// the verdict is TAMPERED (the run-start record, or the seal). With want
// nil, a bundle whose run-start names a key is held to that key (which
// proves only that the file agrees with itself: a forger who rewrites it
// can name a key of their own).
func VerifyKeyed(r io.Reader, want ed25519.PublicKey) (Result, error) {
	v := verifier{prev: Genesis, want: want}
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return Result{}, fmt.Errorf("bundle: read: %w", err)
		}
		if len(line) > 0 && line[len(line)-1] == '\n' {
			if res, done := v.line(line[:len(line)-1]); done {
				return res, nil
			}
			continue
		}
		return v.end(line), nil
	}
}

// verifier walks the lines. A broken link (line n's prev is not the hash of
// line n-1) is held as suspect until the next line says which side changed.
type verifier struct {
	n       uint64 // lines read and well formed
	prev    string // hex sha256 of line n, Genesis before line 1
	sealed  bool
	suspect uint64            // line whose prev does not match the line before; 0: none
	want    ed25519.PublicKey // the key the caller holds the bundle to; nil: run-start's
	key     ed25519.PublicKey // the key the seal must be signed with; nil: unkeyed
}

// line checks one complete line (without '\n'). done is set with a verdict.
func (v *verifier) line(line []byte) (Result, bool) {
	seq := v.n + 1
	if v.sealed {
		return tampered(seq), true
	}
	rec, ok := parse(line)
	if !ok || rec.Seq != seq {
		return v.resolve(seq, false), true
	}
	if v.suspect != 0 {
		// Line seq-1 broke its link to the line before it; seq's prev says
		// whether seq-1 itself is what was written.
		return v.resolve(seq, rec.Prev == v.prev), true
	}
	if rec.Prev != v.prev {
		if seq == 1 {
			return tampered(1), true
		}
		v.suspect = seq
	}
	if seq == 1 {
		key, ok := parseKey(rec.Pubkey)
		switch {
		case !ok, v.want != nil && !key.Equal(v.want):
			return tampered(1), true
		}
		v.key = key
	}
	sum := sha256.Sum256(line)
	v.n, v.prev = seq, hex.EncodeToString(sum[:])
	if rec.Kind == KindSeal {
		if !sealIntact(line, rec, seq) || !v.signed(line, rec) {
			return v.resolve(seq, false), true
		}
		v.sealed = true
		if v.suspect != 0 {
			// The seal vouches for itself: the line before it changed.
			return tampered(v.suspect - 1), true
		}
	}
	return Result{}, false
}

// resolve is the verdict when line bad is not as written. With a suspect
// link pending, vouched says whether the suspect line is vouched for by its
// successor: then the line before the suspect changed, else the suspect did.
func (v *verifier) resolve(bad uint64, vouched bool) Result {
	if v.suspect == 0 {
		return tampered(bad)
	}
	if vouched {
		return tampered(v.suspect - 1)
	}
	return tampered(v.suspect)
}

// end is the verdict at the end of the file; rest is what followed the last
// '\n'.
func (v *verifier) end(rest []byte) Result {
	switch {
	case v.suspect != 0:
		// The last line broke its link and nothing vouches for it: the
		// first record not vouched for is the one before it.
		return tampered(v.suspect - 1)
	case len(rest) > 0 && (v.sealed || !tornLine(rest)):
		return tampered(v.n + 1)
	case v.sealed:
		return Result{Status: Verified, Records: v.n}
	default:
		return Result{Status: Truncated, Records: v.n}
	}
}

func tampered(k uint64) Result {
	return Result{Status: Tampered, Records: k - 1, Record: k}
}

type record struct {
	Seq     uint64  `json:"seq"`
	Time    string  `json:"time"`
	Kind    string  `json:"kind"`
	Prev    string  `json:"prev"`
	Records *uint64 `json:"records"`
	Seal    *string `json:"seal"`
	Sig     *string `json:"sig"`
	Pubkey  *string `json:"pubkey"`
}

// KeyPrefix begins a public key as a bundle names it: "ed25519:" and the
// key in standard base64.
const KeyPrefix = "ed25519:"

// FormatKey renders a public key as a bundle and the runner name it.
func FormatKey(k ed25519.PublicKey) string { return KeyPrefix + base64.StdEncoding.EncodeToString(k) }

// ParseKey reads a key FormatKey rendered.
func ParseKey(s string) (ed25519.PublicKey, error) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, KeyPrefix))
	if !strings.HasPrefix(s, KeyPrefix) || err != nil || len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("not a key: give it as the run printed it, %s followed by 44 characters of base64", KeyPrefix)
	}
	return ed25519.PublicKey(b), nil
}

// parseKey reads run-start's pubkey: none (nil, true), or a key.
func parseKey(s *string) (ed25519.PublicKey, bool) {
	if s == nil {
		return nil, true
	}
	k, err := ParseKey(*s)
	return k, err == nil
}

// signed checks the seal's signature: required, and by v.key, when
// run-start named a key (or the caller holds the bundle to one); absent
// otherwise. The signature is over the seal line as rendered before its
// "sig" and "seal" members.
func (v *verifier) signed(line []byte, r record) bool {
	if v.key == nil {
		return r.Sig == nil && v.want == nil
	}
	if r.Sig == nil {
		return false
	}
	sig, err := base64.StdEncoding.DecodeString(*r.Sig)
	suffix := `,"sig":"` + *r.Sig + `","seal":"` + *r.Seal + `"}`
	if err != nil || !bytes.HasSuffix(line, []byte(suffix)) {
		return false
	}
	signedPart := append(bytes.Clone(line[:len(line)-len(suffix)]), '}')
	return ed25519.Verify(v.key, signedPart, sig)
}

// parse decodes a line's header and checks it is exactly what the writer
// renders: a known kind, an RFC 3339 time, a 64-hex prev, the header members
// first and in order, no seal member on another kind.
func parse(line []byte) (record, bool) {
	var r record
	if err := json.Unmarshal(line, &r); err != nil {
		return r, false
	}
	if !known(r.Kind) || len(r.Prev) != 64 || (r.Seal != nil) != (r.Kind == KindSeal) {
		return r, false
	}
	if _, err := hex.DecodeString(r.Prev); err != nil {
		return r, false
	}
	if _, err := time.Parse(time.RFC3339Nano, r.Time); err != nil {
		return r, false
	}
	return r, bytes.HasPrefix(line, header(r.Seq, r.Time, r.Kind, r.Prev))
}

// sealIntact checks the seal line's own hash and its count of records.
func sealIntact(line []byte, r record, seq uint64) bool {
	if r.Records == nil || *r.Records != seq-1 || r.Seal == nil {
		return false
	}
	suffix := `,"seal":"` + *r.Seal + `"}`
	if len(*r.Seal) != 64 || !bytes.HasSuffix(line, []byte(suffix)) {
		return false
	}
	body := append(bytes.Clone(line[:len(line)-len(suffix)]), '}')
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:]) == *r.Seal
}

// tornLine reports whether b, the bytes after the last '\n', can be the
// start of a line the writer was killed while writing: one JSON object, cut
// short (or complete but for its '\n').
func tornLine(b []byte) bool {
	if b[0] != '{' {
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	depth := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{', '[':
				depth++
			default:
				depth--
			}
		}
		if depth == 0 {
			// The object is complete: nothing may follow it.
			_, err := dec.Token()
			return errors.Is(err, io.EOF)
		}
	}
}
