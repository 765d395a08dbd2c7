package scrub

// cursor is where a scan stands between calls: the automaton state after
// the bytes scanned so far, and the best match found that is not yet
// replaced (the candidate). Positions are indexes into the text of the next
// call, whose first bytes are the ones the last call kept.
type cursor struct {
	s      int32 // automaton state
	cs, ce int   // candidate match text[cs:ce]; cs < 0: none
	cp     int32 // candidate's pattern
}

func newCursor() cursor { return cursor{cs: -1} }

// nearWindow is how far apart matches are, at most, for scan to walk with
// one lane (see advanceWide).
const nearWindow = 4096

// scan replaces matches in the text head+tail, appending to dst, and returns
// dst and keep: text[keep:] is what must be held for the next call (at the
// end of input, keep is the text's length). head has already been scanned
// into c (it is what the last call kept); tail is new.
//
// The patterns of all secrets are compiled into one Aho–Corasick automaton
// (see automaton for its layout: byte classes, full rows for the shallow
// states and for prefixes several secrets share, sorted edges and failure
// links for the rest). The scan replaces, left to right and without
// overlap, the longest match at the leftmost position, with the label of the secret whose form it is (the first
// secret in New's order when two share a form). There is no cap on the
// number of matches.
//
// When two forms overlap in the input, the one with the leftmost start
// (the longest there) is replaced, and the scan resumes after it: the rest
// of the other is left as it is, no longer a whole form. Forms of distinct
// values do not overlap in a real body; the residual is stated here rather
// than hidden (TestOverlapsResolveLongestLeftmost pins it).
//
// Leftmost-longest, non-overlapping: at each byte the longest pattern
// ending there is the match with the earliest start among those ending
// there; it becomes the candidate when it starts before the candidate, or
// at the same start (then it is longer, as it ends later). A candidate is
// replaced once no match can still start at or before it: every match not
// yet complete starts at or after i-hold[s], so the candidate is final when
// i-hold[s] > cs. Scanning then starts again from the root right after it.
//
// With end false the text may continue: the bytes from i-hold[s] on are a
// proper prefix of some pattern and are kept, everything before is final
// and emitted. With end true the candidate is replaced as it stands and the
// rest is emitted.
func (a *automaton) scan(dst, head, tail []byte, c *cursor, end bool, labels [][]byte, spans *[]int) ([]byte, int) {
	h := len(head)
	n := h + len(tail)
	emitted, i := 0, h
	s, cs, ce, cp := c.s, c.cs, c.ce, c.cp
	near := false // the last walk found a match within nearWindow bytes
	for {
		for i < n {
			switch {
			case cs < 0 && i >= h:
				// Nothing pending: run to the next state where a pattern ends.
				// Interleaved lanes each walk into the first form of their
				// part, so where matches come close together one walk, over
				// a window at a time, is cheaper; both give the same answer.
				var k int
				if rest := tail[i-h:]; near {
					s, k = a.advance(s, rest[:min(len(rest), nearWindow)])
				} else {
					s, k = a.advanceWide(s, rest)
				}
				near = k < nearWindow
				i += k
			case i >= h:
				s = a.next(s, a.cls[tail[i-h]])
				i++
			default:
				s = a.next(s, a.cls[head[i]])
				i++
			}
			if p := a.out[s]; p >= 0 {
				if st := i - int(a.plen[p]); cs < 0 || st <= cs {
					cs, ce, cp = st, i, p
				}
			}
			if cs >= 0 && i-int(a.hold[s]) > cs {
				dst = a.replace(dst, head, tail, emitted, cs, cp, labels, spans)
				emitted, i, s, cs = ce, ce, 0, -1
			}
		}
		if !end || cs < 0 {
			break
		}
		dst = a.replace(dst, head, tail, emitted, cs, cp, labels, spans)
		emitted, i, s, cs = ce, ce, 0, -1
	}
	if end {
		*c = newCursor()
		return appendText(dst, head, tail, emitted, n), n
	}
	keep := i - int(a.hold[s])
	dst = appendText(dst, head, tail, emitted, keep)
	*c = cursor{s: a.rest(s), cs: -1}
	if cs >= 0 {
		c.cs, c.ce, c.cp = cs-keep, ce-keep, cp
	}
	return dst, keep
}

// clean reports whether p holds no form: walked from the start state, no
// pattern ends in it, so scan would return p unchanged. advanceWide stops
// at the first byte that ends a pattern, or reads all of p.
func (a *automaton) clean(p []byte) bool {
	s, k := a.advanceWide(0, p)
	return k == len(p) && a.out[s] < 0
}

// replace appends text[from:cs] and the label of pattern p.
func (a *automaton) replace(dst, head, tail []byte, from, cs int, p int32, labels [][]byte, spans *[]int) []byte {
	dst = appendText(dst, head, tail, from, cs)
	if spans != nil {
		*spans = append(*spans, len(dst))
	}
	return append(dst, labels[a.owner[p]]...)
}

// appendText appends (head+tail)[from:to].
func appendText(dst, head, tail []byte, from, to int) []byte {
	h := len(head)
	if from < h {
		dst = append(dst, head[from:min(to, h)]...)
		from = h
	}
	if from < to {
		dst = append(dst, tail[from-h:to-h]...)
	}
	return dst
}
