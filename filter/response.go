package filter

import (
	"compress/gzip"
	"errors"
	"io"
	"strings"
	"sync"

	"jr2.dev/boundary/filter/scrub"
)

// ResponseDecision is the engine's verdict on a response's headers.
type ResponseDecision struct {
	// Reply replaces the response when its body cannot be scrubbed (an
	// encoding other than gzip): an unscrubbable body is never passed on.
	Reply *Reply
	// Set are header names whose values become exactly these (in order;
	// several entries of one name are several values). Scrubbed values.
	Set []Header
	// Remove are lowercase header names to remove: content-length when a
	// body follows (scrubbing may change its length), content-encoding when
	// the body is read from gzip, and a header whose name holds a value.
	// Read only: the list may be shared between decisions.
	Remove []string
	// Body is set when a body follows: the host passes every byte of it
	// through a Body from NewBody(Gzip).
	Body bool
	// Gzip is set when the body arrives gzip-encoded.
	Gzip bool
	// WebSocket is set by DecideSwitch on a 101 the host may carry: every
	// byte from the upstream then passes through Engine.NewFrames.
	WebSocket bool
}

// DecideResponse decides a response's headers from a bound target (or the
// Orchestrator) to a request with method. Every header value is scrubbed
// for every value the engine holds. The body of every response that has
// one is scrubbed, whatever its type: a value echoed in a body the
// Custodian could not read must not reach the agent, so an encoding other
// than gzip is answered 502 naming it.
func (e *Engine) DecideResponse(target, method string, status int, headers []Header) ResponseDecision {
	var d ResponseDecision
	var encodings []string
	f := e.scrubFields(headers)
	for _, v := range f.values("content-encoding") {
		for _, enc := range strings.Split(v, ",") {
			if enc = strings.ToLower(strings.TrimSpace(enc)); enc != "" && enc != "identity" {
				encodings = append(encodings, enc)
			}
		}
	}
	d.Body = method != "HEAD" && status != 204 && status != 304 && (status < 100 || status >= 200)
	if d.Body && len(encodings) > 0 {
		if len(encodings) == 1 && (encodings[0] == "gzip" || encodings[0] == "x-gzip") {
			d.Gzip = true
		} else {
			d.Reply = e.scrubReply(reply(502, ReasonEncoding, target+" answered with content-encoding "+safeList(encodings)+", which the Custodian cannot read to scrub; the answer was not passed on"))
			return d
		}
	}
	d.Set = f.set
	cl := d.Body && f.has("content-length")
	ce := d.Body && d.Gzip
	if len(f.renamed) == 0 {
		// The usual answer: no name holds a value, so the list is one of
		// four, shared and never written (a pass allocates nothing).
		d.Remove = framingRemovals[btoi(cl)|btoi(ce)<<1]
		return d
	}
	d.Remove = append(d.Remove, f.renamed...)
	if cl {
		d.Remove = append(d.Remove, "content-length")
	}
	if ce {
		d.Remove = append(d.Remove, "content-encoding")
	}
	return d
}

