package bootstrap

import (
	"net"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"jr2.dev/boundary/filter/pluginconf"
)

// idSegment is one path segment of an id, the engine's charset.
const idSegment = `[A-Za-z0-9._~-]+`

// Retry policies of the control routes: a read on any reset; a pick or the
// ask only on a reset before it was sent, so one the Orchestrator may have
// read is never sent twice.
const (
	retryRead  = "reset,connect-failure"
	retryWrite = "reset-before-request,connect-failure"
)

// controlListener forwards the four routes to the Orchestrator. The engine
// decides each request (and answers 404 for anything else); the route
// table only selects, rewrites POST /fetch and names the Orchestrator as
// the Host.
func (b *builder) controlListener() *listenerv3.Listener {
	c := b.in.Config
	routes := []*routev3.Route{
		b.controlRoute("surface", "GET", `^/agents/`+idSegment+`/surface$`, retryRead, ""),
		b.controlRoute("events", "POST", `^/agents/`+idSegment+`/events$`, retryWrite, ""),
		b.controlRoute("deliveries", "GET", `^/agents/`+idSegment+`/deliveries/`+idSegment+`$`, retryRead, ""),
	}
	if c.Sandbox != "" {
		routes = append(routes, b.controlRoute("fetch", "POST", `^/fetch$`, retryWrite, "/sandboxes/"+c.Sandbox+"/fetch"))
	}
	notFound := directRoute("not-found", prefix("/"), 404, "jr2 custodian: not a route of the control listener")
	notFound.TypedPerFilterConfig = b.perRoute(pluginconf.RoleControl, "")
	routes = append(routes, notFound)

	m := b.hcm(hcmSettings{
		statPrefix: ListenerControl,
		routes: &routev3.RouteConfiguration{Name: ListenerControl, VirtualHosts: []*routev3.VirtualHost{{
			Name:                   ListenerControl,
			Domains:                []string{"*"},
			Routes:                 routes,
			RequestHeadersToRemove: []string{"x-forwarded-proto"},
		}}},
		filters: []*hcmv3.HttpFilter{b.engineFilter(), b.markFilter(), b.routerFilter()},
		replies: b.controlReplies(c.Orchestrator),
		idle:    streamIdle,
	})
	strictTarget(m)
	webSocket(m)
	m.AccessLog = b.controlCodecLogs(c.Orchestrator)
	return &listenerv3.Listener{
		Name:         ListenerControl,
		Address:      b.socketAddress(c.Listeners.Control),
		FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{b.networkFilter(FilterHCM, m)}}},
	}
}

// controlRoute matches method and path, forwards to the Orchestrator with
// the Host set to it, no total timeout, and the retry policy given. A
// non-empty rewrite replaces the whole path (query kept); the pattern
// matches only the original path, so the rewrite is a no-op when the
// filter already set the upstream path the engine decided.
func (b *builder) controlRoute(name, verb, pattern, retryOn, rewrite string) *routev3.Route {
	action := &routev3.RouteAction{
		ClusterSpecifier:     &routev3.RouteAction_Cluster{Cluster: ClusterOrchestrator},
		HostRewriteSpecifier: &routev3.RouteAction_HostRewriteLiteral{HostRewriteLiteral: b.in.Config.Orchestrator},
		Timeout:              durationpb.New(0),
		RetryPolicy:          &routev3.RetryPolicy{RetryOn: retryOn, NumRetries: wrapperspb.UInt32(1)},
	}
	if rewrite != "" {
		action.RegexRewrite = &matcherv3.RegexMatchAndSubstitute{Pattern: &matcherv3.RegexMatcher{Regex: pattern}, Substitution: rewrite}
	}
	return &routev3.Route{
		Name: name,
		Match: &routev3.RouteMatch{
			PathSpecifier: &routev3.RouteMatch_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: pattern}},
			Headers:       []*routev3.HeaderMatcher{method(verb)},
		},
		Action:               &routev3.Route_Route{Route: action},
		TypedPerFilterConfig: b.perRoute(pluginconf.RoleControl, ""),
	}
}

// orchestratorCluster is plain HTTP to the manifest's Orchestrator: one
// logical DNS name (a Kubernetes Service), or a static address.
func (b *builder) orchestratorCluster() *clusterv3.Cluster {
	return b.dialCluster(ClusterOrchestrator, b.in.Config.Orchestrator, nil)
}

// dialCluster reaches one host:port: logical DNS for a name, static for an
// IP literal; socket, when not nil, is its transport socket.
func (b *builder) dialCluster(name, target string, socket *corev3.TransportSocket) *clusterv3.Cluster {
	host, _, _ := net.SplitHostPort(target)
	kind := clusterv3.Cluster_LOGICAL_DNS
	if isIP(host) {
		kind = clusterv3.Cluster_STATIC
	}
	return &clusterv3.Cluster{
		Name:                 name,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: kind},
		ConnectTimeout:       durationpb.New(connectTimeout),
		DnsLookupFamily:      clusterv3.Cluster_V4_PREFERRED,
		LoadAssignment: &endpointv3.ClusterLoadAssignment{
			ClusterName: name,
			Endpoints: []*endpointv3.LocalityLbEndpoints{{LbEndpoints: []*endpointv3.LbEndpoint{{
				HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: b.socketAddress(target)}},
			}}}},
		},
		TransportSocket: socket,
	}
}
