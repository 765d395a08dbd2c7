package valuedir

import (
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"os"
	"path/filepath"

	"jr2.dev/boundary/filter/scrub"
	"jr2.dev/boundary/filter/strength"
	"jr2.dev/boundary/internal/effectorkey"
)

// The words a refused value is logged with (action=reload result=refused
// reason=<word>), one per rule.
const (
	RuleMissing      = "missing"       // no value file
	RuleUnreadable   = "unreadable"    // the file cannot be read
	RuleEmpty        = "empty"         // the value is empty
	RuleShort        = "short"         // shorter than scrub.MinLen
	RuleNotPrintable = "not-printable" // a byte outside 0x20–0x7E (a header's value)
	RuleGuessable    = "guessable"     // below the guess floor
	RuleChanging     = "changing"      // the directory kept changing while it was read
)

// ValueError is the refusal of one held secret's value: the secret, the
// rule's word, and a sentence that names the secret and the fix. None of
// them holds the value, its length or a path.
type ValueError struct {
	Secret string // the secret's name; "-" when no one secret is at fault
	Word   string // one of the Rule words
	err    error
}

// NewValueError is the refusal of secret's value by the rule word, err
// the sentence that says so (a reader's own, the Effector's).
func NewValueError(secret, word string, err error) *ValueError {
	return &ValueError{Secret: secret, Word: word, err: err}
}

func (e *ValueError) Error() string { return e.err.Error() }
func (e *ValueError) Unwrap() error { return e.err }

// Kind is what a value is used as, which decides whether its bytes must be
// printable.
type Kind int

const (
	// Header is a value that rides a request header (the Custodian's): its
	// bytes are printable ASCII.
	Header Kind = iota
	// File is a value a tool reads as a file or its environment (the
	// Effector's keys and tokens): any bytes.
	File
)

// Check holds one value of the secret name to the rules every holder of
// values shares: not empty, at least scrub.MinLen bytes (a shorter value
// would be scrubbed from ordinary text), past the guess floor of package
// strength (the scrubber replaces each form of a value in what the agent
// reads, so an agent that can make a bound host echo its guesses learns
// which guess was replaced; with at least 2^64 candidates that oracle is of
// no use); and, for a Header value, printable ASCII. A refusal is a
// *ValueError whose sentence names the secret and the fix, never the value,
// its length or its estimate.
func Check(name string, v []byte, k Kind) error {
	refuse := func(word string, err error) error { return &ValueError{Secret: name, Word: word, err: err} }
	switch {
	case len(v) == 0:
		return refuse(RuleEmpty, fmt.Errorf("held secret %s: the value is empty; write the credential into its file", name))
	case len(v) < scrub.MinLen:
		return refuse(RuleShort, fmt.Errorf("held secret %s: the value is shorter than %d bytes; a value that short would be scrubbed from ordinary text", name, scrub.MinLen))
	}
	if k == Header {
		for i, c := range v {
			if c < 0x20 || c > 0x7e {
				return refuse(RuleNotPrintable, fmt.Errorf("held secret %s: byte %d of the value is outside 0x20-0x7E; a header value must be printable ASCII", name, i))
			}
		}
	}
	if err := strength.Check(v); err != nil {
		return refuse(RuleGuessable, fmt.Errorf("held secret %s: %w", name, err))
	}
	return nil
}

// Read reads the value of each of names from dir, once: one trailing "\n"
// or "\r\n" is taken off, and each is held to Check. Every byte read is
// written to h when h is not nil (a digest tells one read from another).
// At the first refusal every value read so far is cleared and the
// *ValueError returned.
func Read(dir string, names []string, k Kind, h hash.Hash) (map[string][]byte, error) {
	vals := make(map[string][]byte, len(names))
	fail := func(err error) (map[string][]byte, error) {
		for _, v := range vals {
			clear(v)
		}
		return nil, err
	}
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if h != nil {
			fmt.Fprintf(h, "%s\x00%d\x00", name, len(b))
			h.Write(b)
		}
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return fail(&ValueError{Secret: name, Word: RuleMissing, err: fmt.Errorf("held secret %s: no value file %s in the value directory; mount the secret's value there", name, name)})
			}
			return fail(&ValueError{Secret: name, Word: RuleUnreadable, err: fmt.Errorf("held secret %s: cannot read its value file: %w", name, errors.Unwrap(err))})
		}
		v := effectorkey.TrimNewline(b)
		if err := Check(name, v, k); err != nil {
			clear(b)
			return fail(err)
		}
		vals[name] = v
	}
	return vals, nil
}
