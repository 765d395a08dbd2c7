package bootstrap

import (
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	overloadv3 "github.com/envoyproxy/go-control-plane/envoy/config/overload/v3"
	connlimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/connection_limit/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	downstreamv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/downstream_connections/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"jr2.dev/boundary/internal/hostlimits"
)

// ResourceMonitorConnections is the overload manager's global downstream
// connection limit.
const ResourceMonitorConnections = "envoy.resource_monitors.global_downstream_max_connections"

// agentLimits gives a connection manager of the agent's (control, egress,
// intercept) the limits custodian serve holds too (package hostlimits): a
// request's headers within HeaderTimeout of their first byte, a connection
// with no request in flight closed after IdleTimeout (at once then: an
// HTTP/1 connection is otherwise drained drain_timeout longer, 5 s), a
// request in flight on which nothing moved for StreamIdle ended, and a
// header block of at most MaxHeaderBytes.
func agentLimits(m *hcmv3.HttpConnectionManager) {
	m.RequestHeadersTimeout = durationpb.New(hostlimits.HeaderTimeout)
	m.StreamIdleTimeout = durationpb.New(hostlimits.StreamIdle)
	m.CommonHttpProtocolOptions = &corev3.HttpProtocolOptions{IdleTimeout: durationpb.New(hostlimits.IdleTimeout)}
	m.DrainTimeout = durationpb.New(time.Millisecond)
	m.MaxRequestHeadersKb = wrapperspb.UInt32(hostlimits.MaxHeaderBytes >> 10)
}

// limitConnections applies the connection limits to the built listeners:
// the egress and control listeners each hold at most their own number (a
// connection_limit filter before the connection manager; the health
// listener has its own, hostlimits.HealthConnections), and the overload manager's global limit is their sum. No
// listener sets ignore_global_conn_limit: Envoy 1.39.3 gives back a place
// in the global count when such a listener's connection closes, one it
// never took (hostlimits.MaxConnections).
func (b *builder) limitConnections(ls []*listenerv3.Listener) {
	for _, l := range ls {
		var max uint64
		switch l.Name {
		case ListenerEgress:
			max = hostlimits.EgressConnections
		case ListenerControl:
			max = hostlimits.ControlConnections
		default:
			continue
		}
		for _, fc := range l.FilterChains {
			fc.Filters = append([]*listenerv3.Filter{b.networkFilter(FilterConnLimit, &connlimitv3.ConnectionLimit{
				StatPrefix:     l.Name,
				MaxConnections: wrapperspb.UInt64(max),
			})}, fc.Filters...)
		}
	}
}

// overload is the global connection limit (ADR-0059), the sum of the
// listeners' own: never the first to bind, a backstop.
func (b *builder) overload() *overloadv3.OverloadManager {
	return &overloadv3.OverloadManager{ResourceMonitors: []*overloadv3.ResourceMonitor{{
		Name: ResourceMonitorConnections,
		ConfigType: &overloadv3.ResourceMonitor_TypedConfig{TypedConfig: b.pack(&downstreamv3.DownstreamConnectionsConfig{
			MaxActiveDownstreamConnections: hostlimits.MaxConnections,
		})},
	}}}
}

// admin is Envoy's admin interface on a unix socket of the Custodian
// container's own (Input.AdminSocket under hostlimits.AdminSocketDir,
// mode 0600), never on TCP:
// custodian envoy drives the graceful stop through it
// (/healthcheck/fail, /drain_listeners, /stats). The Harness shares the
// pod's network namespace but not its files, so it cannot reach it.
func (b *builder) admin() *bootstrapv3.Admin {
	return &bootstrapv3.Admin{Address: &corev3.Address{Address: &corev3.Address_Pipe{Pipe: &corev3.Pipe{
		Path: b.in.AdminSocket,
		Mode: 0o600,
	}}}}
}
