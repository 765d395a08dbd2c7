package bootstrap_test

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	rbacconfigv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	celv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/filters/cel/v3"
	streamv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"
	dfpclusterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/clusters/dynamic_forward_proxy/v3"
	setfscommonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/common/set_filter_state/v3"
	dfpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/dynamic_forward_proxy/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	setfsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/set_filter_state/v3"
	connlimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/connection_limit/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	upstreamipv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/rbac/matchers/upstream_ip_port/v3"
	internalupv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/internal_upstream/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"

	"jr2.dev/boundary/controlplane/internal/bootstrap"
	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/filter/dialguard"
	"jr2.dev/boundary/filter/pluginconf"
	"jr2.dev/boundary/internal/contract"
)

const mount = "/etc/jr2/custodian"

// config is the spec's example pod plus an IPv4 and an IPv6 target.
func config(sandbox string) *filter.Config {
	return &filter.Config{
		Pod: "ws-7f3a", Sandbox: sandbox, Orchestrator: "jr2-orchestrator.jr2.svc:4000", ValuesDir: "/etc/jr2/custodian/values",
		Listeners: filter.Listeners{Control: filter.DefaultControl, Egress: filter.DefaultEgress, Health: filter.DefaultHealth},
		Secrets: []filter.SecretConfig{
			{Name: "ANTHROPIC_API_KEY", StandIn: contract.StandIn("ANTHROPIC_API_KEY"), Targets: []string{"api.anthropic.com:443"}, Headers: []string{"x-api-key"}, Paths: []string{"/v1/"}},
			{Name: "GITHUB_TOKEN", StandIn: contract.StandIn("GITHUB_TOKEN"), Targets: []string{"api.github.com:443", "github.com:443"}, Headers: contract.DefaultHeaders},
			{Name: "GW_KEY", StandIn: contract.StandIn("GW_KEY"), Targets: []string{"10.0.0.7:8443", "[fd00::10]:443", "api.github.com:443"}, Headers: []string{"x-gw-key"}},
			{Name: contract.TokenName, StandIn: contract.StandIn(contract.TokenName), Targets: []string{}, Headers: []string{"authorization"}},
		},
	}
}

var targets = []string{"api.anthropic.com:443", "api.github.com:443", "github.com:443", "10.0.0.7:8443", "[fd00::10]:443"}

// The engine's shared objects: one per data plane.
const (
	pluginPath = "/opt/jr2/lib/custodian.so"
	modulePath = "/opt/jr2/lib/custodian-module.so"
	// adminPath is a rendered directory's own admin socket.
	adminPath = "/tmp/jr2-custodian-admin-0123456789ab.sock"
)

var planes = []bootstrap.DataPlane{bootstrap.DataPlaneGolang, bootstrap.DataPlaneModule}

// build is the default data plane's bootstrap, the module's.
func build(t *testing.T, c *filter.Config) *bootstrapv3.Bootstrap {
	t.Helper()
	return buildPlane(t, c, bootstrap.DataPlaneModule)
}

func buildPlane(t *testing.T, c *filter.Config, dp bootstrap.DataPlane) *bootstrapv3.Bootstrap {
	t.Helper()
	js, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	bs, err := bootstrap.Build(bootstrap.Input{Config: c, ConfigJSON: js, DataPlane: dp, Plugin: pluginPath, Module: modulePath, MountDir: mount, AdminSocket: adminPath})
	if err != nil {
		t.Fatal(err)
	}
	return bs
}

// TestRoundTrip: the rendered JSON reads back (protojson, every Any
// resolved) into the same message, which validates.
func TestRoundTrip(t *testing.T) {
	for _, dp := range planes {
		t.Run(string(dp), func(t *testing.T) { testRoundTrip(t, dp) })
	}
}

func testRoundTrip(t *testing.T, dp bootstrap.DataPlane) {
	bs := buildPlane(t, config("ws-7f3a"), dp)
	js, err := bootstrap.Marshal(bs)
	if err != nil {
		t.Fatal(err)
	}
	var back bootstrapv3.Bootstrap
	if err := (protojson.UnmarshalOptions{}).Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	if err := back.ValidateAll(); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(bs, &back) {
		t.Error("envoy.json does not read back as the bootstrap it was rendered from")
	}
	again, _ := bootstrap.Marshal(buildPlane(t, config("ws-7f3a"), dp))
	if !bytes.Equal(js, again) {
		t.Error("two builds of one input render different bytes")
	}
	var c bytes.Buffer
	if err := json.Compact(&c, js); err != nil || !bytes.Equal(append(c.Bytes(), '\n'), js) {
		t.Error("envoy.json is not compact JSON with a trailing newline")
	}
}

// TestMarshalIsOneMarshal: Marshal's listeners and clusters, marshalled
// each on its own and joined, are byte for byte one protojson.Marshal of
// the whole bootstrap, compacted by encoding/json — for both data planes,
// with none, one and many targets, and strings that need escaping; and
// Marshal leaves the bootstrap as it found it.
func TestMarshalIsOneMarshal(t *testing.T) {
	many := config("ws-7f3a")
	for i := range 60 {
		many.Secrets = append(many.Secrets[:len(many.Secrets)-1], filter.SecretConfig{
			Name: "K" + strconv.Itoa(i), StandIn: contract.StandIn("K" + strconv.Itoa(i)),
			Targets: []string{"svc-" + strconv.Itoa(i) + ".example.com:8443"}, Headers: []string{"x-k"},
		}, many.Secrets[len(many.Secrets)-1])
	}
	none := config("ws-7f3a")
	none.Secrets = none.Secrets[len(none.Secrets)-1:]
	for name, c := range map[string]*filter.Config{"none": none, "spec": config("ws-7f3a"), "many": many, "quoted": config("ws-7f3a")} {
		for _, dp := range planes {
			bs := buildPlane(t, c, dp)
			if name == "quoted" {
				// The mount directory is the one free text in the
				// bootstrap: quotes, a backslash and the splice's own key.
				js, _ := json.Marshal(c)
				var err error
				bs, err = bootstrap.Build(bootstrap.Input{Config: c, ConfigJSON: js, DataPlane: dp, Plugin: pluginPath, Module: modulePath, MountDir: `/etc/"static_resources":{} \x`, AdminSocket: adminPath})
				if err != nil {
					t.Fatal(err)
				}
			}
			before := proto.Clone(bs)
			got, err := bootstrap.Marshal(bs)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(bs)
			if err != nil {
				t.Fatal(err)
			}
			var want bytes.Buffer
			if err := json.Compact(&want, raw); err != nil {
				t.Fatal(err)
			}
			want.WriteByte('\n')
			if !bytes.Equal(got, want.Bytes()) {
				t.Errorf("%s/%s: Marshal differs from one protojson.Marshal, compacted", name, dp)
			}
			if !proto.Equal(bs, before) {
				t.Errorf("%s/%s: Marshal changed the bootstrap", name, dp)
			}
		}
	}
}

