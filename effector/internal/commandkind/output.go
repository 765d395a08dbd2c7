package commandkind

import (
	"os"

	"jr2.dev/boundary/effector/internal/effect"
)

// capture keeps one output stream of a command: scrubbed before it is
// bounded, as scrub.md asks, so a secret that straddles the cut is
// replaced whole before it.
//
// It keeps the raw bytes only until their scrubbed form passes the bound:
// a stream scrubs as the bytes arrive and counts what it passes on, which is
// final (it holds back only a proper prefix of a form). At the end,
// effect.Scrubber.Bound scrubs what was kept and cuts it, never inside a
// label or a UTF-8 sequence. Bytes past the bound are read and dropped, so
// the command never blocks on a full pipe.
type capture struct {
	sc     *effect.Scrubber
	max    int
	st     *effect.Stream
	raw    []byte
	passed int  // scrubbed bytes the stream passed on
	over   bool // passed went past max: the rest is dropped
	tmp    []byte
}

func newCapture(sc *effect.Scrubber, max int) *capture {
	return &capture{sc: sc, max: max, st: sc.NewStream()}
}

// Write takes a chunk. It never fails.
func (c *capture) Write(p []byte) (int, error) {
	if c.over {
		return len(p), nil
	}
	c.raw = append(c.raw, p...)
	c.tmp = c.st.Write(c.tmp[:0], p)
	c.passed += len(c.tmp)
	if c.passed > c.max {
		c.over = true
	}
	return len(p), nil
}

// result is the scrubbed text, cut to max, and whether anything was cut.
func (c *capture) result() (string, bool) {
	b, cut := c.sc.Bound(c.raw, c.max)
	return string(b), cut || c.over
}

// drain reads r into c until its end, its read deadline (a descendant
// still held the pipe: the output is closed all the same) or a read error,
// then closes r.
func drain(r *os.File, c *capture) {
	defer r.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		c.Write(buf[:n])
		if err != nil {
			return
		}
	}
}
