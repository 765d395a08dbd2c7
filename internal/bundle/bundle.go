// Package bundle writes and checks the record of a contained run: one JSON
// object per line, each chained to the line before it by hash, sealed when
// the run ends cleanly. docs/run.md gives every record kind and verdict.
//
// Invariant: a line is written whole or not at all by this package, in
// sequence, chained to the line before; once a write fails, or the bundle is
// sealed, nothing more is written. With a ContainsSecret guard, no line that
// the guard flags is ever written. The guard is the last line of defence,
// not the recorders' filter: they write each form of a held value as its
// label, with "scrubbed": true on the record, before it reaches the guard,
// so a record is never missing because it named a value. Writer gives the
// format, Result the verdicts.
//
// NOT covered: without the key from outside the file (VerifyKeyed),
// whoever can rewrite the whole file can name a key of their own and
// re-sign it; an unsealed bundle carries no signature, and an edit inside
// its last record cannot be told from the original.
package bundle

import (
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
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The kinds a record may have (spec run.md), in the order a run writes them.
const (
	KindRunStart       = "run-start"
	KindPolicy         = "policy"
	KindEnv            = "env" // names only
	KindDNSQuery       = "dns-query"
	KindDNSDecision    = "dns-decision"
	KindEgressAttempt  = "egress-attempt" // written before the decision
	KindEgressDecision = "egress-decision"
	KindHTTPRequest    = "http-request"  // as sent upstream, stand-ins in place of values
	KindHTTPResponse   = "http-response" // status, headers, body chunks as framed
	KindSecretInjected = "secret-injected"
	KindRequestBody    = "http-request-body" // the request body as framed, scrubbed, bounded per run
	KindEffectPlanned  = "effect-planned"    // preflight: what would have been sent
	KindFaultInjected  = "fault-injected"    // faults: the seed and the draw
	KindReplayDiverged = "replay-divergence" // replay: a request with no recorded answer
	KindEffectStart    = "effect-start"      // the Effector's receipts: a start
	KindEffectDecision = "effect-decision"   // the Effector's receipts: the fence's decision
	KindEffectOutcome  = "effect-outcome"    // the Effector's receipts: the outcome as answered, scrubbed
	KindRunEnd         = "run-end"
	KindSeal           = "seal" // written by Seal only
)

// Kinds is the closed vocabulary of record kinds.
var Kinds = []string{
	KindRunStart, KindPolicy, KindEnv, KindDNSQuery, KindDNSDecision,
	KindEgressAttempt, KindEgressDecision, KindHTTPRequest, KindHTTPResponse,
	KindSecretInjected, KindRequestBody, KindEffectPlanned, KindFaultInjected,
	KindReplayDiverged, KindEffectStart, KindEffectDecision, KindEffectOutcome,
	KindRunEnd, KindSeal,
}

// Genesis is the prev of the first record.
const Genesis = "0000000000000000000000000000000000000000000000000000000000000000"

// reserved are the keys a caller's fields may not carry.
var reserved = []string{"seq", "time", "kind", "prev", "seal", "sig"}

// Recorder is what the mediator and the runner record through. A Recorder is
// safe for concurrent use; each Append is one whole record.
type Recorder interface {
	// Append writes one record of kind with fields (marshalled as a JSON
	// object; nil for none) and returns its seq.
	Append(kind string, fields any) (seq uint64, err error)
	// Sync makes every appended record durable. Call it after every denial:
	// the denial is the evidence the bundle exists to carry.
	Sync() error
}

// Options configure a Writer. The zero value is valid.
type Options struct {
	// ContainsSecret, when set, is asked about every line before it is
	// written; a line it flags is refused with ErrSecret and not written.
	ContainsSecret func(line []byte) bool
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Key, when set, signs the seal (Ed25519): the seal record gains
	// "sig", the signature of the seal line as rendered before its "sig"
	// and "seal" members. The caller names the public key in the first
	// record (run-start's "pubkey", FormatKey) and prints it where the
	// writer of the file cannot reach; Verify then holds the bundle to it.
	Key ed25519.PrivateKey
}

// Errors of the Writer. None carries a field's value.
var (
	ErrSecret = errors.New("bundle: the record would carry a held secret; it was not written")
	ErrSealed = errors.New("bundle: sealed; nothing more is written")
	ErrBroken = errors.New("bundle: an earlier write failed; nothing more is written")
)

// Writer appends records to a bundle. It implements Recorder. Every
// record is one line:
//
//	{"seq":N,"time":"RFC3339Nano","kind":"…","prev":"<hex sha256>",…fields}
//
// Where:
//   - seq counts from 1, one per line.
//   - prev is the hex sha256 of the previous line's bytes without its '\n';
//     the first record's prev is Genesis, 64 zeros ("no line before").
//   - kind is one of Kinds (docs/run.md); fields are the caller's, never
//     one of the header keys or "seal". "scrubbed": true marks a record
//     whose text had a form of a held value replaced by its label
//     ("[secret:NAME]"); "[withheld]" stands for text the guard still
//     refused once scrubbed.
//   - The last record of a cleanly ended run is the seal:
//     {"seq":N,…,"kind":"seal","prev":…,"records":N-1,"seal":"<hex>"}, where
//     records counts the lines before it and seal is the sha256 of the seal
//     line itself rendered without the ,"seal":"…" member. The seal vouches
//     for itself; every other line is vouched for by the prev of the next.
//     With Options.Key the seal is also signed ("sig").
type Writer struct {
	mu     sync.Mutex
	w      io.Writer
	opt    Options
	seq    uint64
	prev   [32]byte
	sealed bool
	broken error
}

var _ Recorder = (*Writer)(nil)

// Create makes a new bundle file at path (it must not exist; mode 0600) and
// returns its Writer. The file's directory is synced so the name survives a
// crash as the records do.
func Create(path string, opt Options) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("bundle: create: %w", err)
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		f.Close()
		os.Remove(path)
		return nil, err
	}
	return New(f, opt), nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("bundle: sync directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("bundle: sync directory: %w", err)
	}
	return nil
}

