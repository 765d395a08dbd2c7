package manifest

import (
	"strconv"

	"jr2.dev/boundary/internal/contract"
)

// shape reads secret name's shape at at: a kind of the table
// (contract.ShapeKinds) as a string, or the user's own
// {"prefix": …, "length": …}; nil and the plain stand-in when absent. It
// returns the stand-in the shape spells, and refuses one that another
// secret's stand-in already is (R3: two names, one stand-in).
func (s *secretsChecker) shape(at, name string, v *value) (*contract.Shape, string) {
	f := v.fields["shape"]
	if f == nil || f.kind == kNull {
		return nil, s.claim(at, name, nil)
	}
	at = member(at, "shape")
	const form = `write a kind ("anthropic", "openai", "github", "aws-access-key-id") or your own {"prefix": …, "length": …}`
	var sh contract.Shape
	switch f.kind {
	case kString:
		sh.Kind = f.str
		if sh.Kind == "" {
			s.add(at, "shape", "empty; %s, or leave shape out for the stand-in jr2-held-%s", form, name)
			return nil, ""
		}
	case kObject:
		s.unknown(f, at, []string{"prefix", "length"}, "a shape of your own has prefix and length")
		sh.Prefix, _ = s.text(f, at, "prefix")
		if l := f.fields["length"]; l != nil {
			n, err := strconv.Atoi(l.str)
			if l.kind != kNumber || err != nil {
				s.add(member(at, "length"), "shape", "%s; write the stand-in's length as a whole number", l.kind)
				return nil, ""
			}
			sh.Length = n
		}
	default:
		s.add(at, "shape", "%s; %s", f.kind, form)
		return nil, ""
	}
	if sh.Kind != "" && !knownKind(sh.Kind) {
		s.add(at, "shape", "%s is no shape kind; %s", quote(sh.Kind), form)
		return nil, ""
	}
	if _, err := sh.Resolve(); err != nil { // names no input of more than the kind
		s.add(at, "shape", "%v", err)
		return nil, ""
	}
	return &sh, s.claim(at, name, &sh)
}

// claim returns name's stand-in under sh and records it; a stand-in
// another secret already has is refused at at, naming that secret's path.
func (s *secretsChecker) claim(at, name string, sh *contract.Shape) string {
	si, err := contract.StandInOf(name, sh)
	if err != nil {
		return ""
	}
	if s.standIns == nil {
		s.standIns = map[string]string{}
	}
	if first, dup := s.standIns[si]; dup {
		s.add(at, "R3", "%s's stand-in is the stand-in of %s too; give one of them a longer length or another prefix", name, first)
		return ""
	}
	s.standIns[si] = name + " (" + at + ")"
	return si
}

func knownKind(k string) bool {
	for _, r := range contract.ShapeKinds {
		if r.Kind == k {
			return true
		}
	}
	return false
}
