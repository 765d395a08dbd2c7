// Package mediator is the one peer of a contained run's child: it answers
// the child's DNS, takes every TCP connection the child makes on a caught
// port, reads where it means to go (the ClientHello's SNI, the Host header,
// the proxy's CONNECT or absolute URL, or the address dialled), decides by
// the policy, records the attempt and the decision, and carries what the
// policy allows to its upstream through the same engine as the Custodian.
// From Serve to Close it also mints the run's OAuth tokens (mint.go).
//
// Invariants: every decision on a request is the engine's — each request on
// an allowed connection, bound host or not, is one call,
// filter.Engine.DecideAllowed, and each dial is filter.Engine.DialAllowed;
// this package records, applies the run's mode and moves bytes. A request
// and its answer are decided with the one engine the broker gave when it
// began; a minted token swaps in a new engine for the requests after it.
// Every attempt is on the record, and nothing reaches an upstream unless
// the attempt and the decision that allowed it are in the record first; a
// record that cannot be written denies what it would have recorded, and a
// name or a request holding a form of a held value is recorded with its
// label in the form's place and denied. A value reaches the wire only where
// the engine put it (a header it Set, or the query of an AWS presigned URL
// it signed again), over TLS, toward a host the policy binds it to, and an
// OAuth grant's parts only in the engine's own request to the grant's
// tokenURL. Log lines carry a target and a word, never anything the child
// chose.
//
// docs/run.md is the reference ("The mediator's answers", "The bundle",
// "What the mediator does not cover"). serveConn reads a connection's
// first byte, admit records an attempt, forward.go carries a request,
// reqbody.go records its body.
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
	// stopMint ends the OAuth minter Serve started (mint.go).
	stopMint func()
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

// Serve starts serving l, and the minter of the run's OAuth tokens, and
// returns at once.
func (m *Mediator) Serve(l Listeners) {
	m.stopMint = m.mint()
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
	if m.stopMint != nil {
		m.stopMint()
	}
	if m.log != nil {
		m.log.Close()
	}
}

// logEvery is how long a log line may wait to be written with others;
// Close writes what waits, and each line after it at once. The lines are
// the Custodian's refuse, intercept and error lines: a target (or a
// listener) and a word, never a value, a stand-in, a path, a query, a
// header value, a body or anything else the child chose.
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