// TestEveryPackedConfigValidates: ValidateAll does not look inside an Any,
// so each packed config is unpacked and validated on its own, recursively;
// the plugin configs parse with the parsers the filter uses.
func TestEveryPackedConfigValidates(t *testing.T) {
	for _, dp := range planes {
		t.Run(string(dp), func(t *testing.T) { testEveryPackedConfigValidates(t, dp) })
	}
}

func testEveryPackedConfigValidates(t *testing.T, dp bootstrap.DataPlane) {
	seen := map[string]int{}
	var walk func(m protoreflect.Message)
	walk = func(m protoreflect.Message) {
		if a, ok := m.Interface().(*anypb.Any); ok {
			inner, err := a.UnmarshalNew()
			if err != nil {
				t.Fatalf("Any %s: %v", a.TypeUrl, err)
			}
			seen[string(inner.ProtoReflect().Descriptor().FullName())]++
			if v, ok := inner.(interface{ ValidateAll() error }); ok {
				if err := v.ValidateAll(); err != nil {
					t.Errorf("%s: %v", a.TypeUrl, err)
				}
			}
			walk(inner.ProtoReflect())
			return
		}
		m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			switch {
			case fd.IsList() && fd.Message() != nil:
				for i := 0; i < v.List().Len(); i++ {
					walk(v.List().Get(i).Message())
				}
			case fd.IsMap() && fd.MapValue().Message() != nil:
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool { walk(mv.Message()); return true })
			case fd.Message() != nil && !fd.IsList() && !fd.IsMap():
				walk(v.Message())
			}
			return true
		})
	}
	bs := buildPlane(t, config("ws-7f3a"), dp)
	walk(bs.ProtoReflect())
	engine := map[bootstrap.DataPlane][]string{
		bootstrap.DataPlaneGolang: {"envoy.extensions.filters.http.golang.v3alpha.Config", "envoy.extensions.filters.http.golang.v3alpha.ConfigsPerRoute"},
		bootstrap.DataPlaneModule: {"envoy.extensions.filters.http.dynamic_modules.v3.DynamicModuleFilter", "envoy.extensions.filters.http.dynamic_modules.v3.DynamicModuleFilterPerRoute"},
	}
	for other, types := range engine {
		for _, typ := range types {
			if other != dp && seen[typ] != 0 {
				t.Errorf("%d packed %s in a %s bootstrap", seen[typ], typ, dp)
			}
		}
	}
	for _, typ := range append(engine[dp],
		"envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
		"envoy.extensions.filters.http.rbac.v3.RBAC",
		"envoy.extensions.filters.http.dynamic_forward_proxy.v3.FilterConfig",
		"envoy.extensions.clusters.dynamic_forward_proxy.v3.ClusterConfig",
		"envoy.extensions.filters.http.router.v3.Router",
		"envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext",
		"envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
		"envoy.extensions.filters.network.connection_limit.v3.ConnectionLimit",
		"envoy.extensions.rbac.matchers.upstream_ip_port.v3.UpstreamIpPortMatcher",
		"envoy.extensions.access_loggers.stream.v3.StdoutAccessLog",
		"envoy.extensions.access_loggers.filters.cel.v3.ExpressionFilter",
		"envoy.extensions.bootstrap.internal_listener.v3.InternalListener",
		"google.protobuf.StringValue",
	) {
		if seen[typ] == 0 {
			t.Errorf("no packed %s found", typ)
		}
	}
	// Plugin configs: custodian.json's path under the mount (filter
	// level), the same bytes on every listener, and RouteConfig (per route).
	want := `{"engineConfig":"` + mount + `/custodian.json"}`
	for _, l := range bs.StaticResources.Listeners {
		for _, f := range httpFilters(t, l) {
			if f.Name != dp.FilterName() {
				continue
			}
			got := engineConfig(t, l.Name, f)
			if _, err := pluginconf.ParseFilter([]byte(got)); err != nil || got != want {
				t.Errorf("%s: plugin config %s (%v), want %s", l.Name, got, err, want)
			}
		}
	}
}

func unpack[T proto.Message](t *testing.T, a *anypb.Any) T {
	t.Helper()
	m, err := a.UnmarshalNew()
	if err != nil {
		t.Fatal(err)
	}
	v, ok := m.(T)
	if !ok {
		t.Fatalf("%s is %T", a.TypeUrl, m)
	}
	return v
}

func listener(t *testing.T, bs *bootstrapv3.Bootstrap, name string) *listenerv3.Listener {
	t.Helper()
	return named(t, bs.StaticResources.Listeners, name)
}

func cluster(t *testing.T, bs *bootstrapv3.Bootstrap, name string) *clusterv3.Cluster {
	t.Helper()
	return named(t, bs.StaticResources.Clusters, name)
}

// named finds the listener or cluster called name.
func named[T interface{ GetName() string }](t *testing.T, all []T, name string) T {
	t.Helper()
	for _, x := range all {
		if x.GetName() == name {
			return x
		}
	}
	t.Fatalf("nothing named %s", name)
	var zero T
	return zero
}

func hcm(t *testing.T, l *listenerv3.Listener) *hcmv3.HttpConnectionManager {
	t.Helper()
	fs := l.FilterChains[0].Filters
	last := fs[len(fs)-1]
	if last.Name != bootstrap.FilterHCM {
		t.Fatalf("%s: last network filter %s", l.Name, last.Name)
	}
	return unpack[*hcmv3.HttpConnectionManager](t, last.GetTypedConfig())
}

func httpFilters(t *testing.T, l *listenerv3.Listener) []*hcmv3.HttpFilter {
	return hcm(t, l).HttpFilters
}

func filterNames(t *testing.T, l *listenerv3.Listener) []string {
	var n []string
	for _, f := range httpFilters(t, l) {
		n = append(n, f.Name)
	}
	return n
}

// TestNoAdminNoXDS: no xDS, and no admin listener on the network: the one
// admin interface is a unix socket (TestAdminOnlyOnAUnixSocket).
func TestNoAdminNoXDS(t *testing.T) {
	bs := build(t, config("ws-7f3a"))
	if bs.Admin.GetAddress().GetSocketAddress() != nil || bs.Admin.GetAddress().GetPipe() == nil || bs.DynamicResources != nil || bs.HdsConfig != nil || len(bs.ConfigSources) != 0 || bs.DefaultConfigSource != nil {
		t.Errorf("admin %v, dynamic %v, hds %v, config sources %v", bs.Admin, bs.DynamicResources, bs.HdsConfig, bs.ConfigSources)
	}
	if bs.Node.GetId() != "ws-7f3a" {
		t.Errorf("node id %q", bs.Node.GetId())
	}
	if len(bs.BootstrapExtensions) != 1 || bs.BootstrapExtensions[0].Name != bootstrap.ExtInternalListener {
		t.Errorf("bootstrap extensions %v", bs.BootstrapExtensions)
	}
	for _, l := range bs.StaticResources.Listeners {
		for _, fc := range l.FilterChains {
			for _, f := range fc.Filters {
				if f.GetConfigDiscovery() != nil {
					t.Errorf("%s: filter %s is discovered", l.Name, f.Name)
				}
			}
		}
		if len(l.FilterChains) != 1 {
			t.Errorf("%s: %d filter chains", l.Name, len(l.FilterChains))
		}
		if m := hcm(t, l); m.GetRds() != nil {
			t.Errorf("%s: routes by RDS", l.Name)
		}
	}
}

