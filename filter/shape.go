package filter

import (
	"fmt"
	"strings"

	"jr2.dev/boundary/internal/contract"
)

// A shaped stand-in (contract.StandInOf) is a stand-in like any other:
// every rule finds it where it finds "jr2-held-NAME", by the same search
// (findStandIn, findStandInFold), and the fast scan that passes over text
// with no stand-in looks for contract.StandInMark beside
// contract.StandInPrefix — only in an engine that holds a shaped one, so
// an engine without pays nothing for them.

// checkStandIn checks secrets[i]'s stand-in: the one its name and shape
// spell, and no other secret's (two names, one stand-in: a swap could not
// tell them apart). seen maps each stand-in checked so far to its secret's
// index.
func checkStandIn(at string, i int, s SecretConfig, seen map[string]int) error {
	if s.Shape != nil && s.Name == contract.TokenName {
		return fmt.Errorf("%s.shape: %s is the kit's own and read by no SDK; leave shape out", at, s.Name)
	}
	want, err := contract.StandInOf(s.Name, s.Shape)
	if err != nil {
		return fmt.Errorf("%s.shape: %v", at, err)
	}
	if s.StandIn != want {
		return fmt.Errorf("%s.standIn: want %q, the stand-in of %s", at, want, s.Name)
	}
	if j, dup := seen[want]; dup {
		return fmt.Errorf("%s.shape: %s's stand-in is secrets[%d]'s too; give one of them a longer length or another prefix", at, s.Name, j)
	}
	seen[want] = i
	return nil
}

// shapedMarkLC is contract.StandInMark in lowercase, as a lowered header
// name holds it.
var shapedMarkLC = strings.ToLower(contract.StandInMark)

var (
	shapedMarkLCBytes = []byte(shapedMarkLC)
	shapedMarkBytes   = []byte(contract.StandInMark)
)

// mayHoldStandIn reports whether s may hold one of e's stand-ins: it holds
// contract.StandInPrefix, or, when e holds a shaped stand-in, the mark.
// False is certain; true sends s to the search of every stand-in.
func (e *Engine) mayHoldStandIn(s string) bool {
	return hasStandInPrefix(s) || e.shaped && hasMark(s)
}

// hasMark is strings.Contains(s, contract.StandInMark), as
// hasStandInPrefix is for the prefix.
func hasMark(s string) bool {
	for {
		i := strings.IndexByte(s, contract.StandInMark[0])
		if i < 0 {
			return false
		}
		if strings.HasPrefix(s[i:], contract.StandInMark) {
			return true
		}
		s = s[i+1:]
	}
}

// markFold reports whether s holds a stand-in's prefix or mark in any
// case: what a log line never shows as written.
func markFold(s string) bool {
	if containsFoldASCII(s, contract.StandInPrefix) || containsFoldASCII(s, shapedMarkLC) {
		return true
	}
	lo := strings.ToLower(s)
	return strings.Contains(lo, contract.StandInPrefix) || strings.Contains(lo, shapedMarkLC)
}
