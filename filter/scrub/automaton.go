package scrub

// pattern is one form and the secret it is a form of.
type pattern struct {
	b     []byte
	owner int32
}

// Scanning is one table lookup per byte while no pattern ends, whatever
// the number of secrets (bench_test.go measures it). A long stretch without
// a pending match is cut into four parts walked together (advanceWide, each
// part starting Longest()-1 bytes early), so four independent lookups are
// in flight instead of one; the answer is the single walk's, byte for byte
// (wide_test.go and FuzzWide hold it to that). Where matches come closer
// than nearWindow bytes, the single walk is used. Memory grows with the
// total length of the forms: about 19 bytes per automaton state plus at most
// 4 MiB of rows; 64 token-sized secrets with what an Effector builds from
// them take about 7 MiB.
//
// automaton is an Aho–Corasick automaton over every pattern, read-only once
// built.
//
// Bytes are first mapped to classes: each byte some pattern holds has a
// class of its own, and every other byte shares class 0, on which every
// state goes to the root (when patterns hold all 256 bytes, each byte is its
// own class). States are numbered in breadth-first order, so a state's
// children are consecutive and sorted by label, and a state's failure link
// is a smaller number than its own.
//
// Every state keeps its edges and a failure link, so memory grows with the
// total length of the patterns, not with 256 times it. On top of that, up
// to rowBudget bytes of states (the root always among them) have a row: the
// full transition on every class, failures resolved. The states with rows
// are those on the way to a literal more than one secret's patterns share
// (the prefix of a built url or header), then the shallowest (see
// pickRows), so the states text walks through most are among them; a
// state's row is row[s], or -1.
//
// A row is 1<<shift entries wide, and an entry is encoded for the scan's
// inner loop: a target that has a row and ends no pattern is stored as its
// row's offset (row<<shift, below 1<<31), so the loop needs no
// multiplication, no shift and no second lookup; any other target is stored
// as slowEntry (its top bit set), which sends the loop to the slow path
// (next), where edges and failure links find it.
type automaton struct {
	cls      [256]uint8
	ncls     int
	shift    uint     // a row is 1<<shift entries
	rows     []uint32 // the rows, encoded as above
	row      []int16  // per state: its row, or -1
	rowState []int32  // per row: its state
	first    []int32  // children of s: states first[s] .. first[s+1]-1, by label
	label    []uint8  // class on the edge into s
	fail     []int32  // longest proper suffix of s that is a state
	out      []int32  // longest pattern that is a suffix of s, or -1
	hold     []int32  // depth of the longest suffix of s that is a proper prefix of a pattern
	plen     []int32  // per pattern: its length
	owner    []int32  // per pattern: its secret
	longest  int      // longest pattern

	patterns int // distinct patterns kept
}

// rowBudget bounds the rows, in bytes; maxRows is what row's int16 can
// name.
const (
	rowBudget = 4 << 20
	maxRows   = 1<<15 - 1
)

// slowEntry is a row entry whose target has no row or ends a pattern.
const slowEntry = 1<<32 - 1

// build makes the automaton. A pattern equal to an earlier one is dropped:
// the first secret in input order owns it. With fold, ASCII letters match
// without regard to case: an upper-case letter has its lower-case letter's
// class, in the patterns and in the text alike.
func build(pats []pattern, fold bool) *automaton {
	return buildRows(pats, fold, rowBudget)
}

