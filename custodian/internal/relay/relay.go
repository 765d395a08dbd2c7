// Package relay carries one request the engine decided to its upstream and
// the answer back, for the Custodian's Go host and the contained run's
// mediator alike: the outbound request exactly as the engine decided it (its
// path, its headers less what it removes, what it sets, nothing Go would add),
// the 502 when no answer came, and the answer streamed through the engine's
// scrubber chunk by chunk.
//
// Invariant: a value reaches the wire only in a header the engine Set, on
// the outbound request; everything written back to the client went through
// the engine's scrubber, and a body that breaks midway resets the client's
// stream instead of ending it as complete.
//
// Hop-by-hop headers (the fixed set, and those a Connection header names)
// never decide what the engine sees of an answer: the engine decides on
// the response exactly as the upstream sent it, and hop-by-hop removal
// happens after its decision, on what is written. A header the engine
// reads (content-encoding, content-type, transfer-encoding,
// content-length) is never removed because Connection names it: an
// upstream that names content-encoding in Connection gets its gzip body
// decoded and scrubbed, or its unreadable encoding answered 502, like any
// other. On a request, what the engine judges and what goes upstream are
// one list (endToEnd): a header Connection names is neither judged nor
// forwarded, so it can hide nothing from the engine.
//
// Every refusal leaves the client's connection usable: a request refused
// before it is forwarded is answered in Go's default (half-duplex) mode,
// which drains or closes its body, and one forwarded has its body closed
// before its handler returns (FullDuplex).
package relay

import (
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
// read of the connection ("invalid concurrent Body.Read call",
// golang/go#68560) and drop it.
func FullDuplex(w http.ResponseWriter, r *http.Request) (settle func()) {
	_ = http.NewResponseController(w).EnableFullDuplex()
	body := r.Body // the server's, even if the handler replaces r.Body
	return func() { body.Close() }
}

// RequestOf is what the engine judges of r: the method, the Host, the
// request target as sent, and every end-to-end header (hop-by-hop headers,
// and those Connection names, are the transport's and never forwarded:
// Outbound copies the same list).
func RequestOf(r *http.Request) filter.Request {
	req := filter.Request{Method: r.Method, Authority: r.Host, Path: r.RequestURI}
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
	hop := hopHeaders(h)
	keys := make([]string, 0, len(h))
	for k := range h {
		if !hop[strings.ToLower(k)] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

// framing are the hop-by-hop names of one connection (RFC 9110 §7.6.1),
// and content-length, which each side frames anew.
var framing = map[string]bool{
	"connection": true, "proxy-connection": true, "keep-alive": true, "te": true,
	"trailer": true, "transfer-encoding": true, "upgrade": true, "content-length": true,
}

// engineReads are the response headers the engine reads to decide: a
// Connection header naming one never takes it off an answer.
var engineReads = map[string]bool{
	"content-encoding": true, "content-type": true, "transfer-encoding": true, "content-length": true,
}

// hopHeaders are the lowercase names of h that belong to one hop: the
// framing set and those Connection names.
func hopHeaders(h http.Header) map[string]bool {
	hop := make(map[string]bool, len(framing))
	for n := range framing {
		hop[n] = true
	}
	for n := range nominated(h) {
		hop[n] = true
	}
	return hop
}

// nominated are the lowercase names h's Connection headers list.
func nominated(h http.Header) map[string]bool {
	out := map[string]bool{}
	for _, v := range h.Values("Connection") {
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
// the client's body streamed. Nothing else is added: no User-Agent, no
// Accept-Encoding of Go's own.
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
	default:
		out.Body = r.Body
		out.ContentLength = r.ContentLength
	}
	if len(r.TransferEncoding) > 0 && r.ContentLength < 0 {
		out.ContentLength = -1
	}
	return out, nil
}

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
// each chunk flushed as it comes so a stream keeps its timing. It returns
// the status the client got in *status before any byte is written. A body that breaks midway (or a gzip body
// that does not read) resets the client's stream: a cut body is never
// passed on as complete.
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
	// Then, and only then, what belongs to the upstream's hop: the framing
	// set (content-length is the engine's to keep or remove), and what its
	// Connection named, except a header the engine reads.
	for n := range framing {
		if n != "content-length" {
			h.Del(n)
		}
	}
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
	w.WriteHeader(resp.StatusCode)
	if !rd.Body {
		return
	}
	fl, _ := w.(http.Flusher)
	body := e.NewBody(rd.Gzip)
	defer body.Close()
	buf := make([]byte, 32<<10)
	var out []byte
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			var err error
			out, err = body.Write(out[:0], buf[:n])
			if err != nil {
				panic(http.ErrAbortHandler)
			}
			if len(out) > 0 {
				if _, err := w.Write(out); err != nil {
					return // the client went away
				}
				if hooks.Chunk != nil {
					hooks.Chunk(out)
				}
			}
			if fl != nil {
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
	out, err := body.Flush(out[:0])
	if len(out) > 0 {
		w.Write(out)
		if hooks.Chunk != nil {
			hooks.Chunk(out)
		}
	}
	if err != nil {
		panic(http.ErrAbortHandler)
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
