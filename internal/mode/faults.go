package mode

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// The fault kinds. error, rate-limit and timeout replace the answer and
// send nothing: the fault is what the agent meets instead of the effect,
// so a retry it makes is never a second write. truncate, corrupt and reset
// send the request and spoil its answer: the effect happened, and the
// agent must cope without knowing it did.
const (
	FaultError     = "error"
	FaultRateLimit = "rate-limit"
	FaultTimeout   = "timeout"
	FaultTruncate  = "truncate"
	FaultCorrupt   = "corrupt"
	FaultReset     = "reset"
)

// FaultKinds is every fault kind, in the order a draw picks from.
var FaultKinds = []string{FaultError, FaultRateLimit, FaultTimeout, FaultTruncate, FaultCorrupt, FaultReset}

// offsetSpan bounds a drawn byte offset (truncate, corrupt): the offset is
// the draw modulo it, and a body shorter than the offset is cut (or
// flipped) at its last byte.
const offsetSpan = 1024

// rule is one item of a SPEC: effects of a class (read, write, *) or
// toward a host get a fault at rate, of one of kinds.
type rule struct {
	sel   string
	rate  float64
	kinds []string
}

// parseSpec reads SPEC: items separated by ",", each
// SELECTOR=RATE[:KIND+KIND…], where SELECTOR is read, write, * or a host
// name, RATE a decimal in [0, 1], and the kinds (default: all) name
// FaultKinds. A host item comes before a class item for its host's
// effects; * matches every effect.
func parseSpec(spec, flag string) ([]rule, error) {
	if strings.TrimSpace(spec) == "" {
		return nil, fmt.Errorf("%s: give the fault rates, e.g. write=0.1,read=0.02 or api.example.com=0.5:error+timeout", flag)
	}
	var out []rule
	seen := map[string]bool{}
	for i, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		sel, rest, ok := strings.Cut(item, "=")
		sel = strings.ToLower(strings.TrimSpace(sel))
		if !ok || sel == "" {
			return nil, fmt.Errorf("%s: item %d is not SELECTOR=RATE[:KIND+KIND]; a selector is read, write, * or a host", flag, i+1)
		}
		if !validSelector(sel) {
			return nil, fmt.Errorf("%s: item %d: the selector is not read, write, * or a host name", flag, i+1)
		}
		if seen[sel] {
			return nil, fmt.Errorf("%s: item %d: %s is given twice", flag, i+1, sel)
		}
		seen[sel] = true
		rateText, kindText, hasKinds := strings.Cut(rest, ":")
		rate, err := strconv.ParseFloat(strings.TrimSpace(rateText), 64)
		if err != nil || math.IsNaN(rate) || rate < 0 || rate > 1 {
			return nil, fmt.Errorf("%s: item %d: the rate is not a number from 0 to 1", flag, i+1)
		}
		r := rule{sel: sel, rate: rate, kinds: FaultKinds}
		if hasKinds {
			r.kinds = nil
			for _, k := range strings.Split(kindText, "+") {
				k = strings.TrimSpace(k)
				if !slices.Contains(FaultKinds, k) {
					return nil, fmt.Errorf("%s: item %d: the fault kinds are %s", flag, i+1, strings.Join(FaultKinds, ", "))
				}
				if !slices.Contains(r.kinds, k) {
					r.kinds = append(r.kinds, k)
				}
			}
		}
		out = append(out, r)
	}
	return out, nil
}

func validSelector(s string) bool {
	if s == "read" || s == "write" || s == "*" {
		return true
	}
	if len(s) > 253 {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// ruleFor is the rule an effect falls under: its host's, else its
// class's, else *'s; nil for none.
func ruleFor(rules []rule, e Effect) *rule {
	for _, sel := range []string{e.Host, e.Class(), "*"} {
		for i := range rules {
			if rules[i].sel == sel {
				return &rules[i]
			}
		}
	}
	return nil
}

// draw is one effect's fault draw: u in [0, 1) from the seed, the form's
// key and its index among equal forms; then the kind and the offset from
// further bytes of the same hash.
type draw struct {
	u      float64
	kind   string
	offset int
}

func drawFor(seed uint64, key string, index uint64, kinds []string) draw {
	var buf [8]byte
	h := sha256.New()
	binary.BigEndian.PutUint64(buf[:], seed)
	h.Write(buf[:])
	h.Write([]byte(key))
	binary.BigEndian.PutUint64(buf[:], index)
	h.Write(buf[:])
	sum := h.Sum(nil)
	d := draw{u: float64(binary.BigEndian.Uint64(sum[0:8])>>11) / (1 << 53)}
	if len(kinds) > 0 {
		d.kind = kinds[binary.BigEndian.Uint64(sum[8:16])%uint64(len(kinds))]
	}
	d.offset = int(binary.BigEndian.Uint64(sum[16:24]) % offsetSpan)
	return d
}