// buildRows is build with budget bytes of rows (tests give it a small one,
// so that walks leave the rows often).
func buildRows(pats []pattern, fold bool, budget int) *automaton {
	a := &automaton{}
	key := func(c int) int {
		if fold && c >= 'A' && c <= 'Z' {
			return c + 'a' - 'A'
		}
		return c
	}
	var used [256]bool
	total := 0 // pattern bytes: no trie has more nodes, beside the root
	for _, p := range pats {
		for _, c := range p.b {
			used[key(int(c))] = true
		}
		a.longest = max(a.longest, len(p.b))
		total += len(p.b)
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
	// Sized once: grown by append, the trie's copies cost several times
	// its size, and a long value's forms make millions of nodes.
	nodes := make([]tnode, 1, 1+total)
	nodes[0] = tnode{kid: -1, sib: -1, pat: -1}
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
	var byLabel [256]int32
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
			// The siblings, sorted by label (labels are distinct).
			lo, hi := 256, -1
			for k := nodes[old].kid; k >= 0; k = nodes[k].sib {
				l := int(nodes[k].lab)
				byLabel[l] = k + 1
				lo, hi = min(lo, l), max(hi, l)
			}
			for l := lo; l <= hi; l++ {
				if byLabel[l] > 0 {
					kids = append(kids, byLabel[l]-1)
					byLabel[l] = 0
				}
			}
		}
		for _, k := range kids {
			parent[len(order)] = int32(q)
			a.label[len(order)] = nodes[k].lab
			order = append(order, k)
		}
	}
	a.first[n] = int32(n)

	a.fail = make([]int32, n)
	a.out = make([]int32, n)
	a.hold = make([]int32, n)
	a.row = make([]int16, n)
	for i := range a.row {
		a.row[i] = -1
	}
	a.plen = make([]int32, len(pats))
	a.owner = make([]int32, len(pats))
	for i, p := range pats {
		a.plen[i] = int32(len(p.b))
		a.owner[i] = p.owner
	}
	// Failure links, longest pattern and hold, in breadth-first order (no
	// row exists yet, so next walks edges and failure links only).
	for q := 0; q < n; q++ {
		old := order[q]
		if q > 0 && parent[q] > 0 {
			a.fail[q] = a.next(a.fail[parent[q]], a.label[q])
		}
		f := a.fail[q]
		a.out[q] = nodes[old].pat
		if a.out[q] < 0 && q > 0 {
			a.out[q] = a.out[f]
		}
		switch {
		case a.first[q+1] > a.first[q]:
			a.hold[q] = nodes[old].depth
		case q > 0:
			a.hold[q] = a.hold[f]
		}
	}
	a.pickRows(parent, budget, func(q int) int32 {
		if p := nodes[order[q]].pat; p >= 0 {
			return pats[p].owner
		}
		return -1
	})
	a.fillRows()
	return a
}

// pickRows chooses the states with a row, as many as budget and maxRows
// allow (the root at least): first the states on the way to the patterns of more than
// one secret (a literal that secrets share: "Bearer ", the prefix of a
// built url), however deep, then the rest in breadth-first order. Each part
// is closed under taking a parent (a parent is on the way to every pattern
// its child is, and has a smaller number), so the union is too.
func (a *automaton) pickRows(parent []int32, budget int, ownerAt func(int) int32) {
	a.shift = 7
	if a.ncls > 1<<7 {
		a.shift = 8
	}
	n := len(a.fail)
	want := max(1, min(n, maxRows, budget/(4<<a.shift)))
	// The least and greatest secret whose patterns pass through each state.
	lo, hi := make([]int32, n), make([]int32, n)
	for q := range lo {
		lo[q], hi[q] = 1<<31-1, -1
	}
	for q := n - 1; q >= 0; q-- {
		if o := ownerAt(q); o >= 0 {
			lo[q], hi[q] = min(lo[q], o), max(hi[q], o)
		}
		if p := parent[q]; q > 0 {
			lo[p], hi[p] = min(lo[p], lo[q]), max(hi[p], hi[q])
		}
	}
	a.rowState = make([]int32, 0, want)
	take := func(q int) {
		if a.row[q] < 0 && len(a.rowState) < want {
			a.row[q] = int16(len(a.rowState))
			a.rowState = append(a.rowState, int32(q))
		}
	}
	for q := 0; q < n && len(a.rowState) < want; q++ {
		if lo[q] < hi[q] {
			take(q)
		}
	}
	for q := 0; q < n && len(a.rowState) < want; q++ {
		take(q)
	}
	// Rows are numbered in breadth-first order of their states, so that a
	// state's failure link has its row filled before it (fillRows).
	r := int16(0)
	for q := range a.row {
		if a.row[q] >= 0 {
			a.row[q] = r
			a.rowState[r] = int32(q)
			r++
		}
	}
}

