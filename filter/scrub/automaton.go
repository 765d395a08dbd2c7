package scrub

import "sort"

// pattern is one form and the secret it is a form of.
type pattern struct {
	b     []byte
	owner int32
}

// automaton is an Aho–Corasick automaton over every pattern, read-only once
// built.
//
// Bytes are first mapped to classes: each byte some pattern holds has a
// class of its own, and every other byte shares class 0, on which every
// state goes to the root (when patterns hold all 256 bytes, each byte is its
// own class). States are numbered in breadth-first order, so a
// state's children are consecutive and shallow states come first. The
// first states (as many as denseBudget allows, the root always among them)
// have a dense row: the full transition on every class, failures resolved.
// Every other state keeps only its edges and a failure link, so memory grows
// with the total length of the patterns, not with 256 times it.
//
// A dense row is 1<<shift entries wide, and an entry is encoded for the
// scan's inner loop: a target that is dense and ends no pattern is stored
// as its row's offset (target<<shift, never negative), so the loop needs no
// multiplication and no second lookup; any other target t is stored as ^t
// (negative), which sends the loop to the slow path.
type automaton struct {
	cls   [256]uint8
	ncls  int
	shift uint    // a dense row is 1<<shift entries
	nd    int32   // states [0, nd) have a dense row
	dense []int32 // nd rows, encoded as above
	first []int32 // children of s: states first[s] .. first[s+1]-1, by label
	label []uint8 // class on the edge into s
	fail  []int32 // longest proper suffix of s that is a state
	out   []int32 // longest pattern that is a suffix of s, or -1
	hold  []int32 // depth of the longest suffix of s that is a proper prefix of a pattern
	plen  []int32 // per pattern: its length
	owner []int32 // per pattern: its secret

	patterns int // distinct patterns kept
}

// denseBudget bounds the dense rows, in entries (4 bytes each).
const denseBudget = 1 << 20

// build makes the automaton. A pattern equal to an earlier one is dropped:
// the first secret in input order owns it. With fold, ASCII letters match
// without regard to case: an upper-case letter has its lower-case letter's
// class, in the patterns and in the text alike.
func build(pats []pattern, fold bool) *automaton {
	a := &automaton{}
	key := func(c int) int {
		if fold && c >= 'A' && c <= 'Z' {
			return c + 'a' - 'A'
		}
		return c
	}
	var used [256]bool
	for _, p := range pats {
		for _, c := range p.b {
			used[key(int(c))] = true
		}
	}
	a.ncls = 1
	for c := 0; c < 256; c++ {
		if used[c] {
			a.cls[c] = uint8(a.ncls)
			a.ncls++
		}
	}
	if a.ncls > 256 { // every byte used (never with fold): class 0 is then a real byte
		a.ncls = 256
		for c := 0; c < 256; c++ {
			a.cls[c] = uint8(c)
		}
	}
	for c := 0; c < 256; c++ {
		a.cls[c] = a.cls[key(c)]
	}

	// The trie, as first-child / next-sibling lists.
	type tnode struct {
		kid, sib int32
		lab      uint8
		pat      int32
		depth    int32
	}
	nodes := []tnode{{kid: -1, sib: -1, pat: -1}}
	var rootKid [256]int32
	for i := range rootKid {
		rootKid[i] = -1
	}
	for pi, p := range pats {
		n := int32(0)
		for d, c := range p.b {
			l := a.cls[c]
			next := int32(-1)
			if n == 0 {
				next = rootKid[l]
			} else {
				for k := nodes[n].kid; k >= 0; k = nodes[k].sib {
					if nodes[k].lab == l {
						next = k
						break
					}
				}
			}
			if next < 0 {
				next = int32(len(nodes))
				nodes = append(nodes, tnode{kid: -1, sib: nodes[n].kid, lab: l, pat: -1, depth: int32(d + 1)})
				if n == 0 {
					rootKid[l] = next
				} else {
					nodes[n].kid = next
				}
			}
			n = next
		}
		if nodes[n].pat < 0 {
			nodes[n].pat = int32(pi)
			a.patterns++
		}
	}
	// Breadth-first renumbering.
	n := len(nodes)
	order := make([]int32, 1, n)
	parent := make([]int32, n)
	a.first = make([]int32, n+1)
	a.label = make([]uint8, n)
	var kids []int32
	for q := 0; q < len(order); q++ {
		old := order[q]
		a.first[q] = int32(len(order))
		kids = kids[:0]
		if old == 0 {
			for _, k := range rootKid {
				if k >= 0 {
					kids = append(kids, k)
				}
			}
		} else {
			for k := nodes[old].kid; k >= 0; k = nodes[k].sib {
				kids = append(kids, k)
			}
			sort.Slice(kids, func(i, j int) bool { return nodes[kids[i]].lab < nodes[kids[j]].lab })
		}
		for _, k := range kids {
			parent[len(order)] = int32(q)
			a.label[len(order)] = nodes[k].lab
			order = append(order, k)
		}
	}
	a.first[n] = int32(n)

	a.shift = 7
	if a.ncls > 1<<7 {
		a.shift = 8
	}
	a.nd = int32(min(n, max(1, denseBudget>>a.shift)))
	a.dense = make([]int32, int(a.nd)<<a.shift)
	a.fail = make([]int32, n)
	a.out = make([]int32, n)
	a.hold = make([]int32, n)
	depth := make([]int32, n)
	a.plen = make([]int32, len(pats))
	a.owner = make([]int32, len(pats))
	for i, p := range pats {
		a.plen[i] = int32(len(p.b))
		a.owner[i] = p.owner
	}
	for q := 0; q < n; q++ {
		old := order[q]
		depth[q] = nodes[old].depth
		if q > 0 && parent[q] > 0 {
			a.fail[q] = a.step(a.fail[parent[q]], a.label[q], true)
		}
		f := a.fail[q]
		a.out[q] = nodes[old].pat
		if a.out[q] < 0 && q > 0 {
			a.out[q] = a.out[f]
		}
		switch {
		case a.first[q+1] > a.first[q]:
			a.hold[q] = depth[q]
		case q > 0:
			a.hold[q] = a.hold[f]
		}
		if int32(q) < a.nd {
			w := 1 << a.shift
			row := a.dense[q*w : (q+1)*w]
			if q > 0 {
				copy(row, a.dense[int(f)*w:(int(f)+1)*w])
			}
			for k := a.first[q]; k < a.first[q+1]; k++ {
				row[a.label[k]] = k
			}
		}
	}
	a.encode()
	return a
}

