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
	if d.NeedBody {
		d = relay.SignedBody(eng, ic.target, r, &req)
	}
	if d.Reply != nil {
		s.log.Log(d.LogFields(0)...)
		relay.WriteReply(w, d.Reply)
		return
	}
	relay.Forward(w, r, &relay.Exchange{
		Engine: eng, Decision: &d, Scheme: "https", Target: ic.target, Host: ic.host, Transport: ic.pool,
		Prepare: func(out *http.Request) (int, bool) {
			if !d.WebSocket {
				return 0, false
			}
			return ic.webSocket(w, r, eng, out), true
		},
		Log: func(status int) { s.log.Log(d.LogFields(status)...) },
	})
}

// webSocket carries a WebSocket upgrade the engine forwarded, on an
// upstream connection of its own (relay.WebSocket), and returns the status
// the client got.
func (ic *interceptor) webSocket(w http.ResponseWriter, r *http.Request, eng *filter.Engine, out *http.Request) int {
	status, failed := relay.WebSocket(eng, w, r, out, ic.pool.Dial, ic.target, ic.s.conns.Begin, ic.s.conns.Untrack, nil)
	if failed != nil {
		if r.Context().Err() != nil {
			return 499
		}
		relay.WriteReply(w, failed)
		return failed.Status
	}
	return status
}
