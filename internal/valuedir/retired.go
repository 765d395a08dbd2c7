package valuedir

import (
	"bytes"
	"time"
)

// DefaultGrace is how long an old value stays scrubbed after a rotation
// unless its holder is told otherwise: long enough for an answer in flight
// or a client's retry to carry the old value back, and then no longer.
const DefaultGrace = 15 * time.Minute

// Retired is the values rotations replaced that are still scrubbed: each
// for Grace after it was replaced, under its secret's label, and never
// sent again. A host that follows a directory (Live, the Effector's
// secrets) keeps one, and builds its scrubber from the values serving and
// Map. It is not safe for concurrent use; its owner holds a lock.
type Retired struct {
	Grace time.Duration
	list  []retiredValue
}

// retiredValue is a value a rotation replaced, scrubbed until until.
type retiredValue struct {
	name  string
	value []byte
	until time.Time
}

// RetiredSet is what Retired would become (Next, Expired); Replace
// takes it, Abandon drops it.
type RetiredSet struct{ list []retiredValue }

// Next is r once cur (the values serving, by name) is replaced by vals at
// now: each value of cur that vals changes is retired until now+Grace,
// each retired value whose window ended or that is a value of vals again
// is dropped. changed reports whether any value changed.
func (r *Retired) Next(now time.Time, cur, vals map[string][]byte) (next RetiredSet, changed bool) {
	next = r.keep(now, vals)
	for name, v := range cur {
		if !bytes.Equal(v, vals[name]) {
			changed = true
			next.list = append(next.list, retiredValue{name: name, value: bytes.Clone(v), until: now.Add(r.Grace)})
		}
	}
	return next, changed
}

// Expired is r less the values whose window ended by now; dropped reports
// whether any did.
func (r *Retired) Expired(now time.Time, vals map[string][]byte) (next RetiredSet, dropped bool) {
	next = r.keep(now, vals)
	return next, len(next.list) != len(r.list)
}

func (r *Retired) keep(now time.Time, vals map[string][]byte) RetiredSet {
	var keep []retiredValue
	for _, v := range r.list {
		if now.Before(v.until) && !bytes.Equal(vals[v.name], v.value) {
			keep = append(keep, v)
		}
	}
	return RetiredSet{list: keep}
}

// Replace makes next r's values, clearing the bytes of those it drops.
func (r *Retired) Replace(next RetiredSet) {
	for _, v := range r.list {
		if !next.holds(v.value) {
			clear(v.value)
		}
	}
	r.list = next.list
}

// Abandon drops next, which was not taken: the values it retired anew are
// cleared; r is as it was.
func (next RetiredSet) Abandon(r *Retired) {
	for _, v := range next.list {
		if !r.holds(v.value) {
			clear(v.value)
		}
	}
}

// Map is the retired values by secret name (scrub.Secret.Built).
func (next RetiredSet) Map() map[string][][]byte {
	m := map[string][][]byte{}
	for _, v := range next.list {
		m[v.name] = append(m[v.name], v.value)
	}
	return m
}

// Map is r's values by secret name.
func (r *Retired) Map() map[string][][]byte { return RetiredSet{list: r.list}.Map() }

// Ends is when the next window ends; zero when none is open.
func (r *Retired) Ends() time.Time {
	var next time.Time
	for _, v := range r.list {
		if next.IsZero() || v.until.Before(next) {
			next = v.until
		}
	}
	return next
}

// Len is how many values are retired.
func (r *Retired) Len() int { return len(r.list) }

func (next RetiredSet) holds(b []byte) bool {
	for _, v := range next.list {
		if &v.value[0] == &b[0] {
			return true
		}
	}
	return false
}

func (r *Retired) holds(b []byte) bool { return RetiredSet{list: r.list}.holds(b) }