// framingRemovals are ResponseDecision.Remove when no header name holds a
// value, by content-length (bit 0) and content-encoding (bit 1) removed.
// Their capacity is their length: an append copies, never writes into one.
var framingRemovals = [4][]string{
	nil,
	{"content-length"},
	{"content-encoding"},
	{"content-length", "content-encoding"},
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// DecideTrailers decides a response's trailers by the rule of its headers:
// a name that holds a value is dropped with its values, and every value is
// scrubbed. It returns the trailers that may go to the agent, names in
// lowercase, in the order given.
func (e *Engine) DecideTrailers(trailers []Header) []Header {
	f := e.scrubFields(trailers)
	var out []Header
	for _, h := range trailers {
		n := strings.ToLower(h.Name)
		if !containsStr(f.renamed, n) {
			out = append(out, Header{Name: n, Value: e.scrubber.String(h.Value)})
		}
	}
	return out
}

// fields is what scrubFields found in a header (or trailer) list.
type fields struct {
	hs      []Header // the list as given
	set     []Header // the scrubbed values of each name where one changed, in order
	renamed []string // lowercase names that hold a value
}

// values are the values as sent of the lowercase name, unless the name
// holds a value.
func (f *fields) values(name string) []string {
	var out []string
	for i := f.next(name, 0); i >= 0; i = f.next(name, i+1) {
		out = append(out, f.hs[i].Value)
	}
	return out
}

// has reports whether the lowercase name is in the list (and holds no
// value).
func (f *fields) has(name string) bool { return f.next(name, 0) >= 0 }

// next is the index of the first header from i on whose lowercase name is
// name, or -1; none when the name holds a value.
func (f *fields) next(name string, i int) int {
	if containsStr(f.renamed, name) {
		return -1
	}
	for ; i < len(f.hs); i++ {
		if strings.ToLower(f.hs[i].Name) == name {
			return i
		}
	}
	return -1
}

// scrubFields reads a response's header or trailer list: a name that holds
// a value (in any case: a transport folds a name's case) is dropped with
// its values, since a scrubbed name would not be a name; every other value
// is scrubbed, and the names whose values changed are set anew, each with
// all its scrubbed values, in the order the names first appear. A list
// holding no value costs no allocation.
func (e *Engine) scrubFields(hs []Header) fields {
	f := fields{hs: hs}
	folded := e.scrubber.Folded()
	var scrubbed []string // each value scrubbed, made at the first that changed
	for i, h := range hs {
		n := strings.ToLower(h.Name)
		if folded.String(n) != n {
			if !containsStr(f.renamed, n) {
				f.renamed = append(f.renamed, n)
			}
			continue
		}
		v := e.scrubber.String(h.Value)
		if v != h.Value && scrubbed == nil {
			scrubbed = make([]string, len(hs))
			for j := range i { // unchanged so far
				scrubbed[j] = hs[j].Value
			}
		}
		if scrubbed != nil {
			scrubbed[i] = v
		}
	}
	if scrubbed == nil {
		return f
	}
	// Rare: a value changed. Each name whose values changed, at its first
	// appearance, with every value of it scrubbed.
	var done []string
	for i, h := range hs {
		n := strings.ToLower(h.Name)
		if containsStr(f.renamed, n) || containsStr(done, n) {
			continue
		}
		done = append(done, n)
		dirty := false
		for j := i; j >= 0 && !dirty; j = f.next(n, j+1) {
			dirty = scrubbed[j] != hs[j].Value
		}
		for j := i; dirty && j >= 0; j = f.next(n, j+1) {
			f.set = append(f.set, Header{Name: n, Value: scrubbed[j]})
		}
	}
	return f
}

func safeList(xs []string) string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = safeWord(x)
	}
	return strings.Join(out, ", ")
}

// ScrubHeaderValue scrubs one header (or trailer) value.
func (e *Engine) ScrubHeaderValue(v string) string { return e.scrubber.String(v) }

// Body scrubs one response body as it streams. Not safe for concurrent
// use; one per response.
type Body struct {
	st  scrub.Stream
	gz  *gunzip
	err error
}

// NewBody starts a body scrubber; gz is ResponseDecision.Gzip. Its hold is
// uniform (scrub.NewUniformStream): the agent watches the answer chunk by
// chunk, and how much a chunk releases must not tell it whether the bytes
// it made an upstream echo begin a value.
func (e *Engine) NewBody(gz bool) *Body {
	b := &Body{}
	e.ResetBody(b, gz)
	return b
}

// Wipe closes b and zeroes what its scrubber held: a Body kept idle for
// reuse holds no byte of its last body and keeps no engine (and so no
// value) reachable. ResetBody makes it a scrubber again.
func (b *Body) Wipe() {
	b.Close()
	b.gz, b.err = nil, nil
	b.st.Wipe()
}

// ResetBody makes b a new body scrubber of e, as NewBody returns, keeping
// the memory of its plain-body buffers: a host that keeps one Body per
// stream and reuses it allocates nothing for a plain body. Nothing of its
// last body is held; a gzip reader it still had is closed.
func (e *Engine) ResetBody(b *Body, gz bool) {
	b.Close()
	e.scrubber.ResetUniformStream(&b.st)
	b.gz, b.err = nil, nil
	if gz {
		b.gz = newGunzip()
	}
}

