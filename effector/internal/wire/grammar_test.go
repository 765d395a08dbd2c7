package wire

import (
	"strings"
	"testing"

	"jr2.dev/boundary/internal/contract/hosttest"
)

// TestRemoteHostGrammar: a push remote's host, over https and over ssh in
// both of git's forms, is read by the one grammar, as a target's host is.
func TestRemoteHostGrammar(t *testing.T) {
	for _, c := range hosttest.Cases {
		for _, raw := range []string{"https://" + c.Bracketed() + "/o/r.git", "ssh://git@" + c.Bracketed() + "/o/r.git", "git@" + c.Bracketed() + ":o/r.git"} {
			_, err := ParseRemote(raw)
			want := c.Accepts(true)
			if raw[0] == 'g' && strings.Contains(c.Host, ":") {
				want = false // the scp-like form refuses an IPv6 host, naming ssh://
				if err == nil || !strings.Contains(err.Error(), "write ssh://user@[address]/path") {
					t.Errorf("ParseRemote(%q): %v, want the ssh:// fix named", raw, err)
				}
			}
			if ok := err == nil; ok != want {
				t.Errorf("ParseRemote(%q): %v, want accepted %v", raw, err, want)
			}
		}
	}
}
