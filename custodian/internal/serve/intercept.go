package serve

import (
	"crypto/tls"
	"net/http"
	"net/netip"

	"jr2.dev/boundary/custodian/internal/relay"
	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/internal/contract"
)

// interceptor serves the requests of one bound target, arriving over TLS
// connections the egress listener ended with the target's leaf.
type interceptor struct {
	s      *Server
	target string // host:port, canonical
	host   string // the Host header upstream: host, or host:port when the port is not 443
	srv    *http.Server
	l      *relay.ChanListener
	pool   *relay.Pool
}

func (s *Server) newInterceptor(target string) *interceptor {
	h, _, _ := contract.SplitTarget(target)
	ic := &interceptor{s: s, target: target, host: contract.UpstreamHost(target), l: relay.NewChanListener(s.egress.Addr())}
	// A bound name that resolves to a guarded address is not dialled
	// (unless the config allows local targets): the agent could be serving
	// it.
	dialer := relay.GuardedDialer(s.dialer, func(a netip.Addr) *filter.Reply { return s.eng.DialBound(target, a) })
	ic.pool = relay.NewPool(dialer.DialContext, s.upstream, h, target)
	ic.srv = s.newServer("intercept", ic)
	ic.srv.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
	return ic
}

func (ic *interceptor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s := ic.s
	eng := s.eng.Latest() // this request, and its answer, are decided with one set of values
	req := relay.RequestOf(r)
	d := eng.DecideUpgrade(ic.target, &req, relay.UpgradeOf(r))
	if d.Reply != nil {
		s.log.Log(d.LogFields(0)...)
		relay.WriteReply(w, d.Reply)
		return
	}
	if d.WebSocket {
		ic.webSocket(w, r, eng, &d)
		return
	}
	defer relay.FullDuplex(w, r)()
	out, err := relay.Outbound(r, "https", ic.target, ic.host, &d)
	if err != nil {
		rep := eng.Unreachable(ic.target, "the request could not be built: "+err.Error())
		s.log.Log(d.LogFields(rep.Status)...)
		relay.WriteReply(w, rep)
		return
	}
	resp, sent, err := relay.RoundTrip(ic.pool, out)
	if err != nil {
		if r.Context().Err() != nil {
			s.log.Log(d.LogFields(499)...)
			return // the client went away: its request was reset upstream too
		}
		rep := relay.Failure(eng, ic.target, sent, err)
		s.log.Log(d.LogFields(rep.Status)...)
		relay.WriteReply(w, rep)
		return
	}
	var status int
	defer func() { s.log.Log(d.LogFields(status)...) }()
	relay.Response(eng, w, ic.target, r.Method, resp, &status, nil)
}

// webSocket carries a WebSocket upgrade the engine forwarded, on an
// upstream connection of its own (relay.WebSocket).
func (ic *interceptor) webSocket(w http.ResponseWriter, r *http.Request, eng *filter.Engine, d *filter.Decision) {
	s := ic.s
	out, err := relay.Outbound(r, "https", ic.target, ic.host, d)
	if err != nil {
		rep := eng.Unreachable(ic.target, "the request could not be built: "+err.Error())
		s.log.Log(d.LogFields(rep.Status)...)
		relay.WriteReply(w, rep)
		return
	}
	status, failed := relay.WebSocket(eng, w, r, out, ic.pool.Dial, ic.target, s.conns.Begin, s.conns.Untrack, nil)
	if failed != nil {
		if r.Context().Err() != nil {
			s.log.Log(d.LogFields(499)...)
			return
		}
		status = failed.Status
		relay.WriteReply(w, failed)
	}
	s.log.Log(d.LogFields(status)...)
}
