package bootstrap

import (
	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	rbacconfigv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	accesslogdatav3 "github.com/envoyproxy/go-control-plane/envoy/data/accesslog/v3"
	celv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/filters/cel/v3"
	streamv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"
	dfpclusterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/clusters/dynamic_forward_proxy/v3"
	dnscachev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/dynamic_forward_proxy/v3"
	setfscommonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/common/set_filter_state/v3"
	dfpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/dynamic_forward_proxy/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	setfsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/set_filter_state/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	upstreamipv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/rbac/matchers/upstream_ip_port/v3"
	internalupv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/internal_upstream/v3"
	rawbufv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/raw_buffer/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"jr2.dev/boundary/filter/dialguard"
	"jr2.dev/boundary/filter/pluginconf"
	"jr2.dev/boundary/internal/contract"
)

// GuardPolicy names the dial guard's DENY policy; a request it refuses has
// the response code details rbac_access_denied_matched_policy[guard].
const GuardPolicy = "guard"

// The access-log lines of the egress listener: what the Go filter cannot
// see. It decides a tunnel before anything is resolved; whether the tunnel
// was then refused on the address actually resolved, or came up, only
// Envoy knows.
const (
	// tunnelUp: the route is the tunnel (the log type says its CONNECT got
	// its 200).
	tunnelUp = "xds.route_name == '" + RouteTunnel + "'"
)

// egressListener takes CONNECT only: the target decides. A bound target
// goes to its internal listener; any other is tunneled.
func (b *builder) egressListener() *listenerv3.Listener {
	var vhosts []*routev3.VirtualHost
	for _, g := range b.interceptGroups() {
		vhosts = append(vhosts, &routev3.VirtualHost{
			Name:    g.name,
			Domains: g.targets,
			Routes:  []*routev3.Route{b.connectRoute(g.name, g.name), b.notConnect()},
		})
	}
	vhosts = append(vhosts, &routev3.VirtualHost{
		Name:    RouteTunnel,
		Domains: []string{"*"},
		Routes:  []*routev3.Route{b.connectRoute(RouteTunnel, ClusterTunnel), b.notConnect()},
	})
	m := b.hcm(hcmSettings{
		statPrefix: ListenerEgress,
		routes:     &routev3.RouteConfiguration{Name: ListenerEgress, VirtualHosts: vhosts},
		filters: []*hcmv3.HttpFilter{
			b.engineFilter(),
			b.markFilter(),
			b.targetFilter(),
			b.httpFilter(FilterDFP, &dfpv3.FilterConfig{
				ImplementationSpecifier: &dfpv3.FilterConfig_DnsCacheConfig{DnsCacheConfig: dnsCache()},
				SaveUpstreamAddress:     true,
			}),
			b.guardFilter(),
			b.routerFilter(),
		},
		replies: b.tunnelReplies(),
		idle:    streamIdle,
		connect: true,
	})
	m.AccessLog = append(b.egressLogs(), b.egressCodecLogs()...)
	m.AccessLogOptions = &hcmv3.HttpConnectionManager_HcmAccessLogOptions{FlushLogOnTunnelSuccessfullyEstablished: true}
	return &listenerv3.Listener{
		Name:         ListenerEgress,
		Address:      b.socketAddress(b.in.Config.Listeners.Egress),
		FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{b.networkFilter(FilterHCM, m)}}},
	}
}

// connectRoute ends a CONNECT and forwards its bytes to cluster. On a
// bound target's route (its internal listener, not the tunnel) the dial
// guard is disabled: the dynamic forward proxy saves an address only for
// its own cluster, so the guard's upstream_ip_port matchers would find no
// envoy.stream.upstream_address there and warn once per range per request
// (a warning per request, which a user reads as a fault). The guard has
// nothing to judge on that route: its
// destination is the intercept listener, and the engine dials the target.
func (b *builder) connectRoute(name, cluster string) *routev3.Route {
	perRoute := b.perRoute(pluginconf.RoleEgress, "")
	if cluster != ClusterTunnel {
		perRoute[FilterGuard] = b.pack(&routev3.FilterConfig{Disabled: true})
	}
	return &routev3.Route{
		Name:  name,
		Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_ConnectMatcher_{ConnectMatcher: &routev3.RouteMatch_ConnectMatcher{}}},
		Action: &routev3.Route_Route{Route: &routev3.RouteAction{
			ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: cluster},
			Timeout:          durationpb.New(0),
			UpgradeConfigs: []*routev3.RouteAction_UpgradeConfig{{
				UpgradeType:   "CONNECT",
				ConnectConfig: &routev3.RouteAction_UpgradeConfig_ConnectConfig{},
			}},
		}},
		TypedPerFilterConfig: perRoute,
	}
}

