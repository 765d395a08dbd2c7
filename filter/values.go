package filter

import (
	"fmt"

	"jr2.dev/boundary/filter/scrub"
	"jr2.dev/boundary/filter/strength"
)

// LoadValues reads the value of each held secret of c from c.ValuesDir,
// once: one trailing "\n" or "\r\n" is taken off. A value that is missing,
// empty, shorter than scrub.MinLen, holds a byte outside 0x20–0x7E or is
// easy to guess (fewer than 2^strength.FloorBits candidates by the estimate
// of package strength) stops the start with an error that names the
// secret and says why — never the value, nor its length or estimate.
//
// The guess floor is here, at load, because it cannot be earlier:
// controlplane render and the contained run's policy never see a value.
// New checks every value again, so a host that reads values another way
// (the contained run's broker reads the runner's environment) is held to
// the same floor. Why a floor at all: the scrubber replaces each form of a
// value in what the agent reads, so an agent that can make a bound host
// echo its guesses learns which guess was replaced; with at least 2^64
// candidates that oracle is of no use.
func LoadValues(c *Config) (map[string][]byte, error) {
	return loadValues(c, nil)
}

// The words a refused value is logged with (action=reload result=refused
// reason=<word>), one per load-time rule.
const (
	RuleMissing      = "missing"       // no value file
	RuleUnreadable   = "unreadable"    // the file cannot be read
	RuleEmpty        = "empty"         // the value is empty
	RuleShort        = "short"         // shorter than scrub.MinLen
	RuleNotPrintable = "not-printable" // a byte outside 0x20–0x7E
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
// the sentence that says so (another reader's, the Effector's).
func NewValueError(secret, word string, err error) *ValueError {
	return &ValueError{Secret: secret, Word: word, err: err}
}

func (e *ValueError) Error() string { return e.err.Error() }
func (e *ValueError) Unwrap() error { return e.err }

func checkValue(name string, v []byte) error {
	refuse := func(word string, err error) error { return &ValueError{Secret: name, Word: word, err: err} }
	switch {
	case len(v) == 0:
		return refuse(RuleEmpty, fmt.Errorf("held secret %s: the value is empty; write the credential into its file", name))
	case len(v) < scrub.MinLen:
		return refuse(RuleShort, fmt.Errorf("held secret %s: the value is shorter than %d bytes; a value that short would be scrubbed from ordinary text", name, scrub.MinLen))
	}
	for i, c := range v {
		if c < 0x20 || c > 0x7e {
			return refuse(RuleNotPrintable, fmt.Errorf("held secret %s: byte %d of the value is outside 0x20-0x7E; a header value must be printable ASCII", name, i))
		}
	}
	if err := strength.Check(v); err != nil {
		return refuse(RuleGuessable, fmt.Errorf("held secret %s: %w", name, err))
	}
	return nil
}
