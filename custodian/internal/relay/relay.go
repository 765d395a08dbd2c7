// Package relay carries one request the engine decided to its upstream and
// the answer back, for the Custodian's Go host and the contained run's
// mediator alike. Every Go host forwards through one function, Forward,
// whose Exchange hooks are where the hosts differ (the contained run's
// records and modes, the control listener's retries); it shares
// ChanListener and Tracker, the connections a host reads itself and those
// its stop must close.
//
// Invariant: a value reaches the wire only in a header the engine Set, on
// the outbound request, which is exactly as the engine decided it (its
// path, its headers less what it removes, what it sets, nothing Go would
// add: Outbound); everything written back to the client went through the
// engine's scrubber, and a body that breaks midway resets the client's
// stream instead of ending it as complete (Response). What the engine
// judges is what the peer sent: hop-by-hop headers never hide a header
// from it (RequestOf, Response), and a target net/http would refuse reaches
// it (Gate). Every refusal leaves the client's connection usable
// (FullDuplex). Speed comes without a second copy of any rule (Outbound,
// Response, Pool).
package relay

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"jr2.dev/boundary/filter"
)

// FullDuplex lets a handler keep reading the request body after the answer
// began. An upstream may answer before the forwarder has read the end of
// the body it streams; without this, net/http closes the request body once
// the handler writes, the forwarder's last read fails, and the answer is
// cut.
//
// Call it only once the request is decided to go upstream, and defer the
// function it returns. A refusal is written without it, so Go's server
// drains (or, past its limit, closes) the unread body as for any handler;
// and the returned function closes r.Body before the handler returns, so
// a body the upstream never read (a 502, an early answer) is drained or
// the connection marked to close. Without both, a full-duplex handler
// that returns with an unread body makes the server panic on the next
// read of the connection ("invalid concurrent Body.Read call", a
// net/http fault of full duplex with an unread body) and drop it.
func FullDuplex(w http.ResponseWriter, r *http.Request) (settle func()) {
	_ = http.NewResponseController(w).EnableFullDuplex()
	body := r.Body // the server's, even if the handler replaces r.Body
	return func() { body.Close() }
}

// RequestOf is what the engine judges of r: the method, the Host, the
// request target as sent, and every end-to-end header (hop-by-hop headers,
// and those Connection names, are the transport's and never forwarded:
// Outbound copies the same list, endToEnd, so a header Connection names is
// neither judged nor forwarded and can hide nothing from the engine).
func RequestOf(r *http.Request) filter.Request {
	req := filter.Request{Method: r.Method, Authority: r.Host, Path: Target(r), ContentLength: r.Header.Get("Content-Length")}
	for _, k := range endToEnd(r.Header) {
		for _, v := range r.Header[k] {
			req.Headers = append(req.Headers, filter.Header{Name: k, Value: v})
		}
	}
	return req
}

