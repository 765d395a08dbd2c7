package serve

import (
	"context"
	"crypto/tls"
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
	"time"

	"jr2.dev/boundary/filter"
)

// interceptor serves the requests of one bound target, arriving over TLS
// connections the egress listener ended with the target's leaf.
type interceptor struct {
	s      *Server
	target string // host:port, canonical
	host   string // the Host header upstream: host, or host:port when the port is not 443
	srv    *http.Server
	l      *chanListener
	tr     *http.Transport
}

func (s *Server) newInterceptor(target string) *interceptor {
	h, port, _ := filter.SplitTarget(target)
	ic := &interceptor{s: s, target: target, l: newChanListener(s.egress.Addr())}
	ic.host = target
	if port == 443 {
		ic.host = h
		if strings.Contains(h, ":") {
			ic.host = "[" + h + "]"
		}
	}
	ic.tr = &http.Transport{
		Proxy:       nil,
		DialContext: s.dialer.DialContext,
		TLSClientConfig: &tls.Config{
			RootCAs:    s.upstream,
			ServerName: h,
			NextProtos: []string{"http/1.1"},
			MinVersion: tls.VersionTLS12,
		},
		ForceAttemptHTTP2:     false,
		TLSNextProto:          map[string]func(string, *tls.Conn) http.RoundTripper{},
		DisableCompression:    true,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	ic.srv = &http.Server{
		Handler:           ic,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       time.Hour,
		MaxHeaderBytes:    64 << 10,
		TLSNextProto:      map[string]func(*http.Server, *tls.Conn, http.Handler){},
	}
	return ic
}

func (ic *interceptor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s := ic.s
	req := requestOf(r)
	d := s.eng.DecideRequest(ic.target, &req)
	if d.Reply != nil {
		s.log.Log(d.LogFields(0)...)
		writeReply(w, d.Reply)
		return
	}
	out, err := outbound(r, "https", ic.target, ic.host, &d)
	if err != nil {
		rep := s.eng.Unreachable(ic.target, "the request could not be built: "+err.Error())
		s.log.Log(d.LogFields(rep.Status)...)
		writeReply(w, rep)
		return
	}
	resp, sent, err := roundTrip(ic.tr, out)
	if err != nil {
		if r.Context().Err() != nil {
			s.log.Log(d.LogFields(499)...)
			return // the client went away: its request was reset upstream too
		}
		rep := s.upstreamFailure(ic.target, sent, err)
		s.log.Log(d.LogFields(rep.Status)...)
		writeReply(w, rep)
		return
	}
	var status int
	defer func() { s.log.Log(d.LogFields(status)...) }()
	s.relay(w, ic.target, r.Method, resp, &status)
}

// requestOf is what the engine judges of r: the method, the Host, the
// request target as sent, and every end-to-end header (hop-by-hop headers,
// and those Connection names, are the transport's and never forwarded).
func requestOf(r *http.Request) filter.Request {
	hop := hopHeaders(r.Header)
	keys := make([]string, 0, len(r.Header))
	for k := range r.Header {
		if !hop[strings.ToLower(k)] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	req := filter.Request{Method: r.Method, Authority: r.Host, Path: r.RequestURI}
	for _, k := range keys {
		for _, v := range r.Header[k] {
			req.Headers = append(req.Headers, filter.Header{Name: k, Value: v})
		}
	}
	return req
}

// hopHeaders are the lowercase names of h that belong to one hop.
func hopHeaders(h http.Header) map[string]bool {
	hop := map[string]bool{
		"connection": true, "proxy-connection": true, "keep-alive": true, "te": true,
		"trailer": true, "transfer-encoding": true, "upgrade": true, "content-length": true,
	}
	for _, v := range h.Values("Connection") {
		for _, n := range strings.Split(v, ",") {
			if n = strings.ToLower(strings.TrimSpace(n)); n != "" {
				hop[n] = true
			}
		}
	}
	return hop
}

// outbound builds the request the engine decided: its path, the client's
// end-to-end headers less Remove, Set applied, the Host of the upstream, and
// the client's body streamed. Nothing else is added: no User-Agent, no
// Accept-Encoding of Go's own.
func outbound(r *http.Request, scheme, target, host string, d *filter.Decision) (*http.Request, error) {
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
	hop := hopHeaders(r.Header)
	for k, vs := range r.Header {
		if !hop[strings.ToLower(k)] {
			out.Header[k] = append([]string(nil), vs...)
		}
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

// roundTrip sends out and reports whether any of it was written.
func roundTrip(tr http.RoundTripper, out *http.Request) (*http.Response, bool, error) {
	var sent atomic.Bool
	trace := &httptrace.ClientTrace{WroteHeaderField: func(string, []string) { sent.Store(true) }}
	out = out.WithContext(httptrace.WithClientTrace(out.Context(), trace))
	resp, err := tr.RoundTrip(out)
	return resp, sent.Load(), err
}

// upstreamFailure is the 502 for a request that got no answer.
func (s *Server) upstreamFailure(target string, sent bool, err error) *filter.Reply {
	reason := transportReason(err)
	if sent {
		return s.eng.NoAnswer(target, reason)
	}
	return s.eng.Unreachable(target, reason)
}

func transportReason(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var ne *net.OpError
	switch {
	case errors.As(err, &ne):
		return dialReason(err)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "the connection closed before an answer"
	case errors.Is(err, context.DeadlineExceeded):
		return "timed out"
	}
	return err.Error()
}

// relay writes resp to w as the engine decides: header values scrubbed, the
// headers it names removed, and the body streamed through the scrubber,
// each chunk flushed as it comes so a stream keeps its timing. It returns
// the status the client got in *status before any byte is written. A body that breaks midway (or a gzip body
// that does not read) resets the client's stream: a cut body is never
// passed on as complete.
func (s *Server) relay(w http.ResponseWriter, target, method string, resp *http.Response, status *int) {
	defer resp.Body.Close()
	hop := hopHeaders(resp.Header)
	var headers []filter.Header
	keys := make([]string, 0, len(resp.Header))
	for k := range resp.Header {
		if !hop[strings.ToLower(k)] {
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
	rd := s.eng.DecideResponse(target, method, resp.StatusCode, headers)
	if rd.Reply != nil {
		*status = rd.Reply.Status
		writeReply(w, rd.Reply)
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
	w.WriteHeader(resp.StatusCode)
	if !rd.Body {
		return
	}
	fl, _ := w.(http.Flusher)
	body := s.eng.NewBody(rd.Gzip)
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
	}
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	for k, vs := range resp.Trailer {
		for _, v := range vs {
			h.Add(http.TrailerPrefix+k, s.eng.ScrubHeaderValue(v))
		}
	}
}