// fillRows writes each row, in breadth-first order: the row of a state is
// that of its failure link with its own edges written over, and the
// failure link's row (when it has one) is complete by then.
func (a *automaton) fillRows() {
	w := 1 << a.shift
	a.rows = make([]uint32, len(a.rowState)*w)
	enc := func(t int32) uint32 {
		if r := a.row[t]; r >= 0 && a.out[t] < 0 {
			return uint32(r) << a.shift
		}
		return slowEntry
	}
	for r, q := range a.rowState {
		e := a.rows[r*w : (r+1)*w]
		if q == 0 {
			for c := range e {
				e[c] = 0 // the root's row is row 0
			}
		} else {
			f := a.fail[q]
			for c := 0; c < a.ncls; c++ {
				e[c] = enc(a.next(f, uint8(c)))
			}
		}
		for k := a.first[q]; k < a.first[q+1]; k++ {
			e[a.label[k]] = enc(k)
		}
	}
}

// next is the transition from s on class c: the row entry when it names a
// row, else the edge of s on c, else the transition of s's failure link.
func (a *automaton) next(s int32, c uint8) int32 {
	for {
		if r := a.row[s]; r >= 0 {
			if v := a.rows[int(r)<<a.shift|int(c)]; int32(v) >= 0 {
				return a.rowState[v>>a.shift]
			}
		}
		if t := a.edge(s, c); t >= 0 {
			return t
		}
		if s == 0 {
			return 0
		}
		s = a.fail[s]
	}
}

// fast is whether the inner loop can run from s: it has a row and ends no
// pattern.
func (a *automaton) fast(s int32) bool { return a.row[s] >= 0 && a.out[s] < 0 }

// advance runs from s over t while no state on the way ends a pattern. It
// returns the state reached and how many bytes it read: all of t, or up to
// and including the byte that reached a state where a pattern ends.
func (a *automaton) advance(s int32, t []byte) (int32, int) {
	rows, cls, shift := a.rows, &a.cls, a.shift
	j := 0
	for j < len(t) {
		if !a.fast(s) {
			var hit bool
			var k int
			if s, k, hit = a.crawl(s, t[j:]); hit {
				return s, j + k
			}
			j += k
			continue
		}
		off := int(a.row[s]) << shift
		for j < len(t) {
			v := rows[off|int(cls[t[j]])]
			if int32(v) < 0 {
				break
			}
			j++
			off = int(v)
		}
		s = a.rowState[off>>shift]
		if j < len(t) { // the entry sent the loop here: next finds the target
			s = a.next(s, cls[t[j]])
			j++
			if a.out[s] >= 0 {
				return s, j
			}
		}
	}
	return s, j
}

// crawl is advance's slow path: it steps from s with next, one byte at a
// time, until it reaches a state the inner loop can run from (hit false) or
// one where a pattern ends (hit true), reading at least one byte of t unless
// t is empty. It returns the state and how many bytes it read.
func (a *automaton) crawl(s int32, t []byte) (int32, int, bool) {
	for j := 0; j < len(t); {
		s = a.next(s, a.cls[t[j]])
		j++
		if a.out[s] >= 0 {
			return s, j, true
		}
		if a.row[s] >= 0 {
			return s, j, false
		}
	}
	return s, len(t), false
}

// lanes is how many walks advanceWide interleaves.
const lanes = 4

