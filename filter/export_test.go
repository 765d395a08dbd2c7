package filter

import (
	"encoding/json"
	"time"
)

func jsonMarshal(v any) ([]byte, error) { return json.MarshalIndent(v, "", "  ") }

// SetMintClock gives l's minter a test's clock and timer; call it before
// Mint.
func SetMintClock(l *Live, now func() time.Time, after func(time.Duration) <-chan time.Time) {
	l.now, l.after = now, after
}

// SpentOf is how many values the minter replaced that l's engines still
// scrub for secret.
func SpentOf(l *Live, secret string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, v := range l.spent {
		if v.secret == secret {
			n++
		}
	}
	return n
}
