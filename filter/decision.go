package filter

import (
	"strconv"
	"strings"
)

// Header is one header line. Names are compared without regard to case.
type Header struct {
	Name  string
	Value string
}

// Request is what a host read of one request, before any rule ran.
type Request struct {
	// Method is the request method as sent.
	Method string
	// Authority is the Host header (HTTP/1.1) or :authority (HTTP/2).
	Authority string
	// Path is the request target as sent: the path and, if any, "?query".
	Path string
	// Headers are every other header, in order, repeated names kept. A host
	// removes hop-by-hop headers (and those Connection names) first.
	Headers []Header
	// ContentLength is the request's content-length as sent, "" when it
	// has none: the transport's framing, so not among Headers, but a
	// SigV4 signature may cover it (sigv4.go).
	ContentLength string
}

// Reply is an answer the Custodian makes itself; nothing goes upstream.
type Reply struct {
	Status int
	Body   string
	// Reason is the one-word reason of the `action=refuse` log line.
	Reason string
	// Headers are set on the answer beside its type; the host writes each
	// as given. Only rule 9's challenge (WWW-Authenticate, see Challenge)
	// and HeldBudgetSpent (Retry-After) have one: fixed text, never
	// anything the agent sent.
	Headers []Header
}

// Challenge is the WWW-Authenticate value of rule 9's 401: a client that
// asks without credentials (git, libcurl's CURLAUTH_ANY) waits for it
// before it asks its credential helper for the stand-in.
const Challenge = `Basic realm="jr2 custodian"`

// Decision is the engine's verdict on one request. Either Reply is set and
// the host answers it, or the host forwards the request with Path and the
// header changes applied.
//
// Set, Remove and Secrets may share backing arrays the engine built once
// from the config (the common one-swap decision is made without
// allocating), and Path may be the request's own Path: a host reads them
// and never writes into them. Appending is safe (each has len == cap);
// assigning an element is not.
type Decision struct {
	Reply *Reply
	// Target is the bound host:port (egress) or the Orchestrator (control).
	Target string
	// Path is the request target to send upstream (normalised path, query
	// unchanged; a SigV4 request's query in its signer's spelling, the one
	// the real key signed).
	Path string
	// Set are headers whose every value the host replaces with this one.
	// Only a Set header may carry a value; the host puts it on the outbound
	// request and nowhere else.
	Set []Header
	// Remove are lowercase header names the host removes.
	Remove []string
	// Secrets names the secrets swapped in, in table order.
	Secrets []string
	// Method is the request's method (one of the allowed seven) for the
	// log; empty toward a target no secret is bound to (DecideAllowed),
	// where no rule reads the method.
	Method string
	// WebSocket is set on a forwarded WebSocket upgrade (DecideUpgrade):
	// the host sends it with "Connection: Upgrade" and "Upgrade:
	// websocket".
	WebSocket bool
	// NeedBody is set when the engine needs the request body to decide:
	// a SigV4 request toward a bound AWS key that names no
	// x-amz-content-sha256 signed the body's hash. The host holds the
	// body, at most MaxSignedBody bytes (past them it answers
	// BodyTooLarge), and decides again with DecideRequestBody; nothing
	// else of this decision applies. Reply is set too (ReasonBodySize), so
	// a host that does not read NeedBody refuses the request.
	NeedBody bool
	// Chunks is set on a forwarded SigV4 request whose body is a signed
	// aws-chunked upload: the host puts every byte of the body through it
	// on its way upstream (Chunks.Write and End, or Chunks.Reader), which
	// checks each chunk's signature and writes the real key's in its
	// place; an error cuts the request. The lengths do not change.
	Chunks *Chunks
	// Read is set on the control listener for the routes that only read
	// (the surface, a delivery): the host may retry them on any reset. Any
	// other forwarded request is retried only on a reset before it was sent.
	Read bool
}

// Forward reports whether the request goes upstream.
func (d *Decision) Forward() bool { return d.Reply == nil }

// LogFields returns the key=value pairs of the decision's jr2.custodian
// line: action=refuse … reason=… for a reply, or action=intercept …
// status=<status> once the host knows the answer's status.
func (d *Decision) LogFields(status int) []string { return d.AppendLogFields(nil, status) }

// AppendLogFields appends LogFields(status) to dst: a host that keeps a
// buffer for them allocates nothing for a decision of one secret.
func (d *Decision) AppendLogFields(dst []string, status int) []string {
	if d.Reply != nil {
		return append(dst, "action", "refuse", "target", d.Target, "reason", d.Reply.Reason)
	}
	secret := strings.Join(d.Secrets, ",")
	return append(dst, "action", "intercept", "target", d.Target, "secret", secret, "method", d.Method, "status", statusWord(status))
}

// statusDigits spells 100 to 999 one after another, made once, so that a
// log line spells a status without allocating (one string for all, not
// one each: package init stays small).
var statusDigits = func() string {
	b := make([]byte, 0, 900*3)
	for i := 100; i < 1000; i++ {
		b = strconv.AppendInt(b, int64(i), 10)
	}
	return string(b)
}()

// statusWord spells an HTTP status (or 0, none).
func statusWord(n int) string {
	if n >= 100 && n < 1000 {
		return statusDigits[(n-100)*3 : (n-100)*3+3]
	}
	return strconv.Itoa(n)
}

// Refusal reasons: the words of `action=refuse reason=…`.
const (
	ReasonMethod     = "method"
	ReasonUnderscore = "header-name"
	ReasonHost       = "host"
	ReasonEncoded    = "encoded-path"
	ReasonPath       = "path"
	ReasonDuplicate  = "duplicate-header"
	ReasonNoStandIn  = "no-stand-in"
	ReasonStandIn    = "stand-in"
	ReasonGuard      = "guard"
	ReasonTarget     = "target"
	ReasonRoute      = "route"
	ReasonEncoding   = "encoding"
	ReasonUnreached  = "unreachable"
	ReasonNoAnswer   = "no-answer"
	ReasonNotConnect = "not-connect"
)

func reply(status int, reason, body string) *Reply {
	return &Reply{Status: status, Body: "jr2 custodian: " + body, Reason: reason}
}
