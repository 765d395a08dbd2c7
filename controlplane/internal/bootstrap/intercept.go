package bootstrap

import (
	"path/filepath"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"jr2.dev/boundary/controlplane/internal/pki"
	"jr2.dev/boundary/filter/pluginconf"
	"jr2.dev/boundary/internal/contract"
)

// LeafFiles are where a bound target's leaf and key are, relative to the
// rendered directory (contract.LeafBase, the path custodian serve reads too).
func LeafFiles(target string) (cert, key string) {
	base := filepath.ToSlash(contract.LeafBase(target))
	return base + ".crt", base + ".key"
}

// interceptGroup is one internal listener and the bound targets it serves.
type interceptGroup struct {
	name    string   // the listener's name, and its egress cluster's
	targets []string // table order
}

// interceptGroups: every target named by a DNS name shares one listener,
// ListenerIntercept, which picks the leaf by SNI; a client sends no SNI
// for an IP literal, so each IP target keeps a listener of its own.
func (b *builder) interceptGroups() []interceptGroup {
	shared := interceptGroup{name: ListenerIntercept}
	var own []interceptGroup
	for _, t := range b.targets {
		if b.isIPTarget(t) {
			own = append(own, interceptGroup{name: InterceptListener(t), targets: []string{t}})
		} else {
			shared.targets = append(shared.targets, t)
		}
	}
	if len(shared.targets) == 0 {
		return own
	}
	return append([]interceptGroup{shared}, own...)
}

// isIPTarget reports whether a bound target is an IP literal.
func (b *builder) isIPTarget(t string) bool {
	_, ip, err := pki.SAN(t)
	if err != nil {
		b.fail(err)
	}
	return ip
}

// interceptListener ends the agent's TLS for a group of bound targets
// with their leaves (one per name: Envoy picks the one whose SAN the SNI
// names, else the first), lets the engine decide each request, and sends
// it to the target the connection was opened for. That target is the
// CONNECT's, which the egress listener wrote into the connection's filter
// state (TargetFilterState, shared with the upstream connection and so
// with this listener's): each route matches one target's value exactly, so
// neither the SNI nor the Host picks the route, and the engine judges the
// Host against the connection's target (a Host naming another target is
// its 421). A connection without a value, or with one no target's route
// names, matches none of them: nothing of it is forwarded.
//
// Only the egress listener's filters write that value (a client cannot set
// filter state). The engine reads the same filter state: the virtual host
// carries one engine config, role intercept without a target, for all its
// routes, and the engine decides each stream for the connection's target
// (stream.Config.ForConnection; one it does not bind is refused 500), so a
// connection opened for one target never carries another's credential
// (e2e TestCrossTarget). The answers that name the target take it from the
// same filter state (connectionTarget). So envoy.json costs ~1.2 KiB per
// target (a leaf, a route, an egress domain, an upstream cluster): 400
// targets are about 520 KB (render's TestEnvoySizeIsLinear logs it).
func (b *builder) interceptListener(g interceptGroup) *listenerv3.Listener {
	var certs []*tlsv3.TlsCertificate
	seen := map[string]bool{}
	var routes []*routev3.Route
	for _, t := range g.targets {
		if name, _, err := pki.SAN(t); err == nil && !seen[name] {
			seen[name] = true
			cert, key := LeafFiles(t)
			certs = append(certs, &tlsv3.TlsCertificate{
				CertificateChain: filename(b.mounted(cert)),
				PrivateKey:       filename(b.mounted(key)),
			})
		}
		routes = append(routes, &routev3.Route{
			Name: InterceptRoute(t),
			Match: &routev3.RouteMatch{
				PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"},
				FilterState:   []*matcherv3.FilterStateMatcher{{Key: TargetFilterState, Matcher: &matcherv3.FilterStateMatcher_StringMatch{StringMatch: exact(t)}}},
			},
			Action: &routev3.Route_Route{Route: &routev3.RouteAction{
				ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: UpstreamCluster(t)},
				Timeout:          durationpb.New(0),
			}},
		})
	}
	routes = append(routes, b.connectInside())
	downstream := &tlsv3.DownstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{
		TlsCertificates: certs,
		AlpnProtocols:   http11,
	}}
	m := b.hcm(hcmSettings{
		statPrefix: "intercept",
		routes: &routev3.RouteConfiguration{Name: g.name, VirtualHosts: []*routev3.VirtualHost{{
			Name:                   g.name,
			Domains:                []string{"*"},
			Routes:                 routes,
			RequestHeadersToRemove: []string{"x-forwarded-proto"},
			// One engine config for every target's route, without a
			// target: the engine takes the connection's, the filter
			// state the routes match (pluginconf.TargetFilterState). A
			// config per route, each naming its target, was a fifth of
			// a large envoy.json.
			TypedPerFilterConfig: b.perRoute(pluginconf.RoleIntercept, ""),
		}}},
		filters: []*hcmv3.HttpFilter{
			b.engineFilter(),
			b.markFilter(),
			b.routerFilter(),
		},
		replies: b.interceptReplies(connectionTarget),
		idle:    streamIdle,
		connect: true, // only for connectInside's route: rule 1's 405
	})
	strictTarget(m)
	webSocket(m)
	m.AccessLog = b.interceptCodecLogs()
	return &listenerv3.Listener{
		Name:              g.name,
		ListenerSpecifier: &listenerv3.Listener_InternalListener{InternalListener: &listenerv3.Listener_InternalListenerConfig{}},
		FilterChains: []*listenerv3.FilterChain{{
			Filters:         []*listenerv3.Filter{b.networkFilter(FilterHCM, m)},
			TransportSocket: b.tlsSocket(downstream),
		}},
	}
}

