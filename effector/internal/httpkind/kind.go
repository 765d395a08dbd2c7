// Package httpkind is the Effector's http kind: it builds one request from a
// start's parts and the held secrets, sends it only to a target
// effector.json lists with the secrets that target lists, and turns the
// answer into an outcome.
//
// Invariant: a value leaves this package only in the outbound request to a
// fenced target; every string it returns (reasons, headers, the body) is
// built from the server's answer or from words of its own, and the body is
// scrubbed, as it streams, before it is cut to maxResponseBytes. The request
// goes to the url's own host: no proxy is read from the environment, no
// redirect is followed, and the transport never retries (keep-alive is off,
// so no request is sent twice on a stale connection). A new connection
// resumes the target's TLS session when it can: TLS 1.3 resumption with a
// fresh key exchange and no early data, so nothing is ever replayed.
//
// With receipts (Options.Receipts) nothing is sent unrecorded, and with a
// mode (Options.Mode) other than live, the mode layer decides before
// anything is sent. `unreachable` means no byte of the request was written;
// `unknown` means it may have reached the server (failed).
package httpkind

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"jr2.dev/boundary/effector/internal/effect"
	"jr2.dev/boundary/effector/internal/sendtrace"
	"jr2.dev/boundary/effector/internal/wire"
	"jr2.dev/boundary/internal/bundle"
	"jr2.dev/boundary/internal/mode"
	sj "jr2.dev/boundary/internal/strictjson"
)

// Target is one scheme, host and port the kind may call, with the secrets
// an effect toward it may name.
type Target struct {
	Scheme  string
	Host    string
	Port    int
	Secrets []string
}

// Options configure the kind. They are read once by New.
type Options struct {
	Targets []Target
	// Values returns a held secret's value.
	Values Values
	// Roots verify upstream certificates (system roots plus JR2_CA_FILE).
	Roots *x509.CertPool
	// Work is JR2_EFFECTOR_WORK, the worktree's read-only view; "" on the
	// Instance Effector, where a file body is a defect.
	Work string
	// Receipts, when set, records each effect's decision, request (with
	// every held value as its label), body and answer (receipts.go).
	// Nothing is then sent unrecorded: the fence's decision and the
	// request are recorded before it goes, and each read of a live body
	// before the transport gets its bytes (a read that cannot be recorded
	// fails the request).
	Receipts bundle.Recorder
	// Mode is the shared mode layer (internal/mode); nil is live. Another
	// mode decides after the fence allows and before anything is sent, on
	// the request's canonical form as the agent asked for it (labels,
	// never values), and the request goes through its verdict (no
	// redirect is followed, the effect's timeout holds).
	Mode *mode.Layer
	// BodyBudget is how many bytes of request bodies the receipts record
	// (this Effector's whole life), past which a body is hashed, marked
	// cut, and still sent whole; 0 is DefaultBodyBudget.
	BodyBudget int64
}

// sessions is how many targets' TLS sessions the kind remembers.
const sessions = 256

// Kind is the http kind. It is safe for concurrent use.
type Kind struct {
	targets map[string]Target // key: scheme://host:port
	values  Values
	work    string
	client  *http.Client
	rec     bundle.Recorder
	mode    *mode.Layer
	budget  atomic.Int64 // request-body bytes the receipts may still record
}

