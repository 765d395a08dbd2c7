package logline

import (
	"bytes"
	"log"
)

// ErrorLog is the ErrorLog of an http.Server a host makes for listener:
// each line net/http writes becomes one contract line of l's prefix,
//
//	jr2.custodian action=error listener=<listener> reason=<word>
//	jr2.effector action=error listener=<listener> reason=<word>
//
// where the word is fixed by the kind of line (tls-handshake, panic,
// accept, handler, server) and nothing of the line itself is kept: it
// quotes the peer (its address, the ALPN protocols it offered, its bytes),
// and a peer's text must never reach the log, least of all one shaped
// like a contract line. Every http.Server of every host (custodian serve,
// the mediator of custodian run, the Effector) takes this one.
func ErrorLog(l *Writer, listener string) *log.Logger {
	return log.New(errorLine{l: l, listener: listener}, "", 0)
}

// CaptureStdLog sends the standard logger's lines (net/http's Transport
// writes there, e.g. "Unsolicited response received on idle HTTP channel
// starting with <the upstream's bytes>") through the same rule, as
// listener=upstream. A host's main (custodian serve, custodian run, the
// Effector) calls it once: it changes the process's standard logger.
func CaptureStdLog(l *Writer) {
	log.SetFlags(0)
	log.SetPrefix("")
	log.SetOutput(errorLine{l: l, listener: "upstream"})
}

type errorLine struct {
	l        *Writer
	listener string
}

func (e errorLine) Write(p []byte) (int, error) {
	e.l.Log("action", "error", "listener", e.listener, "reason", errorReason(p))
	return len(p), nil
}

// errorReasons map the start of a line net/http writes to its word.
var errorReasons = []struct{ prefix, reason string }{
	{"http: TLS handshake error", "tls-handshake"},
	{"http: panic serving", "panic"},
	{"http: Accept error", "accept"},
	{"http: superfluous response.WriteHeader", "handler"},
	{"http: response.WriteHeader on hijacked", "handler"},
	{"http: response.Write on hijacked", "handler"},
	{"http: invalid Content-Length", "handler"},
	{"http: WriteHeader called with both", "handler"},
	{"Unsolicited response received on idle HTTP channel", "unsolicited-response"},
}

func errorReason(p []byte) string {
	for _, r := range errorReasons {
		if bytes.HasPrefix(p, []byte(r.prefix)) {
			return r.reason
		}
	}
	return "server"
}
