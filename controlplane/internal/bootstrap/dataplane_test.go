package bootstrap_test

import (
	"encoding/json"
	"strings"
	"testing"

	golangv3alpha "github.com/envoyproxy/go-control-plane/contrib/envoy/extensions/filters/http/golang/v3alpha"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	dynmodv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/dynamic_modules/v3"
	dynmodfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/dynamic_modules/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"jr2.dev/boundary/controlplane/internal/bootstrap"
	"jr2.dev/boundary/filter/pluginconf"
)

// engineConfig checks the engine filter's typed config for its data plane
// and returns the filter config it carries (custodian.json).
func engineConfig(t *testing.T, where string, f *hcmv3.HttpFilter) string {
	t.Helper()
	switch f.Name {
	case bootstrap.FilterGolang:
		g := unpack[*golangv3alpha.Config](t, f.GetTypedConfig())
		if g.LibraryId != pluginconf.PluginName || g.PluginName != pluginconf.PluginName || g.LibraryPath != pluginPath {
			t.Errorf("%s: golang filter %s/%s at %s", where, g.LibraryId, g.PluginName, g.LibraryPath)
		}
		return stringValue(t, g.PluginConfig)
	case bootstrap.FilterModule:
		m := unpack[*dynmodfilterv3.DynamicModuleFilter](t, f.GetTypedConfig())
		checkModule(t, where, m.DynamicModuleConfig)
		if m.FilterName != pluginconf.PluginName || m.TerminalFilter {
			t.Errorf("%s: module filter %q, terminal %v; want %q, not terminal", where, m.FilterName, m.TerminalFilter, pluginconf.PluginName)
		}
		return stringValue(t, m.FilterConfig)
	}
	t.Fatalf("%s: %s is not an engine filter", where, f.Name)
	return ""
}

// checkModule: the module is opened by its absolute path (no name, so no
// search path), never closed, loaded locally.
func checkModule(t *testing.T, where string, c *dynmodv3.DynamicModuleConfig) {
	t.Helper()
	if c.GetModule().GetLocal().GetFilename() != modulePath || c.GetName() != "" || !c.GetDoNotClose() || c.GetLoadGlobally() || c.GetModule().GetRemote() != nil {
		t.Errorf("%s: module config %v; want local file %s, no name, do_not_close", where, c, modulePath)
	}
}

// routeConfig checks a route's per-route config: exactly one entry, keyed
// by the engine filter's name, beside at most the guard's (disabled on a
// bound target's CONNECT, TestGuardOnlyOnTheTunnel), and returns the
// RouteConfig JSON it carries.
func routeConfig(t *testing.T, r *routev3.Route) string {
	t.Helper()
	n := len(r.TypedPerFilterConfig)
	if _, ok := r.TypedPerFilterConfig[bootstrap.FilterGuard]; ok {
		n--
	}
	if n != 1 {
		t.Fatalf("route %s: per-route configs %v; want the engine filter's only", r.Name, keys(r.TypedPerFilterConfig))
	}
	if a, ok := r.TypedPerFilterConfig[bootstrap.FilterGolang]; ok {
		pc := unpack[*golangv3alpha.ConfigsPerRoute](t, a).PluginsConfig
		if len(pc) != 1 || pc[pluginconf.PluginName] == nil {
			t.Fatalf("route %s: golang plugins %v", r.Name, pc)
		}
		return stringValue(t, pc[pluginconf.PluginName].GetConfig())
	}
	a, ok := r.TypedPerFilterConfig[bootstrap.FilterModule]
	if !ok {
		t.Fatalf("route %s: no engine per-route config in %v", r.Name, keys(r.TypedPerFilterConfig))
	}
	m := unpack[*dynmodfilterv3.DynamicModuleFilterPerRoute](t, a)
	checkModule(t, "route "+r.Name, m.DynamicModuleConfig)
	// per_route_config_name is deprecated in Envoy 1.39.3 (it logs a
	// warning); filter_name replaces it.
	if m.FilterName != pluginconf.PluginName || m.PerRouteConfigName != "" {
		t.Errorf("route %s: per-route filter_name %q, per_route_config_name %q; want %q and none", r.Name, m.FilterName, m.PerRouteConfigName, pluginconf.PluginName)
	}
	return stringValue(t, m.FilterConfig)
}

func stringValue(t *testing.T, a *anypb.Any) string {
	t.Helper()
	return unpack[*wrapperspb.StringValue](t, a).Value
}

func keys[V any](m map[string]V) []string {
	var k []string
	for s := range m {
		k = append(k, s)
	}
	return k
}

