// Package serve is `custodian serve`: the Custodian's Go host, for where
// Envoy is absent. It runs the same engine (jr2.dev/boundary/filter) on the
// same rendered files, with the same three listeners, answers and log lines
// as Envoy with the module or the Go filter.
//
// Invariant: it is transport only. Every decision comes from the engine;
// this package ends TLS with a bound target's leaf, forwards over TLS
// verified against ca/upstream.crt (package relay), tunnels other targets
// byte for byte, and checks in net.Dialer.Control the address it actually
// dials, after resolution. A held value leaves this process only in the
// request to the bound target (or the Orchestrator) the engine decided it
// for, or to an OAuth secret's token endpoint (filter.Live.Mint). Its log
// lines are docs/logs.md's jr2.custodian lines (logEvery says when they are
// written) and carry nothing the peer chose; errors name files and targets,
// never contents. Every request on every listener reaches the engine or
// this package's handler, never an answer of net/http's own (newServer,
// relay.Gate). A rotation of the values (filter.Live) changes only the
// requests that arrive after it; a request in flight, or a tunnel, keeps
// its set.
package serve

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"jr2.dev/boundary/custodian/internal/relay"
	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/internal/contract"
	"jr2.dev/boundary/internal/hostlimits"
	"jr2.dev/boundary/internal/listenerr"
	"jr2.dev/boundary/internal/logline"
	"jr2.dev/boundary/internal/valuedir"
)

// Options configure a Server. Empty addresses take the config's listeners.
type Options struct {
	// ConfigPath is custodian.json inside the rendered directory; leaves
	// (tls/) and ca/upstream.crt are read beside it.
	ConfigPath string
	Control    string
	Egress     string
	Health     string
	// Log receives the jr2.custodian lines (stdout in production).
	Log io.Writer
	// Resolver resolves tunnel targets; nil is net.DefaultResolver.
	Resolver *net.Resolver
	// Grace bounds a graceful stop; 0 is hostlimits.StopGrace.
	Grace time.Duration

	logEvery time.Duration // how long a log line may wait; 0 is logEvery (tests set it)
}

// Server is one running Custodian.
type Server struct {
	// eng is the first engine; each request decides with eng.Latest(),
	// which follows the value directory once Serve watches it (live).
	eng      *filter.Engine
	live     *filter.Live
	log      *logline.Writer
	leaves   map[string]*tls.Certificate // bound target -> its leaf
	upstream *x509.CertPool
	dialer   *net.Dialer
	grace    time.Duration

	control, egress, health net.Listener
	servers                 []*http.Server
	intercepts              map[string]*interceptor

	// conns are the tunnels and WebSockets, which http.Server does not
	// track, for the graceful stop.
	conns relay.Tracker
}

// New loads the rendered directory (config, values, leaves, upstream
// roots), binds the three listeners and returns a Server ready to Serve.
// Nothing is served before every file loaded.
func New(o Options) (*Server, error) {
	cfg, err := filter.LoadConfig(o.ConfigPath)
	if err != nil {
		return nil, err
	}
	vals, err := filter.LoadValues(cfg)
	if err != nil {
		// The engine's refusal names the secret, never a path (it may be
		// logged); this start error names where the file was looked for.
		return nil, fmt.Errorf("%w (the value directory: %s, custodian.json's valuesDir)", err, cfg.ValuesDir)
	}
	lw := logline.NewBufferedWriter(o.Log, logline.Custodian, cmp.Or(o.logEvery, logEvery))
	live, err := filter.NewLive(cfg, vals, filter.LiveOptions{Log: lw.Log})
	for _, v := range vals {
		clear(v) // the engine keeps its own copy
	}
	if err != nil {
		return nil, err
	}
	eng := live.Engine()
	dir := filepath.Dir(o.ConfigPath)
	s := &Server{
		eng:        eng,
		live:       live,
		log:        lw,
		leaves:     map[string]*tls.Certificate{},
		intercepts: map[string]*interceptor{},
		grace:      o.Grace,
	}
	if s.grace == 0 {
		s.grace = hostlimits.StopGrace
	}
	for _, t := range eng.Targets() {
		base := filepath.Join(dir, contract.LeafBase(t))
		c, err := tls.LoadX509KeyPair(base+".crt", base+".key")
		if err != nil {
			return nil, fmt.Errorf("leaf of %s: %w; render the directory again with controlplane render", t, err)
		}
		s.leaves[t] = &c
	}
	pem, err := os.ReadFile(filepath.Join(dir, "ca", "upstream.crt"))
	if err != nil {
		return nil, fmt.Errorf("upstream roots: %w; render the directory again with controlplane render", err)
	}
	s.upstream = x509.NewCertPool()
	if !s.upstream.AppendCertsFromPEM(pem) {
		return nil, errors.New("upstream roots: ca/upstream.crt holds no certificate; render the directory again with controlplane render")
	}
	s.dialer = &net.Dialer{
		Timeout:   10 * time.Second,
		KeepAlive: 30 * time.Second,
		Resolver:  o.Resolver,
	}
	addr := func(flag, def string) string {
		if flag != "" {
			return flag
		}
		return def
	}
	// What may hold a Custodian's address: another Custodian of this or
	// another rendered directory, in either host.
	const holder = "another custodian serve, or an Envoy run from a rendered envoy.json,"
	if s.control, err = net.Listen("tcp", addr(o.Control, cfg.Listeners.Control)); err != nil {
		return nil, listenerr.Wrap(err, "control listener", "--control ADDR", holder)
	}
	if s.egress, err = net.Listen("tcp", addr(o.Egress, cfg.Listeners.Egress)); err != nil {
		s.control.Close()
		return nil, listenerr.Wrap(err, "egress listener", "--egress ADDR (and the clients' HTTPS_PROXY with it)", holder)
	}
	if s.health, err = net.Listen("tcp", addr(o.Health, cfg.Listeners.Health)); err != nil {
		s.control.Close()
		s.egress.Close()
		return nil, listenerr.Wrap(err, "health listener", "--health ADDR", holder)
	}
	return s, nil
}

