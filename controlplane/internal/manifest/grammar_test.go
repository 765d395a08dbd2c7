package manifest

import (
	"testing"

	"jr2.dev/boundary/internal/contract"
	"jr2.dev/boundary/internal/contract/hosttest"
)

// TestTargetGrammar: a hosts entry is accepted exactly when its host is one
// by the one grammar, a name or an IP literal (R5's guard is a rule of its
// own, after this), and comes back as the canonical target.
func TestTargetGrammar(t *testing.T) {
	for _, c := range hosttest.Cases {
		for _, entry := range []string{c.Bracketed(), c.Bracketed() + ":8443"} {
			target, msg := Target(entry)
			if ok := msg == ""; ok != c.Accepts(true) {
				t.Errorf("Target(%q): accepted %v (%s), want %v", entry, ok, msg, c.Accepts(true))
				continue
			}
			port := 443
			if entry != c.Bracketed() {
				port = 8443
			}
			if msg == "" && target != contract.JoinTarget(c.Want(), port) {
				t.Errorf("Target(%q) = %q", entry, target)
			}
		}
	}
}
