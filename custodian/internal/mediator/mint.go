package mediator

import (
	"context"
	"net"
	"net/http"
	"strconv"

	"jr2.dev/boundary/filter"
)

// mint starts the broker's OAuth minter (a policy with no OAuth secret
// starts nothing) with the run's token transport: the engine's own
// (filter.TokenTransport: the dial guard on the address dialled, TLS
// verified against the roots every upstream is verified against), its
// dials resolved as the mediator's are (Options.Resolve) and, with
// LocalUpstreams, unguarded as the mediator's are. The minter's lines
// (action=mint, a secret's name and a word) go to the run's log.
func (m *Mediator) mint() (stop func()) {
	tr := filter.TokenTransport(m.o.Broker.Engine(), m.dialer, m.o.Roots).(*http.Transport)
	guarded := tr.DialContext
	if m.o.LocalUpstreams {
		guarded = m.dialer.DialContext
	}
	if resolve := m.o.Resolve; resolve != nil {
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, portText, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			port, err := strconv.ParseUint(portText, 10, 16)
			if err != nil {
				return nil, err
			}
			a, err := resolve(host, uint16(port))
			if err != nil {
				return nil, &net.OpError{Op: "dial", Net: network, Err: err}
			}
			return guarded(ctx, network, a)
		}
	} else {
		tr.DialContext = guarded
	}
	var log func(kv ...string)
	if m.log != nil {
		log = m.log.Log
	}
	return m.o.Broker.Mint(tr, log)
}