// Addrs returns the bound control, egress and health addresses.
func (s *Server) Addrs() (control, egress, health string) {
	return s.control.Addr().String(), s.egress.Addr().String(), s.health.Addr().String()
}

// Serve serves until ctx ends, then stops gracefully: the listeners close,
// requests in flight may finish within the grace, and tunnels still open
// after it are closed.
func (s *Server) Serve(ctx context.Context) error {
	ctl := s.newControl()
	egr := s.newEgress()
	hlt := s.newHealthServer()
	for _, t := range s.eng.Targets() {
		s.intercepts[t] = s.newInterceptor(t)
	}
	s.servers = []*http.Server{ctl, egr, hlt}
	for _, ic := range s.intercepts {
		s.servers = append(s.servers, ic.srv)
	}
	errc := make(chan error, 3+len(s.intercepts))
	serve := func(srv *http.Server, l net.Listener) {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- err
		}
	}
	// Each listener holds at most its own number of connections
	// (hostlimits; ADR-0059's global limit is their sum), closing one
	// beyond at once, as Envoy's connection_limit filters do. An
	// intercepted connection rides its egress connection, counted there.
	go serve(ctl, gated(limitListener(s.control, hostlimits.ControlConnections)))
	go serve(egr, gated(limitListener(s.egress, hostlimits.EgressConnections)))
	go serve(hlt, limitListener(s.health, hostlimits.HealthConnections))
	for _, ic := range s.intercepts {
		go serve(ic.srv, ic.l)
	}
	c, e, h := s.Addrs()
	s.log.Event("ready", append(s.eng.ReadyFields(), "control", c, "egress", e, "health", h)...)
	stopWatch := s.live.Watch(valuedir.WatchOptions{})
	stopMint := func() {}
	if s.live.Config().HasOAuth() {
		stopMint = s.live.Mint(filter.TokenTransport(s.eng, s.dialer, s.upstream))
	}

	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	stopWatch()
	stopMint()
	s.stop()
	s.log.Close()
	return err
}

// logEvery is how long a log line may wait to be written with others: one
// write per request was a fifth of a 1 KiB request's syscalls. The ready
// line goes at once, and Serve writes what waits before it returns, so a
// graceful stop (SIGTERM) loses no line.
const logEvery = 100 * time.Millisecond

// newServer is the one way this host makes an http.Server for listener:
// every request reaches h, "OPTIONS *" included (net/http would answer it
// 200 itself; it is the engine's 400 on an intercepted connection, the
// control listener's 404, the egress listener's 405), so every request on
// an intercepted connection is the engine's to decide; every connection
// but the health listener's is read through relay.Gate; and what net/http
// would log (a TLS handshake error quoting the ALPN the peer offered, a
// panic, and the standard logger its Transport writes to) is one contract
// line with a fixed word (relay.ErrorLog: action=error listener=<name>
// reason=<fixed word>).
func (s *Server) newServer(listener string, h http.Handler) *http.Server {
	return &http.Server{
		Handler:                      h,
		DisableGeneralOptionsHandler: true,
		ReadHeaderTimeout:            hostlimits.HeaderTimeout,
		IdleTimeout:                  hostlimits.IdleTimeout,
		MaxHeaderBytes:               hostlimits.MaxHeaderBytes,
		ErrorLog:                     relay.ErrorLog(s.log, listener),
		ConnContext:                  relay.GateContext,
	}
}

func (s *Server) stop() {
	s.conns.Stopping()
	ctx, cancel := context.WithTimeout(context.Background(), s.grace)
	defer cancel()
	var wg sync.WaitGroup
	for _, srv := range s.servers {
		wg.Add(1)
		go func(srv *http.Server) {
			defer wg.Done()
			if srv.Shutdown(ctx) != nil {
				srv.Close()
			}
		}(srv)
	}
	wg.Wait()
	// Tunnels are hijacked connections http.Server does not track: give
	// them what is left of the grace, then close them.
	s.conns.Stop(ctx.Done())
}
