package policy

import (
	"strconv"
	"testing"

	"jr2.dev/boundary/filter/dialguard"
	"jr2.dev/boundary/internal/contract/hosttest"
)

// TestHostGrammar: a policy's allow_hosts entry is accepted exactly when it
// is a host name by the one grammar that the dial guard does not refuse; an
// IP literal is refused, since a contained run never dials one.
func TestHostGrammar(t *testing.T) {
	for _, c := range hosttest.Cases {
		p, err := Parse([]byte("allow_hosts = [" + strconv.Quote(c.Host) + "]\n"))
		want := c.Accepts(false) && !dialguard.Judge(c.Host).Guarded
		if ok := err == nil; ok != want {
			t.Errorf("allow_hosts [%q]: accepted %v (%v), want %v", c.Host, ok, err, want)
		}
		if err == nil && (len(p.AllowHosts) != 1 || p.AllowHosts[0].Name != c.Host) {
			t.Errorf("allow_hosts [%q]: hosts %v", c.Host, p.AllowHosts)
		}
	}
}
