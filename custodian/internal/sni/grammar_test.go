package sni

import (
	"testing"

	"jr2.dev/boundary/internal/contract/hosttest"
)

// TestNameGrammar: a server_name is read by the one grammar; an IP literal
// is refused (a server_name never holds one), as is anything else that is
// no name.
func TestNameGrammar(t *testing.T) {
	for _, c := range hosttest.Cases {
		if len(c.Host) == 0 || len(c.Host) > 255 {
			continue // a server_name's length bounds are the TLS grammar's, read before the name
		}
		name, err := ParseHello(hello(serverNameExt(nameTypeHost, c.Host)))
		if ok := err == nil; ok != c.Accepts(false) || ok && name != c.Host {
			t.Errorf("server_name %q: %q %v, want accepted %v", c.Host, name, err, c.Accepts(false))
		}
	}
}
