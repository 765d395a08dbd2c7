// Package mediator is the one peer of a contained run's child: it answers
// the child's DNS, takes every TCP connection the child makes on a caught
// port, reads where it means to go (the ClientHello's SNI, the Host header,
// the proxy's CONNECT or absolute URL, or the address dialled), decides by
// the policy, records the attempt and the decision, and carries what the
// policy allows to its upstream through the same engine as the Custodian:
// stand-ins swapped toward bound hosts, other credentials stripped,
// answers scrubbed and streamed.
//
// Invariant: every decision on a request is the engine's. Each request on
// an allowed connection, bound host or not, is one call,
// filter.Engine.DecideAllowed, and each dial is filter.Engine.DialAllowed;
// this package records, applies the run's mode and moves bytes, and holds
// no request rule of its own (no stand-in finder, no Host check).
//
// Invariant: nothing reaches an upstream unless the attempt and the
// decision that allowed it are in the record first (egress-attempt before
// egress-decision, http-request and secret-injected before the request is
// sent); a record that cannot be written denies what it would have
// recorded. Every attempt is on the record: a DNS question, a TLS server
// name, a Host, a CONNECT or a proxy URL whose name holds a form of a held
// value (in any letter case: names are lowercased on their way) is
// recorded with each form replaced by its label, by the engine's scrubber
// folded for case, marked "scrubbed": true, and denied (DNS REFUSED, rule
// value-in-name), whatever the policy says; the refuse line names it the
// same way. So is a request whose url or headers, as they would go
// upstream, hold a form the agent wrote itself: its http-request record
// shows the label, "scrubbed", and it is denied (403, rule
// value-in-request) and never sent. A value reaches the wire only in a header the engine Set, over
// TLS, toward a host the policy binds it to; the record shows the stand-in
// the agent sent, and the bundle writer's guard refuses any line holding a
// value: the last line of defence, which scrubbing first keeps from ever
// being why an attempt is missing. Log lines (written together at most
// every 100 ms, all of them by Close) are the Custodian's refuse, intercept and error lines: a
// target (or a listener) and a word, never a value, a stand-in, a path, a
// query, a header value, a body or anything else the child chose.
//
// A WebSocket to a bound target, in live mode, is carried as custodian
// serve carries it (relay.WebSocket: the upgrade decided by the engine,
// every upstream frame scrubbed) and recorded as a request whose answer's
// body is the frames the child got and whose body is the child's own;
// toward an unbound host, or in another mode, an upgrade is refused.
//
// # What each connection is
//
// Every caught port is served alike; the first byte decides:
//
//   - 0x16 (a TLS handshake): the SNI names the host, the dialled port is
//     the port. Denied: a fatal access_denied alert, nothing else. Allowed:
//     TLS ends with the run CA's leaf for the host, and each request on it
//     goes upstream over TLS.
//   - anything else is HTTP/1.1: a CONNECT host:port (the explicit proxy,
//     "via proxy") is decided, answered 200 and then read again like a new
//     connection to that target; an absolute URL (proxy) or an origin-form
//     request (its Host, "via host") is decided per request and goes
//     upstream in the scheme it came in. Denied: 403, a jr2 custodian body.
//   - a connection to any address but the mediator's own is a literal-IP
//     dial (the child's DNS only ever answers the mediator's address): it
//     is recorded with an empty host and the address dialled, and denied.
//     So is a ClientHello without SNI, and a Host or CONNECT naming an IP.
//
// Every request the HTTP server reads is decided by the policy (which
// host) and then by the engine (the request): net/http answers nothing
// itself ("OPTIONS *" is a 400, not its 200).
//
// Toward a host the policy allows with no secret bound to it, the engine
// (DecideAllowed) holds the request to the rules that guard a stand-in and
// the answer — the Host names the target, a stand-in anywhere in it is
// rule 10's 403, an upgrade is refused, identity encoding and no range —
// and its answer is scrubbed like any other: the run's values are scrubbed
// from every answer. Toward a bound host, plain HTTP is refused and the
// rest is rules 1–11. The mediator dials allowed hosts itself, from the
// runner's namespace, with the Custodian's dial guard on the address
// dialled: an allowed name that resolves to loopback, link-local or
// another guarded address is answered 502 and not dialled.
//
// # Records (bundle kinds, spec run.md)
//
// dns-query and dns-decision for each question; egress-attempt (host, port,
// via sni|host|proxy|ip, and the address when it was a literal-IP dial)
// then egress-decision (allow or deny, the rule: allow_hosts[i],
// default-deny, value-in-name, value-in-request, or "engine" with the
// engine's reason for a request the engine refused on an allowed
// connection); each of them, and http-request, with "scrubbed": true when
// a name or a request held a form of a value; http-request as sent upstream
// (swapped headers shown with the agent's stand-in); secret-injected (name
// and target) for each value the request carries; http-response: one
// record with the status and headers, one per body chunk as framed (the
// scrubbed bytes the child got: "body" when UTF-8, else "body_base64"),
// and one closing record with the count, or with "error" when the body was
// cut. A reply the mediator made itself is one http-response record with
// "local": true. The bundle is synced after every denial.
//
// A request body is recorded as it is read (http-request-body: one record
// per read, then a closing record with the count, the bytes, the bytes
// read and the sha-256 of the recorded bytes), through the engine's
// streaming scrubber, so a form of a held value is its label even split
// across reads; each read is recorded before the transport gets its
// bytes. A run records at most Options.BodyBudget bytes of bodies; past
// it a body is hashed, not recorded, and its closing record says "cut".
// A mode other than live (Options.Mode) reads the body whole first, at
// most 16 MiB (a 413 beyond), since its hash is part of the effect's
// canonical form; the mode then decides, and answers through its verdict
// (internal/mode): in replay and preflight nothing is dialled, and no
// secret-injected record is written for a verdict that sends nothing (a
// recorded or planned answer, a fault that replaces the answer).
//
// NOT covered: a request body is not checked for a value's form (the
// engine's request rules apply; the record shows the label), nor for a
// stand-in (rule 10 reads the target and the headers, in every host); a denial by value-in-name tells the child that its name held a
// form (an oracle only for a value weak enough to guess); a form the scrubber does not know (scrub's NOT
// covered) is recorded as it came; HTTP/2 and
// HTTP/3 are not spoken (ALPN offers http/1.1; QUIC is UDP and goes
// nowhere); a client that pins its certificates fails closed against the
// run CA; a TCP port the launcher did not catch is unreachable and not
// recorded (the child's kernel answers ENETUNREACH).
package mediator

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"jr2.dev/boundary/custodian/internal/broker"
	"jr2.dev/boundary/custodian/internal/policy"
	"jr2.dev/boundary/custodian/internal/relay"
	"jr2.dev/boundary/custodian/internal/runca"
	"jr2.dev/boundary/internal/bundle"
	"jr2.dev/boundary/internal/logline"
	"jr2.dev/boundary/internal/mode"
)

