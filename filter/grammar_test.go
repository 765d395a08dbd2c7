package filter

import (
	"strings"
	"testing"

	"jr2.dev/boundary/filter/dialguard"
	"jr2.dev/boundary/internal/contract"
	"jr2.dev/boundary/internal/contract/hosttest"
)

// TestTargetGrammar: custodian.json binds a secret to a target exactly when
// its host is one by the one grammar, a name or an IP literal in its one
// spelling (render writes it so), that the dial guard does not refuse
// (localTargets unset); and a CONNECT names a target by the same grammar,
// an IP literal in its one spelling, with a '_' refused as Envoy's codec
// refuses it before any filter runs.
func TestTargetGrammar(t *testing.T) {
	for _, c := range hosttest.Cases {
		cfg := testConfig()
		target := c.Bracketed() + ":443"
		cfg.Secrets[0].Targets = []string{target}
		err := cfg.check()
		want := c.Accepts(true) && c.Canon == "" && !dialguard.Judge(c.Host).Guarded
		if ok := err == nil; ok != want {
			t.Errorf("targets [%q]: accepted %v (%v), want %v", target, ok, err, want)
		}

		e := testEngine(t)
		d := e.DecideConnect("CONNECT", target)
		switch {
		case !c.Accepts(true):
			// 400, or 403 where the spelling is an address the guard refuses
			if d.Reply == nil || d.Reply.Status != 400 && d.Reply.Reason != ReasonGuard {
				t.Errorf("CONNECT %s: %+v, want a refusal", target, d.Reply)
			}
		case strings.IndexByte(c.Host, '_') >= 0:
			if d.Reply == nil || d.Reply.Status != 400 {
				t.Errorf("CONNECT %s: %+v, want 400", target, d.Reply)
			}
		case d.Reply != nil && d.Reply.Status == 400 || d.Target != contract.JoinTarget(c.Want(), 443):
			t.Errorf("CONNECT %s: target %q, %+v", target, d.Target, d.Reply)
		}
	}
}
