package bootstrap_test

import (
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"jr2.dev/boundary/controlplane/internal/bootstrap"
)

// TestGuardOnlyOnTheTunnel: the dial guard runs on the tunnel's CONNECT,
// where the dynamic forward proxy saved the address it judges, and is
// disabled on every bound target's CONNECT, where nothing saves one, so
// Envoy never warns "Did not find filter state with key:
// envoy.stream.upstream_address" once per request, which a user reads as
// a fault (the real Envoy's log is checked by internal/testkit/readmewalk's
// TestReadmeEnvoy).
func TestGuardOnlyOnTheTunnel(t *testing.T) {
	m := hcm(t, listener(t, build(t, config("ws-7f3a")), bootstrap.ListenerEgress))
	for _, vh := range m.GetRouteConfig().VirtualHosts {
		for _, r := range vh.Routes {
			if r.GetRoute() == nil {
				continue // a direct answer: no upstream at all
			}
			cfg, has := r.TypedPerFilterConfig[bootstrap.FilterGuard]
			tunnel := r.GetRoute().GetCluster() == bootstrap.ClusterTunnel
			switch {
			case tunnel && has:
				t.Errorf("route %s: the tunnel's guard has a per-route config", r.Name)
			case !tunnel && !has:
				t.Errorf("route %s to %s: the guard runs where no address was saved", r.Name, r.GetRoute().GetCluster())
			case !tunnel && !unpack[*routev3.FilterConfig](t, cfg).Disabled:
				t.Errorf("route %s: the guard's per-route config does not disable it", r.Name)
			}
		}
	}
}