// New returns a Writer appending to w, which should be empty: the first
// record written is seq 1. Sync calls w's Sync method when it has one, Seal
// and Close its Close method.
func New(w io.Writer, opt Options) *Writer {
	if opt.Now == nil {
		opt.Now = time.Now
	}
	return &Writer{w: w, opt: opt}
}

// Append writes one record; see Recorder. kind must be one of Kinds other
// than KindSeal; fields must marshal to a JSON object (or be nil) without
// the keys seq, time, kind, prev or seal.
func (w *Writer) Append(kind string, fields any) (uint64, error) {
	if kind == KindSeal || !known(kind) {
		return 0, fmt.Errorf("bundle: kind %q is not a record kind", kind)
	}
	body, err := objectBody(fields)
	if err != nil {
		return 0, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.append(kind, body)
}

// append writes the line for kind with the members body (the inside of a
// JSON object, possibly empty). w.mu is held.
func (w *Writer) append(kind string, body []byte) (uint64, error) {
	switch {
	case w.sealed:
		return 0, ErrSealed
	case w.broken != nil:
		return 0, fmt.Errorf("%w: %v", ErrBroken, w.broken)
	}
	seq := w.seq + 1
	line := header(seq, w.opt.Now().UTC().Format(time.RFC3339Nano), kind, hex.EncodeToString(w.prev[:]))
	if len(body) > 0 {
		line = append(line, ',')
		line = append(line, body...)
	}
	line = append(line, '}')
	if kind == KindSeal && w.opt.Key != nil {
		sig := ed25519.Sign(w.opt.Key, line)
		line = append(line[:len(line)-1], `,"sig":"`...)
		line = base64.StdEncoding.AppendEncode(line, sig)
		line = append(line, `"}`...)
	}
	if kind == KindSeal {
		sum := sha256.Sum256(line)
		line = append(line[:len(line)-1], `,"seal":"`...)
		line = hex.AppendEncode(line, sum[:])
		line = append(line, `"}`...)
	}
	if w.opt.ContainsSecret != nil && w.opt.ContainsSecret(line) {
		return 0, ErrSecret
	}
	if _, err := w.w.Write(append(line, '\n')); err != nil {
		w.broken = err
		return 0, fmt.Errorf("bundle: write: %w", err)
	}
	w.seq, w.prev = seq, sha256.Sum256(line)
	return seq, nil
}

// header renders the first members of a record, without a closing brace.
func header(seq uint64, t, kind, prev string) []byte {
	b := make([]byte, 0, 160)
	b = append(b, `{"seq":`...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, `,"time":`...)
	b = strconv.AppendQuote(b, t)
	b = append(b, `,"kind":`...)
	b = strconv.AppendQuote(b, kind)
	b = append(b, `,"prev":"`...)
	b = append(b, prev...)
	return append(b, '"')
}

// objectBody marshals fields and returns the members of the object, without
// braces.
func objectBody(fields any) ([]byte, error) {
	if fields == nil {
		return nil, nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(fields); err != nil {
		return nil, fmt.Errorf("bundle: fields: %w", err)
	}
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if len(b) < 2 || b[0] != '{' {
		return nil, fmt.Errorf("bundle: fields must be a JSON object, not %T", fields)
	}
	if !cannotCarryReserved(fields) {
		var keys map[string]json.RawMessage
		if err := json.Unmarshal(b, &keys); err != nil {
			return nil, fmt.Errorf("bundle: fields: %w", err)
		}
		// In any letter case: encoding/json matches a key to a field
		// case-insensitively, so a "Seq" would read as the header's seq.
		for k := range keys {
			for _, r := range reserved {
				if strings.EqualFold(k, r) {
					return nil, fmt.Errorf("bundle: fields may not carry the key %q", r)
				}
			}
		}
	}
	return b[1 : len(b)-1], nil
}

// safeTypes caches, per struct type, whether no JSON key it can render is
// a reserved one: then the rendered object need not be decoded again to
// check (the mediator's records are such structs, one per chunk).
var safeTypes sync.Map // reflect.Type → bool

// cannotCarryReserved reports whether fields, by its type alone, renders
// no reserved key: a struct (or a pointer to one) with no custom JSON
// encoding whose every possible key, embedded structs' included, is
// outside reserved. Anything else (a map, a type with MarshalJSON) is
// checked on its rendering.
func cannotCarryReserved(fields any) bool {
	t := reflect.TypeOf(fields)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return false
	}
	if v, ok := safeTypes.Load(t); ok {
		return v.(bool)
	}
	safe := structSafe(t, 0)
	safeTypes.Store(t, safe)
	return safe
}

var marshaler = reflect.TypeFor[json.Marshaler]()

func structSafe(t reflect.Type, depth int) bool {
	if depth > 8 || t.Implements(marshaler) || reflect.PointerTo(t).Implements(marshaler) {
		return false
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" && tag == "-" {
			continue
		}
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				if !structSafe(ft, depth+1) {
					return false
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		for _, r := range reserved {
			if strings.EqualFold(name, r) {
				return false
			}
		}
	}
	return true
}

func known(kind string) bool {
	for _, k := range Kinds {
		if k == kind {
			return true
		}
	}
	return false
}

// Sync makes the records durable (fsync for a file).
func (w *Writer) Sync() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.sync()
}