// Options configure a Mediator. Policy, Broker, Record, CA and Addr are
// required.
type Options struct {
	Policy *policy.Policy
	Broker *broker.Broker
	// Record receives every record; it must be safe for concurrent use.
	Record bundle.Recorder
	CA     *runca.CA
	// Addr is the mediator's own address: what DNS answers, and what a
	// connection that is not a literal-IP dial was made to.
	Addr netip.Addr
	// Log receives the jr2.custodian refuse and intercept lines; nil for
	// none.
	Log io.Writer
	// Resolve, when set, gives the address to dial for an allowed
	// host:port instead of the system resolver (tests, benchmarks).
	Resolve func(host string, port uint16) (string, error)
	// Roots verify upstream TLS; nil is the system's roots.
	Roots *x509.CertPool
	// LocalUpstreams lets the mediator dial guarded addresses (loopback
	// among them): for tests and benchmarks whose upstream is on this
	// machine. Off, an allowed name that resolves to a guarded address is
	// refused, after resolution, on the address dialled.
	LocalUpstreams bool
	// HandshakeTimeout bounds reading the first bytes, the ClientHello and
	// the TLS handshake of a connection; 0 is 10 s.
	HandshakeTimeout time.Duration
	// Grace bounds how long Close waits for requests in flight; 0 is 2 s.
	Grace time.Duration
	// Mode is the run's mode layer (internal/mode); nil is live.
	Mode *mode.Layer
	// BodyBudget is how many bytes of request bodies the run records;
	// 0 is DefaultBodyBudget.
	BodyBudget int64
}

// Listeners are what a Mediator serves. Any may be nil.
type Listeners struct {
	DNS    net.PacketConn // UDP 53 on Addr
	DNSTCP net.Listener   // TCP 53 on Addr
	TCP    []Caught       // caught ports: every connection is sniffed
}

// Caught is a listener of a caught port.
type Caught struct {
	net.Listener
	// Port is the port its connections were dialled on; 0 reads it from
	// each connection's local address (the launcher's CatchTCP). Tests and
	// benchmarks on loopback set it to stand for 443 or 80.
	Port uint16
}

// Mediator serves one run. Serve it once, then Close it.
type Mediator struct {
	o      Options
	log    *logline.Writer
	srv    *http.Server
	feed   *relay.ChanListener
	dialer *net.Dialer
	tmu    sync.Mutex
	trans  map[string]*relay.Pool // scheme+" "+target
	mu     sync.Mutex
	pcs    []io.Closer
	conns  relay.Tracker  // the connections accepted and the work in flight on them
	loops  sync.WaitGroup // accept and read loops
	once   sync.Once
	// bodyBudget is what is left of Options.BodyBudget.
	bodyBudget atomic.Int64
}

