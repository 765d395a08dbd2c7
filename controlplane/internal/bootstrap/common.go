package bootstrap

import (
	"fmt"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	rbacconfigv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"jr2.dev/boundary/filter/pluginconf"
)

// builder carries the input and the first error; every method returns
// something usable so a build reads top-down, and Build reports b.err.
type builder struct {
	in           Input
	pluginConfig string   // the engine filter's config: custodian.json's path (pluginconf.FilterConfig)
	targets      []string // bound targets, table order
	err          error
	// upstreams and left, in a lean build (upstreams.go): the template
	// of the upstream clusters and the clusters written from it.
	upstreams upstreamTemplate
	left      *leftOut
}

func (b *builder) fail(err error) {
	if b.err == nil {
		b.err = err
	}
}

// validated is every go-control-plane message: it checks its own fields
// (not inside its Any fields, which is why each is packed by pack).
type validated interface {
	proto.Message
	ValidateAll() error
}

// pack checks m and packs it into an Any with deterministic marshalling.
func (b *builder) pack(m validated) *anypb.Any {
	if err := m.ValidateAll(); err != nil {
		b.fail(fmt.Errorf("bootstrap: %s: %w", m.ProtoReflect().Descriptor().FullName(), err))
		return nil
	}
	return b.packRaw(m)
}

// packRaw packs a message that has no validation rules of its own (a
// wrapper); the caller checks what the wrapper carries.
func (b *builder) packRaw(m proto.Message) *anypb.Any {
	a := &anypb.Any{}
	if err := anypb.MarshalFrom(a, m, proto.MarshalOptions{Deterministic: true}); err != nil {
		b.fail(fmt.Errorf("bootstrap: %s: %w", m.ProtoReflect().Descriptor().FullName(), err))
		return nil
	}
	return a
}

// hcmSettings are the parts of a connection manager that differ by
// listener.
type hcmSettings struct {
	statPrefix string
	routes     *routev3.RouteConfiguration
	filters    []*hcmv3.HttpFilter
	replies    *hcmv3.LocalReplyConfig
	idle       time.Duration
	connect    bool // accept CONNECT (the egress listener)
}

// hcm is a connection manager that adds nothing to a request or a response
// (no request id, no x-forwarded-for, the server header passed through),
// leaves the path exactly as sent for the engine to judge and normalise,
// and speaks HTTP/1 only — 1.0 as well as 1.1, as the Go host does: Python's
// http.client sends its CONNECT as HTTP/1.0, which Envoy otherwise closes
// without an answer.
func (b *builder) hcm(s hcmSettings) *hcmv3.HttpConnectionManager {
	m := &hcmv3.HttpConnectionManager{
		CodecType:                 hcmv3.HttpConnectionManager_HTTP1,
		StatPrefix:                s.statPrefix,
		RouteSpecifier:            &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: s.routes},
		HttpFilters:               s.filters,
		LocalReplyConfig:          s.replies,
		StreamIdleTimeout:         durationpb.New(s.idle),
		CommonHttpProtocolOptions: &corev3.HttpProtocolOptions{IdleTimeout: durationpb.New(s.idle)},
		// Custom methods reach the engine, which answers them as the Go
		// host does (rule 1's 405, the egress listener's 405, the control
		// listener's 404); Envoy's parser would answer 400 itself.
		HttpProtocolOptions:          &corev3.Http1ProtocolOptions{AcceptHttp_10: true, AllowCustomMethods: true},
		GenerateRequestId:            wrapperspb.Bool(false),
		UseRemoteAddress:             wrapperspb.Bool(false),
		SkipXffAppend:                true,
		ServerHeaderTransformation:   hcmv3.HttpConnectionManager_PASS_THROUGH,
		NormalizePath:                wrapperspb.Bool(false),
		MergeSlashes:                 false,
		PathWithEscapedSlashesAction: hcmv3.HttpConnectionManager_KEEP_UNCHANGED,
	}
	if s.statPrefix != ListenerHealth {
		agentLimits(m)
	}
	if s.connect {
		m.UpgradeConfigs = []*hcmv3.HttpConnectionManager_UpgradeConfig{{UpgradeType: "CONNECT"}}
		m.StripTrailingHostDot = true
	}
	return m
}