func (w *Writer) sync() error {
	s, ok := w.w.(interface{ Sync() error })
	if !ok {
		return nil
	}
	if err := s.Sync(); err != nil {
		return fmt.Errorf("bundle: sync: %w", err)
	}
	return nil
}

// Seal appends the seal record, syncs and closes. After Seal, Append
// returns ErrSealed. Seal belongs to the run's owner, after run-end.
func (w *Writer) Seal() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	body := strconv.AppendUint([]byte(`"records":`), w.seq, 10)
	if _, err := w.append(KindSeal, body); err != nil {
		return err
	}
	w.sealed = true
	if err := w.sync(); err != nil {
		return err
	}
	return w.closeLocked()
}

// Close syncs and closes without sealing: the bundle then verifies as
// TRUNCATED. A run that ends abnormally (a signal) closes; one that ends
// cleanly seals.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.sealed {
		w.sealed = true // nothing more is written either way
		if err := w.sync(); err != nil {
			w.closeLocked()
			return err
		}
	}
	return w.closeLocked()
}

func (w *Writer) closeLocked() error {
	c, ok := w.w.(io.Closer)
	if !ok {
		return nil
	}
	w.w = io.Discard
	if err := c.Close(); err != nil {
		return fmt.Errorf("bundle: close: %w", err)
	}
	return nil
}
