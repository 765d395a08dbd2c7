package config

import (
	"testing"

	"jr2.dev/boundary/internal/contract/hosttest"
)

// TestTargetHostGrammar: an effector.json target's host is held to the one
// grammar as written (requests are compared with it as a string): a name,
// or an IP literal in its one spelling, the fix named for another.
func TestTargetHostGrammar(t *testing.T) {
	for _, c := range hosttest.Cases {
		err := checkHost(c.Host)
		if ok := err == nil; ok != (c.Accepts(true) && c.Canon == "") {
			t.Errorf("host %q: %v, want accepted %v", c.Host, err, c.Accepts(true) && c.Canon == "")
		}
		if c.Canon != "" && (err == nil || err.Error() != "write the address as "+c.Canon) {
			t.Errorf("host %q: %v, want the one spelling named", c.Host, err)
		}
	}
}