// endToEnd are the keys of a request's headers, sorted, that the engine
// judges and that go upstream: those that belong to neither this hop nor
// the transport. RequestOf and Outbound both read this one list, so a
// header the engine did not judge is never forwarded.
func endToEnd(h http.Header) []string {
	nom := nominated(h)
	keys := make([]string, 0, len(h))
	for k := range h {
		if !isFraming(k) && (nom == nil || !nom[strings.ToLower(k)]) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

// framing are the hop-by-hop names of one connection (RFC 9110 §7.6.1),
// and content-length, which each side frames anew.
var framing = [...]string{"connection", "proxy-connection", "keep-alive", "te",
	"trailer", "transfer-encoding", "upgrade", "content-length"}

// framingKeys are framing's canonical keys, content-length aside (the
// engine's to keep or remove on an answer).
var framingKeys = func() []string {
	var keys []string
	for _, n := range framing {
		if n != "content-length" {
			keys = append(keys, http.CanonicalHeaderKey(n))
		}
	}
	return keys
}()

// isFraming reports whether k, in any letter case, is in framing.
func isFraming(k string) bool {
	for _, n := range framing {
		if len(k) == len(n) && strings.EqualFold(k, n) {
			return true
		}
	}
	return false
}

// engineReads are the response headers the engine reads to decide: a
// Connection header naming one never takes it off an answer.
var engineReads = map[string]bool{
	"content-encoding": true, "content-type": true, "transfer-encoding": true, "content-length": true,
}

// nominated are the lowercase names h's Connection headers list; nil (no
// allocation) when h has none.
func nominated(h http.Header) map[string]bool {
	vs := h.Values("Connection")
	if len(vs) == 0 {
		return nil
	}
	out := map[string]bool{}
	for _, v := range vs {
		for _, n := range strings.Split(v, ",") {
			if n = strings.ToLower(strings.TrimSpace(n)); n != "" {
				out[n] = true
			}
		}
	}
	return out
}

// Outbound builds the request the engine decided: its path, the client's
// end-to-end headers less Remove, Set applied, the Host of the upstream, and
// the client's body streamed (one of a declared length up to 16 KiB read
// whole first, so it leaves with the headers). Nothing else is added: no
// User-Agent, no Accept-Encoding of Go's own.
func Outbound(r *http.Request, scheme, target, host string, d *filter.Decision) (*http.Request, error) {
	u, err := url.ParseRequestURI(d.Path)
	if err != nil {
		return nil, errors.New("the path is not a request target")
	}
	u.Scheme, u.Host = scheme, target
	out := (&http.Request{
		Method:     r.Method,
		URL:        u,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     http.Header{},
		Host:       host,
	}).WithContext(r.Context())
	for _, k := range endToEnd(r.Header) {
		out.Header[k] = append([]string(nil), r.Header[k]...)
	}
	for _, n := range d.Remove {
		out.Header.Del(n)
	}
	for _, h := range d.Set {
		out.Header.Set(h.Name, h.Value)
	}
	if _, ok := out.Header["User-Agent"]; !ok {
		out.Header["User-Agent"] = []string{""} // Go adds none when it is empty
	}
	switch {
	case r.ContentLength == 0:
		out.Body = nil
		out.ContentLength = 0
	case r.ContentLength > 0 && r.ContentLength <= smallBody && len(out.Header["Expect"]) == 0:
		// Read whole, so that it goes upstream in the write that
		// carries the headers (Go's client writes a body it cannot see
		// the end of after them, in a TLS record and a syscall of its
		// own).
		b := make([]byte, r.ContentLength)
		if _, err := io.ReadFull(r.Body, b); err != nil {
			return nil, errors.New("the request body did not arrive whole")
		}
		out.Body = io.NopCloser(bytes.NewReader(b))
		out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
		out.ContentLength = r.ContentLength
	default:
		out.Body = r.Body
		out.ContentLength = r.ContentLength
	}
	if len(r.TransferEncoding) > 0 && r.ContentLength < 0 {
		out.ContentLength = -1
	}
	return out, nil
}

var chunkedTE = []string{"chunked"}

// smallBody is the largest request body Outbound reads whole before it is
// sent, when its length is declared and no 100-continue is asked for.
const smallBody = 16 << 10

// RoundTrip sends out and reports whether any of it was written.
func RoundTrip(tr http.RoundTripper, out *http.Request) (*http.Response, bool, error) {
	var sent atomic.Bool
	trace := &httptrace.ClientTrace{WroteHeaderField: func(string, []string) { sent.Store(true) }}
	out = out.WithContext(httptrace.WithClientTrace(out.Context(), trace))
	resp, err := tr.RoundTrip(out)
	return resp, sent.Load(), err
}

// Failure is the 502 for a request that got no answer: "could not be
// reached" when nothing of it was sent, else "did not answer; the request
// may have reached it".
func Failure(e *filter.Engine, target string, sent bool, err error) *filter.Reply {
	reason := transportReason(err)
	if sent {
		return e.NoAnswer(target, reason)
	}
	return e.Unreachable(target, reason)
}

func transportReason(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var ne *net.OpError
	switch {
	case errors.As(err, &ne):
		return DialReason(err)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "the connection closed before an answer"
	case errors.Is(err, context.DeadlineExceeded):
		return "timed out"
	}
	return err.Error()
}

// Hooks observe what Response passes on; nil fields are skipped. They run
// on the handler's goroutine and must not keep the slices they are given.
type Hooks struct {
	// Header is called with the status and headers the client gets, before
	// any body byte.
	Header func(status int, h http.Header)
	// Chunk is called with each chunk of the body as it is written to the
	// client (already scrubbed).
	Chunk func(p []byte)
}

// Response writes resp to w as the engine decides: header values scrubbed, the
// headers it names removed, and the body streamed through the scrubber,
// chunked, each chunk flushed as it comes so a stream keeps its timing,
// except the last (read with the end of the body), which leaves with the
// chunked terminator in one write. Its buffers come from a free list. It returns
// the status the client got in *status before any byte is written. A body that breaks midway (or a gzip body
// that does not read) resets the client's stream: a cut body is never
// passed on as complete.
//
// Hop-by-hop headers (the fixed set, and those a Connection header names)
// never decide what the engine sees of an answer: the engine decides on
// the response exactly as the upstream sent it, and hop-by-hop removal
// happens after its decision, on what is written (answerHeaders). A header
// the engine reads (engineReads) is never removed because Connection names
// it: an upstream that names content-encoding in Connection gets its gzip
// body decoded and scrubbed, or its unreadable encoding answered 502, like
// any other.
func Response(e *filter.Engine, w http.ResponseWriter, target, method string, resp *http.Response, status *int, hooks *Hooks) {
	if hooks == nil {
		hooks = &Hooks{}
	}
	defer resp.Body.Close()
	// The engine decides on every header the upstream sent (content-length
	// as the transport framed it): none is taken off before it decides.
	var headers []filter.Header
	keys := make([]string, 0, len(resp.Header))
	for k := range resp.Header {
		if !strings.EqualFold(k, "content-length") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, v := range resp.Header[k] {
			headers = append(headers, filter.Header{Name: k, Value: v})
		}
	}
	if resp.ContentLength >= 0 && method != http.MethodHead {
		headers = append(headers, filter.Header{Name: "Content-Length", Value: strconv.FormatInt(resp.ContentLength, 10)})
	}
	rd := e.DecideResponse(target, method, resp.StatusCode, headers)
	if rd.Reply != nil {
		*status = rd.Reply.Status
		WriteReply(w, rd.Reply)
		return
	}
	h := w.Header()
	answerHeaders(h, headers, rd)
	// Then what its Connection named, except a header the engine reads.
	for n := range nominated(resp.Header) {
		if !engineReads[n] {
			h.Del(n)
		}
	}
	if _, ok := h["Date"]; !ok {
		h["Date"] = nil
	}
	if _, ok := h["Content-Type"]; !ok {
		h["Content-Type"] = nil
	}
	if method == http.MethodHead && resp.ContentLength >= 0 {
		h.Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
	}
	*status = resp.StatusCode
	if hooks.Header != nil {
		hooks.Header(resp.StatusCode, h)
	}
	if _, ok := h["Content-Length"]; rd.Body && !ok && resp.ContentLength != 0 {
		// Chunked, as when every chunk was flushed: the last chunk is
		// not (the end follows it in the same write), and Go would
		// otherwise frame a short answer with a Content-Length of its
		// own and drop its trailers.
		h["Transfer-Encoding"] = chunkedTE
	}
	w.WriteHeader(resp.StatusCode)
	if !rd.Body {
		return
	}
	fl, _ := w.(http.Flusher)
	body := e.NewBody(rd.Gzip)
	defer body.Close()
	bufs := getBuffers()
	defer putBuffers(bufs)
	buf, out := bufs.in[:], bufs.out[:0]
	// emit writes one scrubbed chunk to the client and reports whether
	// the client is still there.
	emit := func(p []byte) bool {
		if len(p) == 0 {
			return true
		}
		if _, err := w.Write(p); err != nil {
			return false
		}
		if hooks.Chunk != nil {
			hooks.Chunk(p)
		}
		return true
	}
	ended := false // the scrubber's tail is out
	for !ended {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			var err error
			out, err = body.Write(out[:0], buf[:n])
			if err != nil {
				panic(http.ErrAbortHandler)
			}
			var ferr error
			if rerr == io.EOF {
				// The end came with this chunk: the scrubber's tail
				// joins it, one chunk and one write with the end of
				// the answer.
				out, ferr = body.Flush(out)
				ended = true
			}
			if !emit(out) {
				return // the client went away
			}
			if ferr != nil {
				panic(http.ErrAbortHandler)
			}
			// Each other chunk goes to the client as it comes (an
			// event stream keeps its timing).
			if fl != nil && !ended {
				fl.Flush()
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			panic(http.ErrAbortHandler)
		}
	}
	if !ended {
		var err error
		out, err = body.Flush(out[:0])
		if !emit(out) {
			return
		}
		if err != nil {
			panic(http.ErrAbortHandler)
		}
	}
	if cap(out) <= maxKeptOut {
		bufs.out = out[:0] // what the scrubber grew it to, kept for the next answer
	}
	var trailers []filter.Header
	keys = keys[:0]
	for k := range resp.Trailer {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, v := range resp.Trailer[k] {
			trailers = append(trailers, filter.Header{Name: k, Value: v})
		}
	}
	for _, t := range e.DecideTrailers(trailers) {
		h.Add(http.TrailerPrefix+http.CanonicalHeaderKey(t.Name), t.Value)
	}
}

// buffers are one answer's read buffer and the scrubber's output, kept on
// a free list: a response allocates neither. The list is bounded (not a
// sync.Pool, whose drops under -race would make TestResponseAllocatesNoBuffer
// a matter of chance): up to keptBuffers sets (3 MiB at most) stay
// allocated once a burst of that many answers in flight has passed.
type buffers struct {
	in  [32 << 10]byte
	out []byte
}

const (
	keptBuffers = 32
	maxKeptOut  = 64 << 10 // an output buffer grown past this is not kept
)

var freeBuffers struct {
	sync.Mutex
	list []*buffers
}

func getBuffers() *buffers {
	freeBuffers.Lock()
	defer freeBuffers.Unlock()
	if n := len(freeBuffers.list); n > 0 {
		b := freeBuffers.list[n-1]
		freeBuffers.list = freeBuffers.list[:n-1]
		return b
	}
	return &buffers{out: make([]byte, 0, 33<<10)}
}

func putBuffers(b *buffers) {
	freeBuffers.Lock()
	defer freeBuffers.Unlock()
	if len(freeBuffers.list) < keptBuffers {
		freeBuffers.list = append(freeBuffers.list, b)
	}
}

// DialReason is a dial error in words, without the resolver's internals.
func DialReason(err error) string {
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		if dnsErr.IsNotFound {
			return "the name did not resolve"
		}
		return "the name could not be resolved"
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Err != nil {
		return opErr.Op + ": " + opErr.Err.Error()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "timed out"
	}
	return err.Error()
}

// WriteReply writes a reply the Custodian makes itself, and no header
// but its type.
func WriteReply(w http.ResponseWriter, r *filter.Reply) {
	h := w.Header()
	for k := range h {
		delete(h, k)
	}
	WriteReplyKeep(w, r)
}

// WriteReplyKeep writes a reply keeping the headers already set, and the
// reply's own (filter.Reply.Headers: rule 9's challenge).
func WriteReplyKeep(w http.ResponseWriter, r *filter.Reply) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h["Date"] = nil
	for _, rh := range r.Headers {
		h.Set(rh.Name, rh.Value)
	}
	w.WriteHeader(r.Status)
	io.WriteString(w, r.Body)
}

// answerHeaders puts the upstream's answer headers into h as the engine's
// decision rd says (its removals, then its sets, each name set once), and
// then takes off what belongs to the upstream's hop: the framing set
// (content-length is the engine's to keep or remove). Both the answer to a
// request and a WebSocket's 101 go through it, so the two cannot differ.
func answerHeaders(h http.Header, headers []filter.Header, rd filter.ResponseDecision) {
	for _, hd := range headers {
		h.Add(hd.Name, hd.Value)
	}
	for _, n := range rd.Remove {
		h.Del(n)
	}
	set := map[string]bool{}
	for _, hd := range rd.Set {
		k := http.CanonicalHeaderKey(hd.Name)
		if !set[k] {
			h.Del(k)
			set[k] = true
		}
		h.Add(k, hd.Value)
	}
	for _, n := range framingKeys {
		delete(h, n)
	}
}