// Write appends to dst what can be passed on now of the chunk p.
func (b *Body) Write(dst, p []byte) ([]byte, error) {
	if b.err != nil {
		return dst, b.err
	}
	if b.gz == nil {
		return b.st.Write(dst, p), nil
	}
	plain, err := b.gz.write(p)
	if err != nil {
		b.err = err
		return dst, err
	}
	return b.st.Write(dst, plain), nil
}

// Flush appends the rest at the end of the body. An error means the gzip
// stream was malformed or cut short: the host must end the response as
// broken, not complete.
func (b *Body) Flush(dst []byte) ([]byte, error) {
	if b.err != nil {
		return dst, b.err
	}
	if b.gz != nil {
		plain, err := b.gz.close()
		dst = b.st.Write(dst, plain)
		if err != nil {
			b.err = err
			return b.st.Flush(dst), err
		}
	}
	return b.st.Flush(dst), nil
}

// Close releases the body's resources when the response ends early.
func (b *Body) Close() {
	if b.gz != nil {
		b.gz.abort()
	}
}

// ErrBadGzip reports a response body that claimed gzip and was not.
var ErrBadGzip = errors.New("the gzip body could not be read")

// gunzip decodes a gzip stream fed in chunks. compress/gzip reads from an
// io.Reader and cannot resume after a short read, so it runs in a goroutine
// reading from feed; write hands it a chunk and waits until it has consumed
// all of it and asks for more, so every byte a chunk decodes to is returned
// by the write that brought it.
type gunzip struct {
	mu      sync.Mutex
	cond    *sync.Cond
	in      []byte // fed, not yet read
	out     []byte // decoded, not yet returned
	eof     bool   // no more input
	waiting bool   // the decoder waits for input
	done    bool   // the decoder returned
	err     error
	started bool
}

func newGunzip() *gunzip {
	g := &gunzip{}
	g.cond = sync.NewCond(&g.mu)
	return g
}

func (g *gunzip) run() {
	r, err := gzip.NewReader(g)
	if err == nil {
		buf := make([]byte, 32<<10)
		for {
			n, rerr := r.Read(buf)
			g.mu.Lock()
			g.out = append(g.out, buf[:n]...)
			g.mu.Unlock()
			if rerr != nil {
				if rerr != io.EOF {
					err = rerr
				}
				break
			}
		}
	}
	g.mu.Lock()
	if err != nil && g.err == nil {
		g.err = ErrBadGzip
	}
	g.done = true
	g.cond.Broadcast()
	g.mu.Unlock()
}

// Read is the decoder's side: it blocks until input arrives or ends.
func (g *gunzip) Read(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for len(g.in) == 0 && !g.eof {
		g.waiting = true
		g.cond.Broadcast()
		g.cond.Wait()
	}
	g.waiting = false
	if len(g.in) == 0 {
		return 0, io.EOF // gzip reports a member cut short itself
	}
	n := copy(p, g.in)
	g.in = g.in[n:]
	return n, nil
}

func (g *gunzip) write(p []byte) ([]byte, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.started {
		g.started = true
		go g.run()
	}
	g.in = append(g.in, p...)
	g.waiting = false
	g.cond.Broadcast()
	for !g.done && !(g.waiting && len(g.in) == 0) {
		g.cond.Wait()
	}
	out := g.out
	g.out = nil
	if g.done && g.err != nil {
		return out, g.err
	}
	if g.done && len(g.in) > 0 {
		return out, ErrBadGzip // bytes after the end of the gzip member
	}
	return out, nil
}

func (g *gunzip) close() ([]byte, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.started {
		return nil, nil // an empty body that claimed gzip: nothing to read, nothing to pass on
	}
	g.eof = true
	g.cond.Broadcast()
	for !g.done {
		g.cond.Wait()
	}
	out := g.out
	g.out = nil
	return out, g.err
}

func (g *gunzip) abort() {
	g.mu.Lock()
	g.eof = true
	g.in = nil
	g.cond.Broadcast()
	g.mu.Unlock()
}