// notConnect: anything but CONNECT is the engine's to refuse (405); the
// direct answer stands behind it.
func (b *builder) notConnect() *routev3.Route {
	r := directRoute("not-connect", prefix("/"), 405, "jr2 custodian: this listener takes CONNECT only; use it as HTTPS_PROXY")
	r.TypedPerFilterConfig = b.perRoute(pluginconf.RoleEgress, "")
	return r
}

// guardFilter refuses a tunnel whose resolved address (saved by the dynamic
// forward proxy filter) is in any of dialguard.Ranges: one upstream_ip_port
// permission per range, in the list's order.
func (b *builder) guardFilter() *hcmv3.HttpFilter {
	var perms []*rbacconfigv3.Permission
	for _, r := range dialguard.Ranges {
		perms = append(perms, &rbacconfigv3.Permission{Rule: &rbacconfigv3.Permission_Matcher{Matcher: &corev3.TypedExtensionConfig{
			Name: "envoy.rbac.matchers.upstream_ip_port",
			TypedConfig: b.pack(&upstreamipv3.UpstreamIpPortMatcher{UpstreamIp: &corev3.CidrRange{
				AddressPrefix: r.Prefix.Addr().String(),
				PrefixLen:     wrapperspb.UInt32(uint32(r.Prefix.Bits())),
			}}),
		}}})
	}
	return b.httpFilter(FilterGuard, &rbacv3.RBAC{Rules: &rbacconfigv3.RBAC{
		Action: rbacconfigv3.RBAC_DENY,
		Policies: map[string]*rbacconfigv3.Policy{GuardPolicy: {
			Permissions: perms,
			Principals:  []*rbacconfigv3.Principal{{Identifier: &rbacconfigv3.Principal_Any{Any: true}}},
		}},
	}})
}

// dnsCache is the one DNS cache the dynamic forward proxy filter and its
// cluster share (Envoy requires the two configs to be equal); the address
// the guard judges and the addresses dialled come from one entry — but the
// guard judges only its first address, and the cluster's host may fall over
// to the others (see the known gap in package dialguard).
func dnsCache() *dnscachev3.DnsCacheConfig {
	return &dnscachev3.DnsCacheConfig{Name: ClusterTunnel, DnsLookupFamily: clusterv3.Cluster_V4_PREFERRED}
}

// tunnelCluster dials whatever the dynamic forward proxy resolved.
func (b *builder) tunnelCluster() *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name: ClusterTunnel,
		ClusterDiscoveryType: &clusterv3.Cluster_ClusterType{ClusterType: &clusterv3.Cluster_CustomClusterType{
			Name: "envoy.clusters.dynamic_forward_proxy",
			TypedConfig: b.pack(&dfpclusterv3.ClusterConfig{
				ClusterImplementationSpecifier: &dfpclusterv3.ClusterConfig_DnsCacheConfig{DnsCacheConfig: dnsCache()},
			}),
		}},
		LbPolicy:       clusterv3.Cluster_CLUSTER_PROVIDED,
		ConnectTimeout: durationpb.New(connectTimeout),
	}
}

// targetFilter writes the CONNECT's target, as the engine decided and
// rewrote it into :authority, into TargetFilterState, shared once with the
// upstream connection: the intercept listener reads it there. It runs
// after the mark, so only a CONNECT the engine decided carries one; a
// client cannot set filter state. The value is hashable
// (envoy.hashable_string): Envoy keys the upstream connection pool only by
// shared objects that are, so with a plain string a CONNECT to B could be
// given a pooled internal connection opened for A, carrying A's target.
func (b *builder) targetFilter() *hcmv3.HttpFilter {
	return b.httpFilter(FilterTarget, &setfsv3.Config{OnRequestHeaders: []*setfscommonv3.FilterStateValue{{
		Key:                &setfscommonv3.FilterStateValue_ObjectKey{ObjectKey: TargetFilterState},
		FactoryKey:         "envoy.hashable_string",
		Value:              &setfscommonv3.FilterStateValue_FormatString{FormatString: &corev3.SubstitutionFormatString{Format: &corev3.SubstitutionFormatString_TextFormatSource{TextFormatSource: inline("%REQ(:AUTHORITY)%")}}},
		SharedWithUpstream: setfscommonv3.FilterStateValue_ONCE,
	}}})
}