// connectionTarget is the target an intercepted connection was opened
// for, as a reply's text names it: the same bytes the egress listener's
// set_filter_state wrote (targetFilter), the target as in custodian.json.
const connectionTarget = "%FILTER_STATE(" + TargetFilterState + ":PLAIN)%"

// upstreamCluster reaches the bound target itself over TLS: SNI its name
// (none for an IP), the chain verified against ca/upstream.crt — which never
// holds the jr2 CA — and the name against the certificate's SAN.
func (b *builder) upstreamCluster(t string) *clusterv3.Cluster {
	name, ip, err := pki.SAN(t)
	if err != nil {
		b.fail(err)
	}
	san := &tlsv3.SubjectAltNameMatcher{SanType: tlsv3.SubjectAltNameMatcher_DNS, Matcher: exact(name)}
	sni := name
	if ip {
		san.SanType, sni = tlsv3.SubjectAltNameMatcher_IP_ADDRESS, ""
	}
	upstream := &tlsv3.UpstreamTlsContext{
		Sni: sni,
		CommonTlsContext: &tlsv3.CommonTlsContext{
			AlpnProtocols: http11,
			ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
				TrustedCa:                 filename(b.mounted(UpstreamCAFile)),
				MatchTypedSubjectAltNames: []*tlsv3.SubjectAltNameMatcher{san},
			}},
		},
	}
	return b.dialCluster(UpstreamCluster(t), t, b.tlsSocket(upstream))
}

func filename(p string) *corev3.DataSource {
	return &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: p}}
}

// webSocket lets a WebSocket upgrade reach the engine's filter
// on a listener's every route, instead of Envoy's own 403: the engine
// decides it as any request (and refuses it on the control listener), the
// upgraded bytes pass the filter as body data, the upstream's through the
// frame scrubber. One entry for the listener, not one per route: a pod of
// many targets stays under Kubernetes' object limit.
func webSocket(m *hcmv3.HttpConnectionManager) {
	m.UpgradeConfigs = append(m.UpgradeConfigs, &hcmv3.HttpConnectionManager_UpgradeConfig{UpgradeType: "websocket"})
}