// New returns the http kind.
func New(o Options) *Kind {
	k := &Kind{targets: map[string]Target{}, values: o.Values, work: o.Work, rec: o.Receipts, mode: o.Mode}
	if o.BodyBudget == 0 {
		o.BodyBudget = DefaultBodyBudget
	}
	k.budget.Store(o.BodyBudget)
	for _, t := range o.Targets {
		k.targets[hostPort(t.Scheme, strings.ToLower(t.Host), t.Port)] = t
	}
	transport := &http.Transport{
		Proxy:       nil,
		DialContext: (&net.Dialer{Timeout: 30 * time.Second}).DialContext,
		// Each effect opens its own connection; it resumes the target's
		// TLS session (a ticket, no early data) rather than verify the
		// certificate chain again, which halves the handshake's cost.
		TLSClientConfig:        &tls.Config{RootCAs: o.Roots, MinVersion: tls.VersionTLS12, ClientSessionCache: tls.NewLRUClientSessionCache(sessions)},
		TLSHandshakeTimeout:    30 * time.Second,
		DisableKeepAlives:      true,
		MaxResponseHeaderBytes: 1 << 20,
	}
	k.client = &http.Client{
		Transport: transport,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	return k
}

// Prepare builds the request. A malformed start is an error; a request
// the fence refuses is a plan whose Run settles `refused` at once.
func (k *Kind) Prepare(id string, s *wire.Start) (*effect.Plan, error) {
	h := s.HTTP
	if h == nil {
		return nil, sj.Errorf("http", "required with kind http")
	}
	if h.Body != nil && h.Body.File != "" && k.work == "" {
		return nil, sj.Errorf("http.body.file", "a file body needs the worktree, which only a Sandbox Effector holds; this one has no %s", "JR2_EFFECTOR_WORK")
	}
	b, err := k.build(h)
	if err != nil {
		return nil, err
	}
	plan := &effect.Plan{Method: h.Method, Host: "-", Built: b.forms, KeptStop: effect.DropStop}
	if b.url != nil {
		plan.Host = b.url.Hostname()
	}
	timeout := time.Duration(s.TimeoutMs) * time.Millisecond
	if timeout == 0 {
		timeout = wire.DefaultTimeoutMs * time.Millisecond
	}
	max := h.MaxResponseBytes
	if max == 0 {
		max = wire.DefaultMaxResponseBytes
	}
	plan.Run = func(ctx context.Context, sc *effect.Scrubber) wire.Outcome {
		if !k.decided(id, b.refused, sc) {
			return wire.Outcome{Kind: wire.OutcomeRefused, Reason: "the decision could not be recorded in the receipts, so nothing was sent"}
		}
		if b.refused != "" {
			return wire.Outcome{Kind: wire.OutcomeRefused, Reason: b.refused}
		}
		ctx, cancel := context.WithTimeout(context.WithValue(ctx, effectID{}, id), timeout)
		defer cancel()
		return k.send(ctx, h, b, max, sc)
	}
	return plan, nil
}

// build turns the start's parts into the request, or a refusal. Every
// check of the definition (a 400) comes before the agent's segments and the
// fence are read (a refusal).
func (k *Kind) build(h *wire.HTTP) (*built, error) {
	b := &built{header: map[string]string{}}
	raw, err := joinURL(h.URL, k.values)
	if err != nil {
		return nil, err
	}
	if b.url, err = parseTarget(raw); err != nil {
		return nil, err
	}
	for name, v := range h.Headers {
		if !validHeaderValue(textOf(v)) {
			return nil, sj.Errorf(sj.Join("http.headers", name), "the text holds a control character")
		}
		val, names, missing := joinParts(v, k.values, func(v []byte) string { return string(v) })
		if missing >= 0 {
			return nil, sj.Errorf(sj.Join("http.headers", name), "names a secret this Effector does not hold")
		}
		if !validHeaderValue(val) {
			b.refuse(fmt.Sprintf("headers.%s: a secret's value holds a control character and cannot be sent in a header", name))
		}
		for _, n := range names {
			b.add(n, val)
		}
		b.header[http.CanonicalHeaderKey(name)] = val
	}
	if a := h.Auth; a != nil {
		v, ok := k.values(a.Secret)
		if !ok {
			return nil, sj.Errorf("http.auth.secret", "%s: this Effector holds no such secret", sj.Quote(a.Secret))
		}
		value, pair := authorization(a, v)
		if !validHeaderValue(value) {
			b.refuse("auth: the secret's value holds a control character and cannot be sent in a header")
		}
		b.add(a.Secret, value)
		if pair != "" {
			b.add(a.Secret, pair)
		}
		b.header["Authorization"] = value
	}
	full, refused := appendSegments(raw, h.Path)
	if refused != "" {
		b.refuse(refused)
		return b, nil
	}
	if b.url, err = parseTarget(full); err != nil {
		return nil, err
	}
	labels := func(name string) ([]byte, bool) { return []byte("[secret:" + name + "]"), true }
	if shown, err := joinURL(h.URL, labels); err == nil {
		b.shown, _ = appendSegments(shown, h.Path)
	}
	for _, name := range h.URL.Secrets() {
		b.add(name, b.url.String())
		b.add(name, b.url.RequestURI())
		b.add(name, b.url.EscapedPath())
	}
	b.refuse(k.fence(b.url, h))
	return b, nil
}

// textOf joins a value's text parts, for a check of what the definition
// wrote.
func textOf(v wire.Value) string {
	var s strings.Builder
	for _, p := range v {
		if p.Kind == wire.PartText {
			s.WriteString(p.Value)
		}
	}
	return s.String()
}

// fence returns why u's target, or a secret the start names toward it, is
// not one effector.json lists; "" when both are.
func (k *Kind) fence(u *url.URL, h *wire.HTTP) string {
	key := hostPort(u.Scheme, hostKey(u), port(u))
	t, ok := k.targets[key]
	if !ok {
		return key + " is not a target of this Effector; effector.json lists the targets it may call"
	}
	for _, n := range h.Secrets() {
		if !sj.Contains(t.Secrets, n) {
			return fmt.Sprintf("secret %s may not be sent to %s; effector.json lists the secrets of each target", n, key)
		}
	}
	return ""
}

// send performs the request and reads the answer.
func (k *Kind) send(ctx context.Context, h *wire.HTTP, b *built, max int64, sc *effect.Scrubber) wire.Outcome {
	var body io.Reader
	var length int64
	contentType := ""
	if bd := h.Body; bd != nil {
		switch {
		case bd.JSON != nil:
			body, length, contentType = strings.NewReader(string(bd.JSON)), int64(len(bd.JSON)), "application/json"
		case bd.Text != nil:
			body, length, contentType = strings.NewReader(*bd.Text), int64(len(*bd.Text)), "text/plain; charset=utf-8"
		default:
			f, size, reason := openWorkFile(k.work, bd.File)
			if reason != "" {
				return wire.Outcome{Kind: wire.OutcomeRefused, Reason: reason}
			}
			defer f.Close()
			body, length, contentType = f, size, "application/octet-stream"
		}
		if bd.ContentType != "" {
			contentType = bd.ContentType
		}
	}
	req, err := http.NewRequestWithContext(ctx, h.Method, b.url.String(), body)
	if err != nil {
		return wire.Outcome{Kind: wire.OutcomeRefused, Reason: "the request could not be built: " + sendtrace.Reason(err)}
	}
	req.ContentLength = length
	if length == 0 {
		req.Body = http.NoBody
	}
	req.Header.Set("User-Agent", "jr2-effector")
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for name, v := range b.header {
		req.Header.Set(name, v)
	}
	if k.rec == nil && (k.mode == nil || k.mode.Mode() == mode.Live) {
		req, sent := sendtrace.Trace(req)
		resp, err := k.client.Do(req)
		if err != nil {
			return failed(ctx, sent(), err)
		}
		defer resp.Body.Close()
		return readAnswer(ctx, resp, max, sc)
	}
	return k.sendRecorded(ctx, req, b, max, sc)
}

// failed words a request that got no answer: unreachable when no byte of
// the request was written (name, connection or TLS failed, or the timeout
// came first), unknown when the request may have reached the server (the
// headers were handed to the connection) and no whole answer came back.
func failed(ctx context.Context, sent bool, err error) wire.Outcome {
	reason := sendtrace.Reason(err)
	if ctx.Err() == context.DeadlineExceeded {
		reason = "the effect's timeout ended it: " + reason
	}
	if !sent {
		return wire.Outcome{Kind: wire.OutcomeUnreachable, Reason: "nothing was sent: " + reason}
	}
	return wire.Outcome{Kind: wire.OutcomeUnknown, Reason: "the request was sent and no answer came: " + reason}
}