// interceptCluster reaches an internal listener; its internal_upstream
// transport carries the stream's shared filter state (the target) into
// the listener's connection.
func (b *builder) interceptCluster(name string) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		TransportSocket: &corev3.TransportSocket{Name: "envoy.transport_sockets.internal_upstream", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: b.pack(&internalupv3.InternalUpstreamTransport{
			TransportSocket: &corev3.TransportSocket{Name: "envoy.transport_sockets.raw_buffer", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: b.pack(&rawbufv3.RawBuffer{})}},
		})}},
		Name:                 name,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		ConnectTimeout:       durationpb.New(connectTimeout),
		LoadAssignment: &endpointv3.ClusterLoadAssignment{
			ClusterName: name,
			Endpoints: []*endpointv3.LocalityLbEndpoints{{LbEndpoints: []*endpointv3.LbEndpoint{{
				HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: &corev3.Address{
					Address: &corev3.Address_EnvoyInternalAddress{EnvoyInternalAddress: &corev3.EnvoyInternalAddress{
						AddressNameSpecifier: &corev3.EnvoyInternalAddress_ServerListenerName{ServerListenerName: name},
					}},
				}}},
			}}}},
		},
	}
}

// egressLogs are the tunnel and guard lines of the log contract, each in
// two forms: a target that carries a stand-in (an agent can write one into
// a CONNECT) is logged as [stand-in], never as written.
func (b *builder) egressLogs() []*accesslogv3.AccessLog {
	var logs []*accesslogv3.AccessLog
	for _, l := range []struct {
		when    accesslogdatav3.AccessLogType
		expr    string
		line    string // after "target="
		trailer string
	}{
		{accesslogdatav3.AccessLogType_DownstreamTunnelSuccessfullyEstablished, tunnelUp, "action=tunnel", ""},
		{accesslogdatav3.AccessLogType_DownstreamEnd, guardDenied, "action=refuse", " reason=guard"},
	} {
		for _, standIn := range []bool{false, true} {
			target := tunnelTarget
			if standIn {
				target = "[stand-in]"
			}
			logs = append(logs, b.stdoutLog(
				"jr2.custodian "+l.line+" target="+target+l.trailer+"\n",
				&accesslogv3.AccessLogFilter{FilterSpecifier: &accesslogv3.AccessLogFilter_AndFilter{AndFilter: &accesslogv3.AndFilter{Filters: []*accesslogv3.AccessLogFilter{
					{FilterSpecifier: &accesslogv3.AccessLogFilter_LogTypeFilter{LogTypeFilter: &accesslogv3.LogTypeFilter{Types: []accesslogdatav3.AccessLogType{l.when}}}},
					b.celFilter(l.expr),
					standInFilter(standIn),
				}}}},
			))
		}
	}
	return logs
}

// standInFilter matches a CONNECT target that holds a stand-in's prefix
// or a shaped stand-in's mark (any case), or, inverted, one that holds
// neither: the engine's logTarget, in Envoy's access log.
func standInFilter(holds bool) *accesslogv3.AccessLogFilter {
	var fs []*accesslogv3.AccessLogFilter
	for _, mark := range []string{contract.StandInPrefix, contract.StandInMark} {
		fs = append(fs, &accesslogv3.AccessLogFilter{FilterSpecifier: &accesslogv3.AccessLogFilter_HeaderFilter{HeaderFilter: &accesslogv3.HeaderFilter{
			Header: &routev3.HeaderMatcher{
				Name: ":authority",
				HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{
					MatchPattern: &matcherv3.StringMatcher_Contains{Contains: mark},
					IgnoreCase:   true,
				}},
				InvertMatch: !holds,
			},
		}}})
	}
	if holds {
		return &accesslogv3.AccessLogFilter{FilterSpecifier: &accesslogv3.AccessLogFilter_OrFilter{OrFilter: &accesslogv3.OrFilter{Filters: fs}}}
	}
	return &accesslogv3.AccessLogFilter{FilterSpecifier: &accesslogv3.AccessLogFilter_AndFilter{AndFilter: &accesslogv3.AndFilter{Filters: fs}}}
}

func (b *builder) celFilter(expr string) *accesslogv3.AccessLogFilter {
	return &accesslogv3.AccessLogFilter{FilterSpecifier: &accesslogv3.AccessLogFilter_ExtensionFilter{ExtensionFilter: &accesslogv3.ExtensionFilter{
		Name:       "envoy.access_loggers.extension_filters.cel",
		ConfigType: &accesslogv3.ExtensionFilter_TypedConfig{TypedConfig: b.pack(&celv3.ExpressionFilter{Expression: expr})},
	}}}
}

// stdoutLog writes line (a format string) to stdout when f matches.
func (b *builder) stdoutLog(line string, f *accesslogv3.AccessLogFilter) *accesslogv3.AccessLog {
	return &accesslogv3.AccessLog{
		Name:   "envoy.access_loggers.stdout",
		Filter: f,
		ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: b.pack(&streamv3.StdoutAccessLog{
			AccessLogFormat: &streamv3.StdoutAccessLog_LogFormat{LogFormat: &corev3.SubstitutionFormatString{
				Format: &corev3.SubstitutionFormatString_TextFormatSource{TextFormatSource: inline(line)},
			}},
		})},
	}
}