// networkFilter wraps a connection manager (or another network filter).
func (b *builder) networkFilter(name string, m validated) *listenerv3.Filter {
	return &listenerv3.Filter{Name: name, ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: b.pack(m)}}
}

func (b *builder) httpFilter(name string, m validated) *hcmv3.HttpFilter {
	return &hcmv3.HttpFilter{Name: name, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: b.pack(m)}}
}

// markFilter allows only a request the engine's filter marked: the
// fail-closed half of the plugin contract. The mark is matched in the
// stream's dynamic metadata through sourced_metadata; Envoy 1.39.3 logs
// Principal.metadata, which matched the same, as deprecated.
//
// A plugin that fails to load, or a plugin_name no plugin registered, lets
// a request through the golang filter untouched: Envoy's golang filter
// passes on a request it has no plugin to run instead of refusing it. So
// every listener that runs the engine's filter, whichever data plane,
// runs this filter after it, and it allows only requests carrying the
// filter's mark (pluginconf.MarkKey, a bool, in dynamic metadata
// namespace pluginconf.MetadataNamespace), which a client cannot set.
func (b *builder) markFilter() *hcmv3.HttpFilter {
	return b.httpFilter(FilterMark, &rbacv3.RBAC{Rules: &rbacconfigv3.RBAC{
		Action: rbacconfigv3.RBAC_ALLOW,
		Policies: map[string]*rbacconfigv3.Policy{
			pluginconf.MarkKey: {
				Permissions: []*rbacconfigv3.Permission{{Rule: &rbacconfigv3.Permission_Any{Any: true}}},
				Principals: []*rbacconfigv3.Principal{{Identifier: &rbacconfigv3.Principal_SourcedMetadata{SourcedMetadata: &rbacconfigv3.SourcedMetadata{
					MetadataSource: rbacconfigv3.MetadataSource_DYNAMIC,
					MetadataMatcher: &matcherv3.MetadataMatcher{
						Filter: pluginconf.MetadataNamespace,
						Path:   []*matcherv3.MetadataMatcher_PathSegment{{Segment: &matcherv3.MetadataMatcher_PathSegment_Key{Key: pluginconf.MarkKey}}},
						Value:  &matcherv3.ValueMatcher{MatchPattern: &matcherv3.ValueMatcher_BoolMatch{BoolMatch: true}},
					},
				}}}},
			},
		},
	}})
}

// routerFilter adds no x-envoy-* header to a request or a response.
func (b *builder) routerFilter() *hcmv3.HttpFilter {
	return b.httpFilter(FilterRouter, &routerv3.Router{SuppressEnvoyHeaders: true})
}

// perRoute is the engine filter's per-route config for a route of role
// (and target, for an intercept route), checked by the parser the filter
// itself uses.
func (b *builder) perRoute(role pluginconf.Role, target string) map[string]*anypb.Any {
	js := pluginconf.RouteConfig{Role: role, Target: target}.Marshal()
	if _, err := pluginconf.ParseRoute(js); err != nil {
		b.fail(fmt.Errorf("bootstrap: per-route config: %w", err))
	}
	return b.enginePerRoute(js)
}

// directRoute answers from Envoy itself.
func directRoute(name string, match *routev3.RouteMatch, status uint32, body string) *routev3.Route {
	return &routev3.Route{
		Name:  name,
		Match: match,
		Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{
			Status: status,
			Body:   inline(body),
		}},
	}
}

func prefix(p string) *routev3.RouteMatch {
	return &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: p}}
}

// method matches the request method exactly.
func method(m string) *routev3.HeaderMatcher {
	return &routev3.HeaderMatcher{Name: ":method", HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{
		StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: m}},
	}}
}

// tlsSocket wraps a TLS context as a transport socket.
func (b *builder) tlsSocket(m validated) *corev3.TransportSocket {
	return &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: b.pack(m)}}
}

// http11 is the only ALPN the Custodian offers or asks for.
var http11 = []string{"http/1.1"}

// exact is an exact string matcher.
func exact(s string) *matcherv3.StringMatcher {
	return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: s}}
}