// next is the transition from s on class c.
func (a *automaton) next(s int32, c uint8) int32 { return a.step(s, c, false) }

// step is the transition; raw reads dense entries as plain state ids, as
// they are while build fills them.
func (a *automaton) step(s int32, c uint8, raw bool) int32 {
	for {
		if s < a.nd {
			v := a.dense[int(s)<<a.shift|int(c)]
			if raw {
				return v
			}
			return a.decode(v)
		}
		if t := a.edge(s, c); t >= 0 {
			return t
		}
		s = a.fail[s]
	}
}

// decode turns an encoded dense entry into its target state.
func (a *automaton) decode(v int32) int32 {
	if v < 0 {
		return ^v
	}
	return v >> a.shift
}

// encode rewrites the dense rows, built with plain state ids, into the
// encoding the scan reads.
func (a *automaton) encode() {
	for i, t := range a.dense {
		if t < a.nd && a.out[t] < 0 {
			a.dense[i] = t << a.shift
		} else {
			a.dense[i] = ^t
		}
	}
}

// advance runs from s over t while no state on the way ends a pattern. It
// returns the state reached and how many bytes it read: all of t, or up to
// and including the byte that reached a state where a pattern ends.
func (a *automaton) advance(s int32, t []byte) (int32, int) {
	dense, cls, shift := a.dense, &a.cls, a.shift
	j := 0
	for j < len(t) {
		if s < a.nd && a.out[s] < 0 {
			off := int(s) << shift
			for j < len(t) {
				v := dense[off|int(cls[t[j]])]
				j++
				if v < 0 {
					s = ^v
					goto slow
				}
				off = int(v)
			}
			return int32(off >> shift), j
		}
		s = a.next(s, cls[t[j]])
		j++
	slow:
		if a.out[s] >= 0 {
			return s, j
		}
	}
	return s, j
}

// edge is the child of s on c, or -1.
func (a *automaton) edge(s int32, c uint8) int32 {
	lo, hi := a.first[s], a.first[s+1]
	if hi-lo <= 8 {
		for t := lo; t < hi; t++ {
			if a.label[t] == c {
				return t
			}
		}
		return -1
	}
	for lo < hi {
		m := int32(uint32(lo+hi) >> 1)
		switch l := a.label[m]; {
		case l == c:
			return m
		case l < c:
			lo = m + 1
		default:
			hi = m
		}
	}
	return -1
}

// rest is the state whose string is the last hold[s] bytes of s's: the
// longest suffix that can still be continued. Scanning from it or from s
// finds the same matches, since no longer suffix of s has an edge.
func (a *automaton) rest(s int32) int32 {
	for s > 0 && a.first[s+1] == a.first[s] {
		s = a.fail[s]
	}
	return s
}

// states is how many states the automaton has.
func (a *automaton) states() int { return len(a.fail) }

// size is the automaton's memory in bytes, near enough.
func (a *automaton) size() int {
	return 4*(len(a.dense)+len(a.first)+len(a.fail)+len(a.out)+len(a.hold)+len(a.plen)+len(a.owner)) + len(a.label)
}