// TestNoReusePort: every listener on a socket binds it alone
// (enable_reuse_port false), so a second Envoy on the pod's addresses fails
// to bind instead of sharing them; an internal listener has no socket.
func TestNoReusePort(t *testing.T) {
	bs := build(t, config("ws-7f3a"))
	sockets := 0
	for _, l := range bs.StaticResources.Listeners {
		if l.GetAddress().GetSocketAddress() == nil {
			continue
		}
		sockets++
		if l.EnableReusePort == nil || l.EnableReusePort.Value {
			t.Errorf("%s: enable_reuse_port %v, want false", l.Name, l.EnableReusePort)
		}
	}
	if sockets != 3 {
		t.Errorf("%d listeners on sockets, want control, egress and health", sockets)
	}
}

// TestFilterOrder: the engine's filter, then the mark, then (per listener)
// the rest, then the router — on every listener that runs the filter.
func TestFilterOrder(t *testing.T) {
	for _, dp := range planes {
		t.Run(string(dp), func(t *testing.T) { testFilterOrder(t, dp) })
	}
}

func testFilterOrder(t *testing.T, dp bootstrap.DataPlane) {
	bs := buildPlane(t, config("ws-7f3a"), dp)
	engine := dp.FilterName()
	want := map[string][]string{
		bootstrap.ListenerControl: {engine, bootstrap.FilterMark, bootstrap.FilterRouter},
		bootstrap.ListenerEgress:  {engine, bootstrap.FilterMark, bootstrap.FilterTarget, bootstrap.FilterDFP, bootstrap.FilterGuard, bootstrap.FilterRouter},
		bootstrap.ListenerHealth:  {bootstrap.FilterRouter},
	}
	for _, tg := range targets {
		want[bootstrap.InterceptListener(tg)] = []string{engine, bootstrap.FilterMark, bootstrap.FilterRouter}
	}
	if got := len(bs.StaticResources.Listeners); got != len(want) {
		t.Errorf("%d listeners; want %d", got, len(want))
	}
	for name, filters := range want {
		if got := filterNames(t, listener(t, bs, name)); !slices.Equal(got, filters) {
			t.Errorf("%s: filters %v; want %v", name, got, filters)
		}
	}
	for _, l := range bs.StaticResources.Listeners {
		for _, f := range httpFilters(t, l) {
			switch f.Name {
			case bootstrap.FilterMark:
				checkMark(t, l.Name, unpack[*rbacv3.RBAC](t, f.GetTypedConfig()))
			case bootstrap.FilterRouter:
				if r := unpack[*routerv3.Router](t, f.GetTypedConfig()); !r.SuppressEnvoyHeaders {
					t.Errorf("%s: router adds x-envoy-* headers", l.Name)
				}
			}
		}
		m := hcm(t, l)
		if m.GetGenerateRequestId().GetValue() || m.ServerHeaderTransformation != hcmv3.HttpConnectionManager_PASS_THROUGH || !m.SkipXffAppend || m.GetUseRemoteAddress().GetValue() {
			t.Errorf("%s: the connection manager adds headers: request id %v, server %v, skip xff %v", l.Name, m.GenerateRequestId, m.ServerHeaderTransformation, m.SkipXffAppend)
		}
		if m.GetNormalizePath().GetValue() || m.MergeSlashes || m.PathWithEscapedSlashesAction != hcmv3.HttpConnectionManager_KEEP_UNCHANGED {
			t.Errorf("%s: the connection manager rewrites the path before the engine sees it", l.Name)
		}
	}
}

// checkMark: ALLOW only a request whose dynamic metadata carries the mark.
func checkMark(t *testing.T, where string, r *rbacv3.RBAC) {
	t.Helper()
	rules := r.GetRules()
	if rules.GetAction() != rbacconfigv3.RBAC_ALLOW || len(rules.GetPolicies()) != 1 {
		t.Fatalf("%s: mark RBAC %v", where, rules)
	}
	p := rules.GetPolicies()[pluginconf.MarkKey]
	if p == nil || len(p.Principals) != 1 || len(p.Permissions) != 1 || !p.Permissions[0].GetAny() {
		t.Fatalf("%s: mark policy %v", where, p)
	}
	sm := p.Principals[0].GetSourcedMetadata()
	if sm.GetMetadataSource() != rbacconfigv3.MetadataSource_DYNAMIC {
		t.Errorf("%s: mark matched in %v metadata; want the stream's dynamic metadata", where, sm.GetMetadataSource())
	}
	md := sm.GetMetadataMatcher()
	if md.GetFilter() != pluginconf.MetadataNamespace || len(md.GetPath()) != 1 || md.GetPath()[0].GetKey() != pluginconf.MarkKey || !md.GetValue().GetBoolMatch() {
		t.Errorf("%s: mark principal %v; want %s.%s == true", where, md, pluginconf.MetadataNamespace, pluginconf.MarkKey)
	}
}