// TestDataPlanesCarryTheSameConfigs: the module render's filter carries
// custodian.json byte for byte as the golang render's does, and each route
// the same RouteConfig JSON, on every listener and route.
func TestDataPlanesCarryTheSameConfigs(t *testing.T) {
	c := config("ws-7f3a")
	golang, module := buildPlane(t, c, bootstrap.DataPlaneGolang), build(t, c)
	filters, routes := 0, 0
	for i, gl := range golang.StaticResources.Listeners {
		ml := module.StaticResources.Listeners[i]
		gf, mf := httpFilters(t, gl), httpFilters(t, ml)
		for j := range gf {
			if gf[j].Name != bootstrap.FilterGolang {
				continue
			}
			filters++
			if g, m := engineConfig(t, gl.Name, gf[j]), engineConfig(t, ml.Name, mf[j]); g != m {
				t.Errorf("%s: the module's filter config differs from the golang filter's:\n%s\n%s", gl.Name, m, g)
			}
		}
		gv, mv := hcm(t, gl).GetRouteConfig().VirtualHosts, hcm(t, ml).GetRouteConfig().VirtualHosts
		for v := range gv {
			if gv[v].TypedPerFilterConfig != nil {
				// An intercept listener's one config for all its routes.
				routes++
				g := routeConfig(t, &routev3.Route{Name: gv[v].Name, TypedPerFilterConfig: gv[v].TypedPerFilterConfig})
				if m := routeConfig(t, &routev3.Route{Name: mv[v].Name, TypedPerFilterConfig: mv[v].TypedPerFilterConfig}); g != m {
					t.Errorf("virtual host %s: module config %s; golang %s", gv[v].Name, m, g)
				}
			}
			for r := range gv[v].Routes {
				if gv[v].Routes[r].TypedPerFilterConfig == nil {
					continue
				}
				routes++
				if g, m := routeConfig(t, gv[v].Routes[r]), routeConfig(t, mv[v].Routes[r]); g != m {
					t.Errorf("route %s: module per-route %s; golang %s", gv[v].Routes[r].Name, m, g)
				}
			}
		}
	}
	// control, egress and three intercept listeners (the DNS-named targets'
	// and one per IP target); the control routes (4 + not-found), two per
	// egress vhost (the three listeners + tunnel), one per intercept
	// listener's virtual host.
	if wantF, wantR := 2+3, 5+2*(3+1)+3; filters != wantF || routes != wantR {
		t.Errorf("%d engine filters, %d per-route configs compared; want %d, %d", filters, routes, wantF, wantR)
	}
}

// TestDataPlaneRefusals: an unknown data plane, or the chosen plane's
// object not an absolute path, builds nothing and names the flag; no
// data plane named is the module's.
func TestDataPlaneRefusals(t *testing.T) {
	c := config("ws-7f3a")
	js, _ := json.Marshal(c)
	for _, tc := range []struct {
		in   bootstrap.Input
		want string
	}{
		{bootstrap.Input{DataPlane: "contrib", Plugin: pluginPath, Module: modulePath}, `bootstrap: --data-plane "contrib": want module (core Envoy's dynamic module, --module; the default) or golang (the contrib golang filter, --plugin)`},
		{bootstrap.Input{DataPlane: bootstrap.DataPlaneModule, Plugin: pluginPath}, `bootstrap: --mount-dir "/etc/jr2/custodian" and --module "" must be absolute paths in the Custodian container`},
		{bootstrap.Input{DataPlane: bootstrap.DataPlaneModule, Plugin: pluginPath, Module: "lib/custodian-module.so"}, `bootstrap: --mount-dir "/etc/jr2/custodian" and --module "lib/custodian-module.so" must be absolute paths in the Custodian container`},
		{bootstrap.Input{Plugin: pluginPath, Module: "custodian-module.so"}, `bootstrap: --mount-dir "/etc/jr2/custodian" and --module "custodian-module.so" must be absolute paths in the Custodian container`},
		{bootstrap.Input{DataPlane: bootstrap.DataPlaneGolang, Plugin: "custodian.so", Module: modulePath}, `bootstrap: --mount-dir "/etc/jr2/custodian" and --plugin "custodian.so" must be absolute paths in the Custodian container`},
	} {
		tc.in.Config, tc.in.ConfigJSON, tc.in.MountDir, tc.in.AdminSocket = c, js, mount, adminPath
		bs, err := bootstrap.Build(tc.in)
		if bs != nil || err == nil || err.Error() != tc.want {
			t.Errorf("%+v: %v\n got: %v\nwant: %s", tc.in.DataPlane, bs != nil, err, tc.want)
		}
	}
	for in, want := range map[string]bootstrap.DataPlane{"": bootstrap.DataPlaneModule, "golang": bootstrap.DataPlaneGolang, "module": bootstrap.DataPlaneModule} {
		if got, err := bootstrap.ParseDataPlane(in); got != want || err != nil {
			t.Errorf("ParseDataPlane(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := bootstrap.ParseDataPlane("Module"); err == nil || !strings.Contains(err.Error(), "want module") {
		t.Errorf("ParseDataPlane(Module): %v", err)
	}
}
