package mediator

import (
	"testing"

	"jr2.dev/boundary/internal/contract/hosttest"
)

// TestAuthorityGrammar: a Host, a CONNECT target or a URL's host is read
// by the one grammar; an IP literal is refused, since a contained run
// never dials one (its policy cannot allow one either).
func TestAuthorityGrammar(t *testing.T) {
	for _, c := range hosttest.Cases {
		h, p, ok := Authority(c.Bracketed()+":8443", 443)
		if ok != c.Accepts(false) || ok && (h != c.Want() || p != 8443) {
			t.Errorf("Authority(%q:8443) = %q %d %v, want accepted %v", c.Bracketed(), h, p, ok, c.Accepts(false))
		}
	}
}