// TestInterceptListeners: the bound targets named by DNS names share one
// internal listener, each IP target has one of its own; a listener ends
// TLS with its targets' leaves (one per name, ALPN http/1.1) and routes by
// the connection's target alone — the filter state the egress listener
// set, never the SNI or the Host — to the target's upstream cluster with
// no timeout, telling the filter that target; the upstream cluster
// verifies the target's name against ca/upstream.crt.
func TestInterceptListeners(t *testing.T) {
	bs := build(t, config("ws-7f3a"))
	for _, tg := range targets {
		l := listener(t, bs, bootstrap.InterceptListener(tg))
		host := strings.Trim(tg[:strings.LastIndex(tg, ":")], "[]")
		_, err := netip.ParseAddr(host)
		isIP := err == nil
		if wantName := map[bool]string{false: bootstrap.ListenerIntercept, true: "intercept|" + tg}[isIP]; l.Name != wantName {
			t.Errorf("%s: served by %s; want %s", tg, l.Name, wantName)
		}
		if l.GetInternalListener() == nil || l.Address != nil {
			t.Errorf("%s: not an internal listener", l.Name)
		}
		ts := l.FilterChains[0].TransportSocket
		dtls := unpack[*tlsv3.DownstreamTlsContext](t, ts.GetTypedConfig())
		cert, key := bootstrap.LeafFiles(tg)
		certs := dtls.CommonTlsContext.TlsCertificates
		if !slices.ContainsFunc(certs, func(c *tlsv3.TlsCertificate) bool {
			return c.CertificateChain.GetFilename() == mount+"/"+cert && c.PrivateKey.GetFilename() == mount+"/"+key
		}) || (isIP && len(certs) != 1) {
			t.Errorf("%s: leaves %v", tg, certs)
		}
		if !strings.HasPrefix(cert, "tls/") {
			t.Errorf("%s: leaf at %s; want under tls/", tg, cert)
		}
		if !slices.Equal(dtls.CommonTlsContext.AlpnProtocols, []string{"http/1.1"}) {
			t.Errorf("%s: ALPN %v", tg, dtls.CommonTlsContext.AlpnProtocols)
		}
		m := hcm(t, l)
		vh := m.GetRouteConfig().VirtualHosts
		if len(vh) != 1 || !slices.Equal(vh[0].Domains, []string{"*"}) {
			t.Fatalf("%s: virtual hosts %v", tg, vh)
		}
		var r, connect *routev3.Route
		for _, each := range vh[0].Routes {
			fs := each.Match.GetFilterState()
			if each.Name == bootstrap.RouteConnectInside {
				connect = each
				continue
			}
			if len(fs) != 1 || fs[0].Key != bootstrap.TargetFilterState || fs[0].GetStringMatch().GetExact() == "" || each.Match.GetPrefix() != "/" || len(each.Match.Headers) != 0 {
				t.Errorf("%s: route %s matches %v; want the connection's target alone", l.Name, each.Name, each.Match)
			}
			if fs[0].GetStringMatch().GetExact() == tg {
				r = each
			}
		}
		if r == nil {
			t.Fatalf("%s: no route matches the connection's target", tg)
		}
		if r.Name != "intercept|"+tg || r.GetRoute().GetCluster() != bootstrap.UpstreamCluster(tg) || r.GetRoute().GetTimeout().AsDuration() != 0 || r.GetRoute().GetRetryPolicy() != nil {
			t.Errorf("%s: route %s %v", tg, r.Name, r.GetRoute())
		}
		// The target's route carries no engine config; the virtual host's
		// one has no target, so the engine takes the connection's (the
		// filter state the route matched).
		if len(r.TypedPerFilterConfig) != 0 {
			t.Errorf("%s: route %s carries per-filter configs %v; want the virtual host's", tg, r.Name, keys(r.TypedPerFilterConfig))
		}
		if got := routeRole(t, &routev3.Route{Name: vh[0].Name, TypedPerFilterConfig: vh[0].TypedPerFilterConfig}); got != (pluginconf.RouteConfig{Role: pluginconf.RoleIntercept}) {
			t.Errorf("%s: the virtual host's engine config %+v; want role intercept, no target", tg, got)
		}
		// A CONNECT inside the intercepted TLS, whatever the connection's
		// target: one route, last, for any connection that has one, with
		// no engine config of its own, so the engine decides it with the
		// virtual host's (rule 1's 405, its answer and line); the direct
		// response behind it forwards nothing.
		if connect == nil || connect != vh[0].Routes[len(vh[0].Routes)-1] || connect.Match.GetConnectMatcher() == nil ||
			len(connect.Match.GetFilterState()) != 1 || connect.Match.GetFilterState()[0].Key != bootstrap.TargetFilterState ||
			connect.Match.GetFilterState()[0].GetStringMatch().GetSafeRegex().GetRegex() != ".+" ||
			connect.GetDirectResponse().GetStatus() != 405 ||
			connect.GetDirectResponse().GetBody().GetInlineString() != "jr2 custodian: method CONNECT is not allowed; use GET, HEAD, POST, PUT, PATCH, DELETE or OPTIONS" {
			t.Errorf("%s: CONNECT route %v", tg, connect)
		}
		if len(connect.TypedPerFilterConfig) != 0 {
			t.Errorf("%s: CONNECT route per-filter configs %v; want none (the engine decides it)", tg, keys(connect.TypedPerFilterConfig))
		}
		// What the codec and connection manager refuse before the engine
		// reaches the connection manager (absolute_path_rejected, not a
		// parsed URL that drops its userinfo), and custom methods reach
		// the engine, so both answer as custodian serve does.
		if po := m.HttpProtocolOptions; po.GetAllowAbsoluteUrl() == nil || po.GetAllowAbsoluteUrl().GetValue() || !po.GetAllowCustomMethods() {
			t.Errorf("%s: HTTP/1 options %v", tg, po)
		}
		// CONNECT, for the CONNECT route's filter chain; websocket, so an
		// upgrade reaches the engine instead of Envoy's 403.
		if len(m.UpgradeConfigs) != 2 || m.UpgradeConfigs[0].UpgradeType != "CONNECT" || m.UpgradeConfigs[1].UpgradeType != "websocket" {
			t.Errorf("%s: upgrades %v; want CONNECT and websocket", tg, m.UpgradeConfigs)
		}
		checkCodecLogs(t, tg, m, []line{
			{"jr2.custodian action=refuse target=%FILTER_STATE(" + bootstrap.TargetFilterState + ":PLAIN)% reason=path\n", "response.code_details == 'absolute_path_rejected'", ""},
			{"jr2.custodian action=refuse target=%FILTER_STATE(" + bootstrap.TargetFilterState + ":PLAIN)% reason=path\n", "response.code_details == 'path_normalization_failed'", ""},
			{"jr2.custodian action=refuse target=%FILTER_STATE(" + bootstrap.TargetFilterState + ":PLAIN)% reason=method\n", "response.code_details == 'http1.invalid_url'", ""},
			{"jr2.custodian action=refuse target=%FILTER_STATE(" + bootstrap.TargetFilterState + ":PLAIN)% reason=upgrade\n", "response.code_details == 'upgrade_failed'", ""},
		})
		// An intercept listener answers Envoy's own refusal of a target
		// that is not a path as the engine does (rule 5's 400).
		lr := &hcmv3.LocalReplyConfig{Mappers: m.LocalReplyConfig.GetMappers()}
		if len(lr.Mappers) > 3 {
			checkMappers(t, tg, &hcmv3.LocalReplyConfig{Mappers: lr.Mappers[:4]}, []mapperWant{
				{expr: "response.code_details == 'absolute_path_rejected'", status: 400, text: "jr2 custodian: the request target must be a path that starts with /"},
				{expr: "response.code_details == 'path_normalization_failed'", status: 400, text: "jr2 custodian: " + filter.FragmentText},
				{expr: "response.code_details == 'http1.invalid_url'", status: 405, text: "jr2 custodian: method CONNECT is not allowed; use GET, HEAD, POST, PUT, PATCH, DELETE or OPTIONS"},
				{expr: "response.code_details == 'upgrade_failed'", status: 400, text: "jr2 custodian: " + filter.UpgradeText},
			})
			lr.Mappers = lr.Mappers[4:]
		}
		checkReplies(t, tg, lr, "%FILTER_STATE("+bootstrap.TargetFilterState+":PLAIN)%")

		c := cluster(t, bs, bootstrap.UpstreamCluster(tg))
		utls := unpack[*tlsv3.UpstreamTlsContext](t, c.TransportSocket.GetTypedConfig())
		vc := utls.CommonTlsContext.GetValidationContext()
		if vc.TrustedCa.GetFilename() != mount+"/ca/upstream.crt" || len(vc.MatchTypedSubjectAltNames) != 1 {
			t.Fatalf("%s: validation %v", tg, vc)
		}
		san := vc.MatchTypedSubjectAltNames[0]
		if isIP {
			if san.SanType != tlsv3.SubjectAltNameMatcher_IP_ADDRESS || san.Matcher.GetExact() != host || utls.Sni != "" || c.GetType() != clusterv3.Cluster_STATIC {
				t.Errorf("%s: SAN %v, SNI %q, type %v; want IP SAN, no SNI, static", tg, san, utls.Sni, c.GetType())
			}
		} else if san.SanType != tlsv3.SubjectAltNameMatcher_DNS || san.Matcher.GetExact() != host || utls.Sni != host || c.GetType() != clusterv3.Cluster_LOGICAL_DNS {
			t.Errorf("%s: SAN %v, SNI %q, type %v; want DNS SAN and SNI %s, logical DNS", tg, san, utls.Sni, c.GetType(), host)
		}
		if !slices.Equal(utls.CommonTlsContext.AlpnProtocols, []string{"http/1.1"}) {
			t.Errorf("%s: upstream ALPN %v", tg, utls.CommonTlsContext.AlpnProtocols)
		}

		ic := cluster(t, bs, bootstrap.InterceptListener(tg))
		ep := ic.LoadAssignment.Endpoints[0].LbEndpoints[0].GetEndpoint().Address.GetEnvoyInternalAddress()
		if ep.GetServerListenerName() != l.Name {
			t.Errorf("%s: egress cluster reaches %q; want the internal listener %q", tg, ep.GetServerListenerName(), l.Name)
		}
		// The target crosses into the internal listener's connection as
		// shared filter state only through internal_upstream.
		if ic.TransportSocket.GetName() != "envoy.transport_sockets.internal_upstream" {
			t.Errorf("%s: egress cluster transport %v; want internal_upstream", tg, ic.TransportSocket)
		}
		unpack[*internalupv3.InternalUpstreamTransport](t, ic.TransportSocket.GetTypedConfig())
	}
}

