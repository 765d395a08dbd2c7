package contract

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// A shaped stand-in is a stand-in an SDK that checks a key's shape
// accepts: a key's prefix and length instead of "jr2-held-NAME". It is
// spelled
//
//	PREFIX + StandInMark + DERIVED
//
// where DERIVED fills the length with characters drawn from SHA-256 of the
// name (counter mode): public, the same on every render of the same
// manifest, and different for each name. StandInMark is a fixed marker no
// key generator emits: it holds '0', outside the base32 alphabet of an AWS
// access key id (so "AKIA"+16 with it is no possible access key id), and a
// random generator of another kind would have to emit these 8 characters,
// then the rest of one fixed public string. The engine finds a shaped
// stand-in by the marker as it finds the others by StandInPrefix.

// StandInMark is inside every shaped stand-in, right after its prefix.
const StandInMark = "JR2HELD0"

// Shape is a held secret's stand-in shape, as the manifest gives it and
// custodian.json records it: a Kind of the table (ShapeKinds), or the
// user's own Prefix and Length.
type Shape struct {
	Kind   string `json:"kind,omitempty"`
	Prefix string `json:"prefix,omitempty"`
	Length int    `json:"length,omitempty"`
}

// ShapeKind is one row of the table of known shapes.
type ShapeKind struct {
	Kind   string
	Prefix string
	Length int
	// Upper: DERIVED is drawn from A-Z and 0-9 only (an access key id);
	// otherwise from A-Z, a-z and 0-9.
	Upper bool
	// For says whose keys the shape imitates.
	For string
}

// ShapeKinds is the table of known shapes (docs/manifest.md lists it).
var ShapeKinds = []ShapeKind{
	{Kind: "anthropic", Prefix: "sk-ant-api03-", Length: 108, For: "an Anthropic API key"},
	{Kind: "openai", Prefix: "sk-proj-", Length: 164, For: "an OpenAI project key"},
	{Kind: "github", Prefix: "ghp_", Length: 40, For: "a GitHub classic personal access token"},
	{Kind: "aws-access-key-id", Prefix: "AKIA", Length: 20, Upper: true, For: "an AWS access key id"},
}

// Bounds of a user's own shape.
const (
	MaxShapePrefix = 32
	MaxShapeLength = 256
)

// kind returns the row of the table named k.
func shapeKind(k string) (ShapeKind, bool) {
	for _, r := range ShapeKinds {
		if r.Kind == k {
			return r, true
		}
	}
	return ShapeKind{}, false
}

// kindNames is the table's kinds, for an error that lists them.
func kindNames() string {
	var ks []string
	for _, r := range ShapeKinds {
		ks = append(ks, r.Kind)
	}
	return strings.Join(ks, ", ")
}

// Resolve returns the row s stands for: its table row, or the user's own
// prefix and length. The error says what to write instead and carries
// nothing the user did not write in a manifest.
func (s Shape) Resolve() (ShapeKind, error) {
	if s.Kind != "" {
		if s.Prefix != "" || s.Length != 0 {
			return ShapeKind{}, fmt.Errorf("a shape is a kind (%s) or a prefix and a length, not both", kindNames())
		}
		r, ok := shapeKind(s.Kind)
		if !ok {
			return ShapeKind{}, fmt.Errorf("%q is no shape kind; write one of %s, or your own prefix and length", s.Kind, kindNames())
		}
		return r, nil
	}
	if err := checkShapePrefix(s.Prefix); err != nil {
		return ShapeKind{}, err
	}
	min := len(s.Prefix) + len(StandInMark) + 1
	if s.Length < min || s.Length > MaxShapeLength {
		return ShapeKind{}, fmt.Errorf("length %d is outside %d–%d: a shaped stand-in is the prefix, the %d characters %s and at least one more; write the length of the keys it imitates", s.Length, min, MaxShapeLength, len(StandInMark), StandInMark)
	}
	return ShapeKind{Prefix: s.Prefix, Length: s.Length}, nil
}

// checkShapePrefix is a user's own prefix: 1–32 of A-Z, a-z, 0-9, '-',
// '_' and '.', holding neither StandInPrefix nor StandInMark in any case
// (the stand-in would read as another).
func checkShapePrefix(p string) error {
	if p == "" || len(p) > MaxShapePrefix {
		return fmt.Errorf("prefix: write 1–%d characters, the prefix of the keys it imitates (or a kind: %s)", MaxShapePrefix, kindNames())
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return errors.New("prefix: use letters, digits, '-', '_' and '.'")
		}
	}
	lp := strings.ToLower(p)
	if strings.Contains(lp, StandInPrefix) || strings.Contains(lp, strings.ToLower(StandInMark)) {
		return fmt.Errorf("prefix: may hold neither %q nor %q, which begin the kit's own stand-ins", StandInPrefix, StandInMark)
	}
	return nil
}

const (
	alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	upper = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
)

// StandInOf returns the stand-in of name: StandIn(name) without a shape,
// else the shaped stand-in (see StandInMark). The error is Resolve's.
func StandInOf(name string, s *Shape) (string, error) {
	if s == nil {
		return StandIn(name), nil
	}
	r, err := s.Resolve()
	if err != nil {
		return "", err
	}
	alpha := alnum
	if r.Upper {
		alpha = upper
	}
	n := r.Length - len(r.Prefix) - len(StandInMark)
	b := make([]byte, 0, r.Length)
	b = append(append(b, r.Prefix...), StandInMark...)
	var block [sha256.Size]byte
	for ctr := uint32(0); len(b) < r.Length; ctr++ {
		var in []byte
		in = append(in, "jr2 boundary shaped stand-in\x00"...)
		in = binary.BigEndian.AppendUint32(in, ctr)
		in = append(in, name...)
		block = sha256.Sum256(in)
		for _, c := range block {
			if n == 0 {
				break
			}
			b = append(b, alpha[int(c)%len(alpha)])
			n--
		}
	}
	return string(b), nil
}
