package policy

import (
	"jr2.dev/boundary/internal/contract"
)

// shape reads a secret's shape at key.shape: a kind of the table
// (contract.ShapeKinds) as a string, or { prefix = "…", length = N };
// nil when absent. It returns the stand-in the shape spells, and refuses
// one another secret's already is (two names, one stand-in); standIns
// maps each stand-in claimed so far to its secret's key.
func (c *checker) shape(key, name string, m map[string]any, standIns map[string]string) (*contract.Shape, string) {
	var sh *contract.Shape
	if v, ok := m["shape"]; ok {
		k := key + ".shape"
		switch v := v.(type) {
		case string:
			sh = &contract.Shape{Kind: v}
		case map[string]any:
			unknown(c, k+".", v, []string{"prefix", "length"}, "a shape of your own knows prefix and length")
			sh = &contract.Shape{}
			if p, ok := v["prefix"].(string); ok {
				sh.Prefix = p
			}
			if l, ok := v["length"].(int64); ok && l > 0 && l <= contract.MaxShapeLength {
				sh.Length = int(l)
			}
		default:
			c.fail(k, `must be a kind ("anthropic", "openai", "github", "aws-access-key-id") or { prefix = "…", length = N }`)
			return nil, ""
		}
		if _, err := sh.Resolve(); err != nil {
			c.fail(k, "%v", err)
			return nil, ""
		}
	}
	si, err := contract.StandInOf(name, sh)
	if err != nil {
		return nil, ""
	}
	if other, dup := standIns[si]; dup {
		c.fail(key+".shape", "its stand-in is %s's too; give one of them a longer length or another prefix", other)
		return nil, ""
	}
	standIns[si] = key
	return sh, si
}

// StandIn returns the stand-in of the held secret name: its shaped one,
// or jr2-held-NAME.
func (p *Policy) StandIn(name string) string {
	for _, s := range p.Secrets {
		if s.Name == name && s.StandIn != "" {
			return s.StandIn
		}
	}
	return contract.StandIn(name)
}