// routeRole reads a route's per-route config for the engine's filter,
// whichever data plane rendered it.
func routeRole(t *testing.T, r *routev3.Route) pluginconf.RouteConfig {
	t.Helper()
	rc, err := pluginconf.ParseRoute([]byte(routeConfig(t, r)))
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

// checkReplies: the mark's refusal named, then two mappers in order,
// ADR-0059's flags and texts, 502.
func checkReplies(t *testing.T, where string, lr *hcmv3.LocalReplyConfig, target string) {
	t.Helper()
	want := []mapperWant{
		{expr: "response.code_details == 'rbac_access_denied_matched_policy[none]'", text: "jr2 custodian: refused: the Custodian's filter did not decide this request (is its plugin loaded?)"},
		{flags: []string{"UF", "UH", "DF"}, status: 502, text: "jr2 custodian: " + target + " could not be reached: %RESPONSE_CODE_DETAILS%"},
		{flags: []string{"UC", "DPE", "UPE", "UR", "LR", "UMSDR", "URX"}, status: 502, text: "jr2 custodian: " + target + " did not answer; the request may have reached it: %RESPONSE_CODE_DETAILS%"},
	}
	checkMappers(t, where, lr, want)
}

type mapperWant struct {
	flags  []string
	expr   string
	status uint32
	text   string
}

func checkMappers(t *testing.T, where string, lr *hcmv3.LocalReplyConfig, want []mapperWant) {
	t.Helper()
	if len(lr.GetMappers()) != len(want) {
		t.Fatalf("%s: %d mappers; want %d", where, len(lr.GetMappers()), len(want))
	}
	for i, m := range lr.Mappers {
		got := mapperWant{flags: m.Filter.GetResponseFlagFilter().GetFlags(), status: m.StatusCode.GetValue(), text: m.BodyFormatOverride.GetTextFormatSource().GetInlineString()}
		if ext := m.Filter.GetExtensionFilter(); ext != nil {
			got.expr = unpack[*celv3.ExpressionFilter](t, ext.GetTypedConfig()).Expression
		}
		if !slices.Equal(got.flags, want[i].flags) || got.expr != want[i].expr || got.status != want[i].status || got.text != want[i].text {
			t.Errorf("%s: mapper %d\n got: %+v\nwant: %+v", where, i, got, want[i])
		}
	}
}

// TestEgress: CONNECT only; each bound target to its internal listener,
// everything else to the tunnel (dynamic forward proxy) behind the dial
// guard, whose ranges are dialguard.Ranges, one per permission, in order.
func TestEgress(t *testing.T) {
	bs := build(t, config("ws-7f3a"))
	l := listener(t, bs, bootstrap.ListenerEgress)
	if a := l.Address.GetSocketAddress(); a.GetAddress() != "127.0.0.1" || a.GetPortValue() != 15001 {
		t.Errorf("egress at %v", a)
	}
	m := hcm(t, l)
	if len(m.UpgradeConfigs) != 1 || m.UpgradeConfigs[0].UpgradeType != "CONNECT" || !m.StripTrailingHostDot {
		t.Errorf("egress: upgrades %v, strip trailing dot %v", m.UpgradeConfigs, m.StripTrailingHostDot)
	}
	vhs := m.GetRouteConfig().VirtualHosts
	// The DNS-named targets in one virtual host to the shared intercept
	// listener, each IP target in its own, then the tunnel.
	groups := [][]string{{"api.anthropic.com:443", "api.github.com:443", "github.com:443"}, {"10.0.0.7:8443"}, {"[fd00::10]:443"}}
	if len(vhs) != len(groups)+1 {
		t.Fatalf("%d virtual hosts; want %d", len(vhs), len(groups)+1)
	}
	for i, g := range groups {
		checkConnect(t, vhs[i], g, bootstrap.InterceptListener(g[0]))
	}
	checkConnect(t, vhs[len(groups)], []string{"*"}, bootstrap.ClusterTunnel)
	if vhs[len(groups)].Routes[0].Name != bootstrap.RouteTunnel {
		t.Errorf("tunnel route named %q", vhs[len(groups)].Routes[0].Name)
	}

	var dfp *dfpv3.FilterConfig
	var guard *rbacv3.RBAC
	for _, f := range m.HttpFilters {
		switch f.Name {
		case bootstrap.FilterDFP:
			dfp = unpack[*dfpv3.FilterConfig](t, f.GetTypedConfig())
		case bootstrap.FilterGuard:
			guard = unpack[*rbacv3.RBAC](t, f.GetTypedConfig())
		case bootstrap.FilterTarget:
			checkTargetFilter(t, unpack[*setfsv3.Config](t, f.GetTypedConfig()))
		}
	}
	if !dfp.SaveUpstreamAddress {
		t.Error("the dynamic forward proxy does not save the address it resolved")
	}
	dc := unpack[*dfpclusterv3.ClusterConfig](t, cluster(t, bs, bootstrap.ClusterTunnel).GetClusterType().TypedConfig)
	if !proto.Equal(dc.GetDnsCacheConfig(), dfp.GetDnsCacheConfig()) {
		t.Errorf("filter and cluster DNS caches differ: %v / %v", dfp.GetDnsCacheConfig(), dc.GetDnsCacheConfig())
	}
	if guard.Rules.Action != rbacconfigv3.RBAC_DENY || len(guard.Rules.Policies) != 1 {
		t.Fatalf("guard %v", guard.Rules)
	}
	p := guard.Rules.Policies[bootstrap.GuardPolicy]
	if len(p.Principals) != 1 || !p.Principals[0].GetAny() {
		t.Errorf("guard principals %v", p.Principals)
	}
	var got []netip.Prefix
	for _, perm := range p.Permissions {
		mt := perm.GetMatcher()
		if mt.GetName() != "envoy.rbac.matchers.upstream_ip_port" {
			t.Fatalf("guard permission %v", perm)
		}
		ip := unpack[*upstreamipv3.UpstreamIpPortMatcher](t, mt.TypedConfig).UpstreamIp
		pfx, err := netip.ParsePrefix(ip.AddressPrefix + "/" + strconv.Itoa(int(ip.PrefixLen.GetValue())))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, pfx)
	}
	var want []netip.Prefix
	for _, r := range dialguard.Ranges {
		want = append(want, r.Prefix)
	}
	if !slices.Equal(got, want) {
		t.Errorf("guard ranges\n got: %v\nwant: %v", got, want)
	}

	checkMappers(t, "egress", m.LocalReplyConfig, []mapperWant{
		{expr: "response.code_details == 'rbac_access_denied_matched_policy[none]'", text: "jr2 custodian: refused: the Custodian's filter did not decide this request (is its plugin loaded?)"},
		{expr: "response.code_details == 'rbac_access_denied_matched_policy[guard]'", text: "jr2 custodian: %REQ(:AUTHORITY):256% is guarded (it resolves to a guarded address); a tunnel never reaches it"},
		{flags: []string{"UF", "UH", "DF", "UC", "DPE", "UPE", "UR", "LR", "UMSDR", "URX"}, status: 502, text: "jr2 custodian: %REQ(:AUTHORITY):256% could not be reached: %RESPONSE_CODE_DETAILS%"},
	})
	checkEgressLogs(t, m)
}