// New checks o and returns a Mediator ready to Serve.
func New(o Options) (*Mediator, error) {
	if o.Policy == nil || o.Broker == nil || o.Record == nil || o.CA == nil || !o.Addr.Is4() {
		return nil, errors.New("mediator: Policy, Broker, Record, CA and an IPv4 Addr are required")
	}
	if o.HandshakeTimeout == 0 {
		o.HandshakeTimeout = 10 * time.Second
	}
	if o.Grace == 0 {
		o.Grace = 2 * time.Second
	}
	if o.Mode == nil {
		o.Mode, _ = mode.New(mode.Config{Mode: mode.Live}, mode.Names{}, o.Record)
	}
	if o.BodyBudget == 0 {
		o.BodyBudget = DefaultBodyBudget
	}
	m := &Mediator{
		o:      o,
		feed:   relay.NewChanListener(net.TCPAddrFromAddrPort(netip.AddrPortFrom(o.Addr, 0))),
		dialer: &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second},
		trans:  map[string]*relay.Pool{},
	}
	m.bodyBudget.Store(o.BodyBudget)
	if o.Log != nil {
		m.log = logline.NewBufferedWriter(o.Log, logline.Custodian, logEvery)
	}
	m.srv = &http.Server{
		Handler: http.HandlerFunc(m.serveHTTP),
		// Every request is decided, "OPTIONS *" too (net/http would
		// answer it 200 itself).
		DisableGeneralOptionsHandler: true,
		ReadHeaderTimeout:            30 * time.Second,
		IdleTimeout:                  2 * time.Minute,
		MaxHeaderBytes:               64 << 10,
		TLSNextProto:                 map[string]func(*http.Server, *tls.Conn, http.Handler){},
		ConnContext:                  connContext,
		ErrorLog:                     discardLog,
	}
	if m.log != nil {
		m.srv.ErrorLog = relay.ErrorLog(m.log, "mediator")
	}
	return m, nil
}

// Serve starts serving l and returns at once.
func (m *Mediator) Serve(l Listeners) {
	m.loops.Add(1)
	go func() {
		defer m.loops.Done()
		m.srv.Serve(m.feed)
	}()
	if l.DNS != nil {
		m.addCloser(l.DNS)
		m.loops.Add(1)
		go func() {
			defer m.loops.Done()
			m.serveDNS(l.DNS)
		}()
	}
	if l.DNSTCP != nil {
		m.accept(l.DNSTCP, m.serveDNSConn)
	}
	for _, ln := range l.TCP {
		port := ln.Port
		m.accept(ln.Listener, func(c net.Conn) { m.serveConn(c, port) })
	}
}

func (m *Mediator) addCloser(c io.Closer) {
	m.mu.Lock()
	m.pcs = append(m.pcs, c)
	m.mu.Unlock()
}

// accept runs handle for each connection of ln, tracked so that Close
// ends it.
func (m *Mediator) accept(ln net.Listener, handle func(net.Conn)) {
	m.addCloser(ln)
	m.loops.Add(1)
	go func() {
		defer m.loops.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					continue
				}
				return
			}
			if !m.conns.Begin(c) {
				c.Close()
				continue
			}
			go func() {
				defer m.conns.End()
				handle(c)
			}()
		}
	}()
}

// Close stops the listeners, waits up to the grace for requests in flight,
// then closes every connection and the upstream pools. Records written by
// requests still in flight after Close returns may be refused by a sealed
// bundle; nothing is sent unrecorded either way. It is safe to call more
// than once.
func (m *Mediator) Close() error {
	m.once.Do(m.close)
	return nil
}

func (m *Mediator) close() {
	m.conns.Stopping()
	m.mu.Lock()
	closers := m.pcs
	m.mu.Unlock()
	for _, c := range closers {
		c.Close()
	}
	m.feed.Close()
	m.conns.Wait(relay.After(m.o.Grace))
	m.srv.Close()
	m.conns.CloseAll() // a trackedConn leaves the set itself
	m.conns.Wait(nil)
	m.loops.Wait()
	m.tmu.Lock()
	for _, t := range m.trans {
		t.Close()
	}
	m.tmu.Unlock()
	if m.log != nil {
		m.log.Close()
	}
}

// logEvery is how long a log line may wait to be written with others;
// Close writes what waits, and each line after it at once.
const logEvery = 100 * time.Millisecond

// refuseLog writes the refuse line for target.
func (m *Mediator) refuseLog(target, reason string) {
	if m.log != nil {
		m.log.Log("action", "refuse", "target", target, "reason", reason)
	}
}

// record appends one record.
func (m *Mediator) record(kind string, fields any) (uint64, error) {
	return m.o.Record.Append(kind, fields)
}

// recordDenial appends a record of a denial and syncs the bundle: the
// denial is the evidence the bundle exists to carry.
func (m *Mediator) recordDenial(kind string, fields any) {
	if _, err := m.record(kind, fields); err == nil {
		m.o.Record.Sync()
	}
}

// discardLog drops the HTTP server's own error lines when there is no log:
// they can quote what the child sent. With a log, each is one contract
// line with a fixed word (relay.ErrorLog).
var discardLog = log.New(io.Discard, "", 0)
