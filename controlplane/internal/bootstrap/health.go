package bootstrap

import (
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	connlimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/connection_limit/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"jr2.dev/boundary/internal/hostlimits"
)

// healthListener is the one listener a peer in the cluster can reach (the
// kubelet's probe). It holds at most hostlimits.HealthConnections, closes
// one idle (or still sending its headers) for 5 s, and has a share of
// Envoy's global connection limit of its own (the limit is the sum of the
// listeners' own), so a peer's idle connections cannot stop the control or
// the egress listener. It does not set ignore_global_conn_limit: in Envoy
// 1.39.3 each of its closed connections would give back a place in the
// global count it never took. It runs no credential filter: it answers
// itself.
func (b *builder) healthListener() *listenerv3.Listener {
	healthz := directRoute("healthz", &routev3.RouteMatch{
		PathSpecifier: &routev3.RouteMatch_Path{Path: "/healthz"},
		Headers:       []*routev3.HeaderMatcher{method("GET")},
	}, 200, "ok")
	m := b.hcm(hcmSettings{
		statPrefix: ListenerHealth,
		routes: &routev3.RouteConfiguration{Name: ListenerHealth, VirtualHosts: []*routev3.VirtualHost{{
			Name:    ListenerHealth,
			Domains: []string{"*"},
			Routes:  []*routev3.Route{healthz, directRoute("not-found", prefix("/"), 404, "not found")},
		}}},
		filters: []*hcmv3.HttpFilter{b.routerFilter()},
		idle:    healthIdle,
	})
	m.RequestHeadersTimeout = durationpb.New(healthIdle)
	// At its idle timeout Envoy drains an HTTP/1 connection for drain_timeout
	// (5 s by default) before it closes it: a health connection idle 5 s
	// stayed open ~11 s (TestE2E/envoy/traffic/health_limits). Close it then.
	m.DrainTimeout = durationpb.New(time.Millisecond)
	return &listenerv3.Listener{
		Name:    ListenerHealth,
		Address: b.socketAddress(b.in.Config.Listeners.Health),
		FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{
			b.networkFilter(FilterConnLimit, &connlimitv3.ConnectionLimit{StatPrefix: ListenerHealth, MaxConnections: wrapperspb.UInt64(hostlimits.HealthConnections)}),
			b.networkFilter(FilterHCM, m),
		}}},
	}
}