// checkTargetFilter: the CONNECT's :authority (the engine's canonical
// target) as a hashable string in TargetFilterState, shared once with the
// upstream connection. Hashable is what keys Envoy's upstream pool by the
// target: with envoy.string (not Hashable) a CONNECT to B was given a
// pooled internal connection opened for A, whose target is A's.
func checkTargetFilter(t *testing.T, c *setfsv3.Config) {
	t.Helper()
	v := c.GetOnRequestHeaders()
	if len(v) != 1 || v[0].GetObjectKey() != bootstrap.TargetFilterState || v[0].FactoryKey != "envoy.hashable_string" ||
		v[0].GetFormatString().GetTextFormatSource().GetInlineString() != "%REQ(:AUTHORITY)%" || v[0].SharedWithUpstream != setfscommonv3.FilterStateValue_ONCE {
		t.Errorf("target filter %v", c)
	}
}

func checkConnect(t *testing.T, vh *routev3.VirtualHost, domains []string, clusterName string) {
	t.Helper()
	if !slices.Equal(vh.Domains, domains) || len(vh.Routes) != 2 {
		t.Fatalf("virtual host %s: domains %v, %d routes", vh.Name, vh.Domains, len(vh.Routes))
	}
	c := vh.Routes[0]
	ra := c.GetRoute()
	if c.Match.GetConnectMatcher() == nil || ra.GetCluster() != clusterName || len(ra.UpgradeConfigs) != 1 ||
		ra.UpgradeConfigs[0].UpgradeType != "CONNECT" || ra.UpgradeConfigs[0].ConnectConfig == nil || ra.Timeout.AsDuration() != 0 {
		t.Errorf("%s: CONNECT route %v", vh.Name, c)
	}
	for _, r := range vh.Routes {
		if got := routeRole(t, r); got.Role != pluginconf.RoleEgress || got.Target != "" {
			t.Errorf("%s: route %s role %+v", vh.Name, r.Name, got)
		}
	}
	if d := vh.Routes[1].GetDirectResponse(); vh.Routes[1].Match.GetPrefix() != "/" || d.GetStatus() != 405 {
		t.Errorf("%s: non-CONNECT route %v", vh.Name, vh.Routes[1])
	}
}

