// Package sendtrace tells whether an HTTP request may have reached the
// server, and words a client error without the url it names.
//
// Invariant: Sent reports false only when no part of the request was handed
// to a connection — the name did not resolve, the dial or the TLS handshake
// failed, or the context ended first. Anything later counts as sent, so a
// caller that retries only unsent requests never sends one twice.
package sendtrace

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"sync/atomic"
)

// Trace returns req with a trace attached, and a func that reports whether
// the request may have been sent.
func Trace(req *http.Request) (*http.Request, func() bool) {
	var sent atomic.Bool
	mark := func() { sent.Store(true) }
	trace := &httptrace.ClientTrace{
		// The connection exists from here; the transport writes the
		// request next. Counting from the connection, not from the end of
		// the headers, keeps a partly written request on the sent side.
		GotConn:      func(httptrace.GotConnInfo) { mark() },
		WroteHeaders: mark,
		WroteRequest: func(httptrace.WroteRequestInfo) { mark() },
	}
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	return req, sent.Load
}

// Reason is err's text without the method and url that *url.Error adds
// (the url of an effect can hold a secret in its path).
func Reason(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timed out"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return err.Error()
}