// advanceWide is advance, with the same result, for a long t: the walk from
// s is one dependent load per byte, so the bytes are cut into lanes parts
// walked together, each but the first from the root and starting
// longest-1 bytes early (the overlap).
//
// Why the result is the same. A lane's state is the longest suffix of the
// bytes it read that is a state; the true state is the longest suffix of
// the whole text that is, and is never deeper than longest. So past its
// overlap a lane's state is the true state, and any pattern-ending state a
// lane reaches is a true match (its pattern is a suffix of the text). Lane
// k's own bytes are those past its overlap; the overlap lies in lane k-1's
// own bytes (a part is longer than the overlap). Then the lowest lane that
// reaches a pattern-ending state reaches it in its own bytes (in its overlap
// the lane below would have reached it first), no higher lane reaches one
// earlier (it would lie in this lane's own bytes), so its first one is
// advance's answer. With none, the last lane's end state is the true one.
// So once a lane has matched, the lanes above it are of no more use: they
// are parked on lane 0's bytes and state (to keep the loop uniform, never
// stopping it, as lane 0 stops first), and their bytes are not walked.
func (a *automaton) advanceWide(s int32, t []byte) (int32, int) {
	ov := a.longest - 1
	stride := (len(t) - ov) / lanes // a lane's own bytes; it reads stride+ov
	if stride <= ov || stride < 64 {
		return a.advance(s, t)
	}
	w := stride + ov
	var (
		st  [lanes]int32  // each lane's state while it is not in the inner loop
		pos [lanes]int    // bytes each lane has read
		b   [lanes][]byte // each lane's bytes
	)
	for k := range b {
		b[k] = t[k*stride : k*stride+w]
	}
	st[0] = s
	best, bestAt, bestState := lanes, 0, int32(0) // lowest lane that matched
	// crawl moves lane k on with crawl over at most n bytes; a match makes
	// it the lowest lane that matched. It reports whether that is lane 0
	// (the answer is then known).
	crawl := func(k, n int) bool {
		ns, read, hit := a.crawl(st[k], b[k][pos[k]:pos[k]+n])
		pos[k] += read
		st[k] = ns
		if hit {
			best, bestAt, bestState = k, k*stride+pos[k], ns
		}
		return hit && k == 0
	}
	rows, cls, shift := a.rows, &a.cls, a.shift
	for {
		// Bring each lane that counts to a state the inner loop can run
		// from, or to the end of its bytes; park the others.
		for k := 0; k < best; k++ {
			for k < best && pos[k] < w && !a.fast(st[k]) {
				if crawl(k, w-pos[k]) {
					return bestState, bestAt
				}
			}
		}
		for k := best; k < lanes; k++ {
			b[k], st[k], pos[k] = b[0], st[0], pos[0]
		}
		m := w
		for k := range pos {
			m = min(m, w-pos[k])
		}
		if m == 0 {
			break
		}
		// The inner loop: every lane in a state with a row that ends no
		// pattern, m bytes left in the shortest. A lane whose entry is slow
		// stops the loop (stop: the lanes below it took their step).
		o0 := int(a.row[st[0]]) << shift
		o1 := int(a.row[st[1]]) << shift
		o2 := int(a.row[st[2]]) << shift
		o3 := int(a.row[st[3]]) << shift
		b0 := b[0][pos[0]:][:m]
		b1 := b[1][pos[1]:][:m]
		b2 := b[2][pos[2]:][:m]
		b3 := b[3][pos[3]:][:m]
		i, stop := 0, lanes
		for ; i < len(b0) && i < len(b1) && i < len(b2) && i < len(b3); i++ {
			v := rows[o0|int(cls[b0[i]])]
			if int32(v) < 0 {
				stop = 0
				break
			}
			o0 = int(v)
			if v = rows[o1|int(cls[b1[i]])]; int32(v) < 0 {
				stop = 1
				break
			}
			o1 = int(v)
			if v = rows[o2|int(cls[b2[i]])]; int32(v) < 0 {
				stop = 2
				break
			}
			o2 = int(v)
			if v = rows[o3|int(cls[b3[i]])]; int32(v) < 0 {
				stop = 3
				break
			}
			o3 = int(v)
		}
		for k := range pos {
			pos[k] += i
			if k < stop && stop < lanes {
				pos[k]++
			}
		}
		st[0], st[1], st[2], st[3] = a.rowState[o0>>shift], a.rowState[o1>>shift], a.rowState[o2>>shift], a.rowState[o3>>shift]
		if stop == lanes {
			continue
		}
		// The lane that stopped the loop takes the byte it could not read
		// with next.
		if stop < best && crawl(stop, 1) {
			return bestState, bestAt
		}
	}
	// A lane that reached its end stopped the loop: the lanes below the
	// lowest match that have bytes left walk them one at a time.
	for k := 0; k < best; k++ {
		if pos[k] == w {
			continue
		}
		ns, n := a.advance(st[k], b[k][pos[k]:])
		pos[k] += n
		st[k] = ns
		if a.out[ns] >= 0 {
			return ns, k*stride + pos[k]
		}
	}
	if best < lanes {
		return bestState, bestAt
	}
	// No match: the last lane's state is the true one at its end; the bytes
	// past it (fewer than lanes) are walked on from there.
	end := (lanes-1)*stride + w
	s, k := a.advance(st[lanes-1], t[end:])
	return s, end + k
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
	return 4*len(a.rows) + 2*len(a.row) + 4*(len(a.rowState)+len(a.first)+len(a.fail)+len(a.out)+len(a.hold)+len(a.plen)+len(a.owner)) + len(a.label)
}