// checkEgressLogs: the tunnel line when a tunnel came up, the guard line when
// the guard refused; a target holding a stand-in is logged as [stand-in].
func checkEgressLogs(t *testing.T, m *hcmv3.HttpConnectionManager) {
	t.Helper()
	if !m.AccessLogOptions.GetFlushLogOnTunnelSuccessfullyEstablished() {
		t.Error("no log line when a tunnel is established")
	}
	got := accessLines(t, m)
	want := []line{
		{"jr2.custodian action=tunnel target=%REQ(:AUTHORITY):256%\n", "xds.route_name == 'tunnel'", "without"},
		{"jr2.custodian action=tunnel target=[stand-in]\n", "xds.route_name == 'tunnel'", "with"},
		{"jr2.custodian action=refuse target=%REQ(:AUTHORITY):256% reason=guard\n", "response.code_details == 'rbac_access_denied_matched_policy[guard]'", "without"},
		{"jr2.custodian action=refuse target=[stand-in] reason=guard\n", "response.code_details == 'rbac_access_denied_matched_policy[guard]'", "with"},
		// what Envoy refuses before the engine, or after it, logged as the engine would
		{"jr2.custodian action=refuse target=- reason=target\n", "response.code_details == 'http1.invalid_url'", ""},
		{"jr2.custodian action=refuse target=%REQ(:AUTHORITY):256% reason=unreachable\n", "xds.route_name == 'tunnel' && response.code >= 500", "without"},
		{"jr2.custodian action=refuse target=[stand-in] reason=unreachable\n", "xds.route_name == 'tunnel' && response.code >= 500", "with"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("egress access logs\n got: %q\nwant: %q", got, want)
	}
}

// line is one access log of a connection manager: its format, its CEL
// expression, and whether it matches a target with a stand-in.
type line struct{ format, expr, standIn string }

// codecRefusal are the expressions of what Envoy's codec refuses itself,
// each answered 400 or above: their lines compare the status first.
var codecRefusal = map[string]bool{
	"response.code_details == 'absolute_path_rejected'":    true,
	"response.code_details == 'path_normalization_failed'": true,
	"response.code_details == 'http1.invalid_url'":         true,
	"response.code_details == 'upgrade_failed'":            true,
}

func accessLines(t *testing.T, m *hcmv3.HttpConnectionManager) []line {
	t.Helper()
	var got []line
	for _, al := range m.AccessLog {
		f := unpack[*streamv3.StdoutAccessLog](t, al.GetTypedConfig()).GetLogFormat().GetTextFormatSource().GetInlineString()
		var l line
		l.format = f
		refused := false // a codec refusal's status filter came before its CEL
		for _, sub := range al.Filter.GetAndFilter().GetFilters() {
			switch {
			case sub.GetExtensionFilter() != nil:
				l.expr = unpack[*celv3.ExpressionFilter](t, sub.GetExtensionFilter().GetTypedConfig()).Expression
				if codecRefusal[l.expr] && !refused {
					t.Errorf("%q: no status filter before the CEL expression", l.expr)
				}
			case sub.GetStatusCodeFilter() != nil:
				c := sub.GetStatusCodeFilter().GetComparison()
				if c.GetOp() != accesslogv3.ComparisonFilter_GE || c.GetValue().GetDefaultValue() != 400 {
					t.Errorf("status filter %v: want >= 400", c)
				}
				refused = true
			case sub.GetOrFilter() != nil || sub.GetAndFilter() != nil:
				// holds the prefix or the mark (or, inverted: neither)
				hs := sub.GetOrFilter().GetFilters()
				if sub.GetAndFilter() != nil {
					hs = sub.GetAndFilter().GetFilters()
				}
				if len(hs) != 2 {
					t.Errorf("stand-in filter %v", sub)
					break
				}
				for i, mark := range []string{contract.StandInPrefix, contract.StandInMark} {
					h := hs[i].GetHeaderFilter().GetHeader()
					if h.GetName() != ":authority" || h.GetStringMatch().GetContains() != mark || !h.GetStringMatch().IgnoreCase || h.InvertMatch != (sub.GetAndFilter() != nil) {
						t.Errorf("stand-in filter %v", sub)
					}
				}
				l.standIn = map[bool]string{true: "without", false: "with"}[sub.GetAndFilter() != nil]
			case sub.GetLogTypeFilter() != nil:
			case sub.GetResponseFlagFilter() != nil:
				if !slices.Equal(sub.GetResponseFlagFilter().Flags, append(append([]string(nil), bootstrap.NotSentFlags...), bootstrap.MaySentFlags...)) {
					t.Errorf("flag filter %v", sub)
				}
			default:
				t.Errorf("unexpected log filter %v", sub)
			}
		}
		got = append(got, l)
	}
	return got
}

// checkCodecLogs: the lines of what Envoy refuses before the engine on an
// intercept or the control listener, each at the stream's end.
func checkCodecLogs(t *testing.T, where string, m *hcmv3.HttpConnectionManager, want []line) {
	t.Helper()
	if got := accessLines(t, m); !slices.Equal(got, want) {
		t.Errorf("%s: access logs\n got: %q\nwant: %q", where, got, want)
	}
}

// TestControl: the four routes (three without a Sandbox), each with its
// method, the Host the Orchestrator's, no timeout, the retry rule of its
// kind; POST /fetch rewritten; anything else 404; the mappers add the
// unreachable header and the flags.
func TestControl(t *testing.T) {
	for _, sandbox := range []string{"ws-7f3a", ""} {
		bs := build(t, config(sandbox))
		l := listener(t, bs, bootstrap.ListenerControl)
		if a := l.Address.GetSocketAddress(); a.GetAddress() != "127.0.0.1" || a.GetPortValue() != 8081 {
			t.Errorf("control at %v", a)
		}
		m := hcm(t, l)
		type route struct{ name, method, regex, retry, rewrite string }
		want := []route{
			{"surface", "GET", "^/agents/[A-Za-z0-9._~-]+/surface$", "reset,connect-failure", ""},
			{"events", "POST", "^/agents/[A-Za-z0-9._~-]+/events$", "reset-before-request,connect-failure", ""},
			{"deliveries", "GET", "^/agents/[A-Za-z0-9._~-]+/deliveries/[A-Za-z0-9._~-]+$", "reset,connect-failure", ""},
		}
		if sandbox != "" {
			want = append(want, route{"fetch", "POST", "^/fetch$", "reset-before-request,connect-failure", "/sandboxes/ws-7f3a/fetch"})
		}
		vh := m.GetRouteConfig().VirtualHosts[0]
		if len(vh.Routes) != len(want)+1 {
			t.Fatalf("sandbox %q: %d routes", sandbox, len(vh.Routes))
		}
		for i, w := range want {
			r := vh.Routes[i]
			ra := r.GetRoute()
			got := route{r.Name, r.Match.Headers[0].GetStringMatch().GetExact(), r.Match.GetSafeRegex().GetRegex(), ra.GetRetryPolicy().GetRetryOn(), ra.GetRegexRewrite().GetSubstitution()}
			if got != w || ra.GetCluster() != bootstrap.ClusterOrchestrator || ra.GetHostRewriteLiteral() != "jr2-orchestrator.jr2.svc:4000" || ra.Timeout.AsDuration() != 0 {
				t.Errorf("route %d: %+v → %v; want %+v", i, got, ra, w)
			}
			if routeRole(t, r).Role != pluginconf.RoleControl {
				t.Errorf("route %s: not role control", r.Name)
			}
		}
		last := vh.Routes[len(want)]
		if last.Match.GetPrefix() != "/" || last.GetDirectResponse().GetStatus() != 404 || routeRole(t, last).Role != pluginconf.RoleControl {
			t.Errorf("catch-all %v", last)
		}
		// What Envoy refuses before the engine is the engine's 404 and line
		// (as custodian serve answers), and custom methods reach the engine.
		notRoute := "jr2 custodian: not a route of the control listener; it serves GET /agents/{id}/surface, POST /agents/{id}/events, GET /agents/{id}/deliveries/{d} and POST /fetch"
		lr := &hcmv3.LocalReplyConfig{Mappers: m.LocalReplyConfig.GetMappers()}
		if len(lr.Mappers) > 3 {
			checkMappers(t, "control", &hcmv3.LocalReplyConfig{Mappers: lr.Mappers[:3]}, []mapperWant{
				{expr: "response.code_details == 'absolute_path_rejected'", status: 404, text: notRoute},
				{expr: "response.code_details == 'path_normalization_failed'", status: 404, text: notRoute},
				{expr: "response.code_details == 'upgrade_failed'", status: 400, text: "jr2 custodian: " + filter.ControlUpgradeText},
			})
			lr.Mappers = lr.Mappers[3:]
		}
		checkCodecLogs(t, "control", m, []line{
			{"jr2.custodian action=refuse target=jr2-orchestrator.jr2.svc:4000 reason=route\n", "response.code_details == 'absolute_path_rejected'", ""},
			{"jr2.custodian action=refuse target=jr2-orchestrator.jr2.svc:4000 reason=route\n", "response.code_details == 'path_normalization_failed'", ""},
			{"jr2.custodian action=refuse target=jr2-orchestrator.jr2.svc:4000 reason=upgrade\n", "response.code_details == 'upgrade_failed'", ""},
		})
		if po := m.HttpProtocolOptions; po.GetAllowAbsoluteUrl() == nil || po.GetAllowAbsoluteUrl().GetValue() || !po.GetAllowCustomMethods() {
			t.Errorf("control: HTTP/1 options %v", po)
		}
		checkReplies(t, "control", lr, "jr2-orchestrator.jr2.svc:4000")
		for _, mp := range lr.Mappers[1:] {
			var hs []string
			for _, h := range mp.HeadersToAdd {
				hs = append(hs, h.Header.Key+": "+h.Header.Value)
			}
			if !slices.Equal(hs, []string{"x-jr2-custodian: unreachable", "x-jr2-custodian-flags: %RESPONSE_FLAGS%"}) {
				t.Errorf("control mapper headers %v", hs)
			}
		}
		c := cluster(t, bs, bootstrap.ClusterOrchestrator)
		a := c.LoadAssignment.Endpoints[0].LbEndpoints[0].GetEndpoint().Address.GetSocketAddress()
		if c.GetType() != clusterv3.Cluster_LOGICAL_DNS || a.Address != "jr2-orchestrator.jr2.svc" || a.GetPortValue() != 4000 || c.TransportSocket != nil {
			t.Errorf("orchestrator cluster %v", c)
		}
	}
}

func TestHealth(t *testing.T) {
	bs := build(t, config("ws-7f3a"))
	l := listener(t, bs, bootstrap.ListenerHealth)
	if a := l.Address.GetSocketAddress(); a.GetAddress() != "0.0.0.0" || a.GetPortValue() != 15021 || l.IgnoreGlobalConnLimit {
		t.Errorf("health at %v, ignore global limit %v (its share is in the global limit: TestConnectionLimits)", a, l.IgnoreGlobalConnLimit)
	}
	fs := l.FilterChains[0].Filters
	if fs[0].Name != bootstrap.FilterConnLimit || unpack[*connlimitv3.ConnectionLimit](t, fs[0].GetTypedConfig()).MaxConnections.GetValue() != 16 {
		t.Errorf("health connection limit %v", fs[0])
	}
	m := hcm(t, l)
	if m.CommonHttpProtocolOptions.IdleTimeout.AsDuration().Seconds() != 5 || m.RequestHeadersTimeout.AsDuration().Seconds() != 5 {
		t.Errorf("health idle %v, headers %v", m.CommonHttpProtocolOptions.IdleTimeout, m.RequestHeadersTimeout)
	}
	routes := m.GetRouteConfig().VirtualHosts[0].Routes
	hz := routes[0]
	if hz.Match.GetPath() != "/healthz" || hz.Match.Headers[0].GetStringMatch().GetExact() != "GET" || hz.GetDirectResponse().GetStatus() != 200 || hz.GetDirectResponse().Body.GetInlineString() != "ok" {
		t.Errorf("healthz route %v", hz)
	}
	if routes[1].Match.GetPrefix() != "/" || routes[1].GetDirectResponse().GetStatus() != 404 {
		t.Errorf("health catch-all %v", routes[1])
	}
}

func TestBuildRefusesRelativePaths(t *testing.T) {
	c := config("")
	js, _ := json.Marshal(c)
	for _, in := range []bootstrap.Input{
		{Config: c, ConfigJSON: js, Plugin: "custodian.so", MountDir: mount},
		{Config: c, ConfigJSON: js, Plugin: "/opt/custodian.so", MountDir: "out"},
		{Config: c, ConfigJSON: []byte("{"), Plugin: "/opt/custodian.so", MountDir: mount},
		{Config: c, ConfigJSON: js, Plugin: "/opt/custodian.so", MountDir: mount},
		{Config: c, ConfigJSON: js, Plugin: "/opt/custodian.so", MountDir: mount, AdminSocket: "/var/run/admin.sock"},
		{Config: c, ConfigJSON: js, Plugin: "/opt/custodian.so", MountDir: mount, AdminSocket: "/tmp/"},
	} {
		if _, err := bootstrap.Build(in); err == nil {
			t.Errorf("Build(plugin %q, mount %q, admin socket %q) accepted", in.Plugin, in.MountDir, in.AdminSocket)
		}
	}
}

// TestCheckConfigRemembersOnlyWhatItAccepted: the same accepted bytes are
// parsed once (the render checks one custodian.json three times), but
// other bytes, checked after them, are parsed again and refused.
func TestCheckConfigRemembersOnlyWhatItAccepted(t *testing.T) {
	js, err := json.Marshal(config("ws-7f3a"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := bootstrap.CheckConfig(js); err != nil {
			t.Fatalf("check %d: %v", i, err)
		}
	}
	bad := append([]byte(nil), js...)
	bad = append(bad[:len(bad)-1], []byte(`,"extra":1}`)...)
	for i := range 2 {
		if err := bootstrap.CheckConfig(bad); err == nil {
			t.Fatalf("check %d of a custodian.json with an unknown key: accepted", i)
		}
	}
	if err := bootstrap.CheckConfig(js); err != nil {
		t.Fatalf("after a refusal: %v", err)
	}
	if err := bootstrap.CheckConfig(js[:len(js)-1]); err == nil {
		t.Fatal("the accepted bytes cut short: accepted")
	}
}

// TestMarshalMountedIsBuild: MarshalMounted's envoy.json for each mount is
// byte for byte Build's and Marshal's for that mount — a plain mount from
// the one shared build, any other on its own — for either data plane;
// and a mount Build refuses is refused.
func TestMarshalMountedIsBuild(t *testing.T) {
	c := config("ws-7f3a")
	js, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	mounts := []string{mount, "/dev/shm/jr2-render-bench-123/out-400-0", "/a", "/x y/\"q\"&<z>", "/é/ü", "/tmp//x/"}
	for _, dp := range []bootstrap.DataPlane{bootstrap.DataPlaneModule, bootstrap.DataPlaneGolang} {
		in := bootstrap.Input{Config: c, ConfigJSON: js, DataPlane: dp, Plugin: pluginPath, Module: modulePath, AdminSocket: adminPath}
		got, err := bootstrap.MarshalMounted(in, mounts)
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range mounts {
			each := in
			each.MountDir = m
			bs, err := bootstrap.Build(each)
			if err != nil {
				t.Fatal(err)
			}
			want, err := bootstrap.Marshal(bs)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got[i], want) {
				t.Errorf("%s, mount %q: MarshalMounted differs from Build's envoy.json (%d bytes, want %d)", dp, m, len(got[i]), len(want))
			}
			// The plain mounts (the first three) are the shared build's.
			if i < 3 && !bytes.Contains(got[i], []byte(`"filename":"`+path.Join(m, "ca/upstream.crt")+`"`)) {
				t.Errorf("%s, mount %q: no upstream.crt under it", dp, m)
			}
		}
	}
	in := bootstrap.Input{Config: c, ConfigJSON: js, Module: modulePath, AdminSocket: adminPath}
	if _, err := bootstrap.MarshalMounted(in, []string{mount, "relative"}); err == nil || !strings.Contains(err.Error(), "--mount-dir") {
		t.Errorf("a relative mount: %v", err)
	}
}
