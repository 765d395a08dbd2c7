package dnsmsg

import (
	"strings"
	"testing"

	"jr2.dev/boundary/internal/contract/hosttest"
)

// TestNameGrammar: a question's name is read by the one grammar; an IP
// literal is no name (its last label is all digits, or it holds ':').
func TestNameGrammar(t *testing.T) {
	for _, c := range hosttest.Cases {
		if strings.Contains(c.Host, "..") {
			continue // the wire has no empty label: a zero length ends the name there
		}
		q, err := Parse(query(c.Host, TypeA))
		if ok := err == nil; ok != c.Accepts(false) || ok && q.Name != c.Host {
			t.Errorf("question %q: %q %v, want accepted %v", c.Host, q.Name, err, c.Accepts(false))
		}
	}
}
