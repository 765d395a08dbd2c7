package filter

import (
	"hash"

	"jr2.dev/boundary/internal/valuedir"
)

// LoadValues reads the value of each held secret of c from c.ValuesDir
// (of an OAuth secret, its parts NAME.<part>, under those names; its
// token is got later, see oauth.go), once: one trailing "\n" or "\r\n" is taken off. A value that is missing,
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

// loadValues is LoadValues, writing every byte it reads to h when h is not
// nil.
func loadValues(c *Config, h hash.Hash) (map[string][]byte, error) {
	names := make([]string, 0, len(c.Secrets))
	for i := range c.Secrets {
		if c.Secrets[i].OAuth != nil {
			continue // its parts are its minter's, read when it mints
		}
		names = append(names, c.Secrets[i].ValueNames()...)
	}
	vals, err := valuedir.Read(c.ValuesDir, names, valuedir.Header, h)
	if err != nil {
		return nil, err
	}
	if err := loadParts(c, vals, h); err != nil {
		for _, v := range vals {
			clear(v)
		}
		return nil, err
	}
	return vals, nil
}
