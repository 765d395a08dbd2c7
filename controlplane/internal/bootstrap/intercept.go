package bootstrap

import (
	"path/filepath"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	gzipv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/compression/gzip/decompressor/v3"
	decompv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/decompressor/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"jr2.dev/boundary/controlplane/internal/pki"
	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/filter/pluginconf"
)

// LeafFiles are where a bound target's leaf and key are, relative to the
// rendered directory (filter.LeafBase, the path custodian serve reads too).
func LeafFiles(target string) (cert, key string) {
	base := filepath.ToSlash(filter.LeafBase(target))
	return base + ".crt", base + ".key"
}

// interceptListener ends the agent's TLS for one bound target with its
// leaf, lets the engine decide each request, and sends it to the target.
func (b *builder) interceptListener(t string) *listenerv3.Listener {
	cert, key := LeafFiles(t)
	downstream := &tlsv3.DownstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{
		TlsCertificates: []*tlsv3.TlsCertificate{{
			CertificateChain: filename(b.mounted(cert)),
			PrivateKey:       filename(b.mounted(key)),
		}},
		AlpnProtocols: http11,
	}}
	route := &routev3.Route{
		Name:  InterceptListener(t),
		Match: prefix("/"),
		Action: &routev3.Route_Route{Route: &routev3.RouteAction{
			ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: UpstreamCluster(t)},
			Timeout:          durationpb.New(0),
		}},
		TypedPerFilterConfig: b.perRoute(pluginconf.RoleIntercept, t),
	}
	m := b.hcm(hcmSettings{
		statPrefix: "intercept",
		routes: &routev3.RouteConfiguration{Name: InterceptListener(t), VirtualHosts: []*routev3.VirtualHost{{
			Name:                   InterceptListener(t),
			Domains:                []string{"*"},
			Routes:                 []*routev3.Route{route},
			RequestHeadersToRemove: []string{"x-forwarded-proto"},
		}}},
		filters: []*hcmv3.HttpFilter{
			b.engineFilter(),
			b.markFilter(),
			// After the golang filter in the list, so it runs before it on
			// the response: the engine scrubs decoded bytes.
			b.httpFilter(FilterDecompressor, &decompv3.Decompressor{
				DecompressorLibrary: &corev3.TypedExtensionConfig{Name: "gzip", TypedConfig: b.pack(&gzipv3.Gzip{})},
				RequestDirectionConfig: &decompv3.Decompressor_RequestDirectionConfig{
					CommonConfig:            &decompv3.Decompressor_CommonDirectionConfig{Enabled: flag("jr2.decompressor.request", false)},
					AdvertiseAcceptEncoding: wrapperspb.Bool(false),
				},
				ResponseDirectionConfig: &decompv3.Decompressor_ResponseDirectionConfig{
					CommonConfig: &decompv3.Decompressor_CommonDirectionConfig{Enabled: flag("jr2.decompressor.response", true)},
				},
			}),
			b.routerFilter(),
		},
		replies: b.interceptReplies(t),
		idle:    streamIdle,
	})
	return &listenerv3.Listener{
		Name:              InterceptListener(t),
		ListenerSpecifier: &listenerv3.Listener_InternalListener{InternalListener: &listenerv3.Listener_InternalListenerConfig{}},
		FilterChains: []*listenerv3.FilterChain{{
			Filters:         []*listenerv3.Filter{b.networkFilter(FilterHCM, m)},
			TransportSocket: b.tlsSocket(downstream),
		}},
	}
}

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

// flag is a runtime feature flag with its default.
func flag(key string, on bool) *corev3.RuntimeFeatureFlag {
	return &corev3.RuntimeFeatureFlag{DefaultValue: wrapperspb.Bool(on), RuntimeKey: key}
}
