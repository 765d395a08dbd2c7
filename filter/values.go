package filter

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"jr2.dev/boundary/filter/scrub"
	"jr2.dev/boundary/filter/strength"
	"jr2.dev/boundary/internal/effectorkey"
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
	vals := make(map[string][]byte, len(c.Secrets))
	for _, s := range c.Secrets {
		b, err := os.ReadFile(filepath.Join(c.ValuesDir, s.Name))
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("held secret %s: no value file %s in the value directory; mount the secret's value there", s.Name, s.Name)
			}
			return nil, fmt.Errorf("held secret %s: cannot read its value file: %w", s.Name, errors.Unwrap(err))
		}
		v := effectorkey.TrimNewline(b)
		if err := checkValue(s.Name, v); err != nil {
			return nil, err
		}
		vals[s.Name] = v
	}
	return vals, nil
}

func checkValue(name string, v []byte) error {
	switch {
	case len(v) == 0:
		return fmt.Errorf("held secret %s: the value is empty; write the credential into its file", name)
	case len(v) < scrub.MinLen:
		return fmt.Errorf("held secret %s: the value is shorter than %d bytes; a value that short would be scrubbed from ordinary text", name, scrub.MinLen)
	}
	for i, c := range v {
		if c < 0x20 || c > 0x7e {
			return fmt.Errorf("held secret %s: byte %d of the value is outside 0x20-0x7E; a header value must be printable ASCII", name, i)
		}
	}
	if err := strength.Check(v); err != nil {
		return fmt.Errorf("held secret %s: %w", name, err)
	}
	return nil
}
