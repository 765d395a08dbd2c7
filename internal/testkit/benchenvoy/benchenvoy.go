// Package benchenvoy makes, for `make bench`, Envoy without the
// module from the module render's envoy.json: the same listeners, internal
// hop, TLS interception, forward proxy, guard, access logs and upstream
// clusters, with the dynamic-module filter and only what exists for it
// left out, so the bench shows Envoy's own cost beside Envoy + module. It
// is a transform in the bench, not a render option: the render has one
// output, the one the e2e suite and the red team test.
//
// Beside it, the parts of the render one at a time, so that each costly
// part is kept only for what it buys: each
// transform below leaves out one part of Envoy alone, so the bench reads
// that part's cost per request as the difference.
//
// Invariant: each transform removes or changes only the part it names and
// reports what it touched (a count, or an error), so a caller can fail
// loudly when the render's shape changes under it.
package benchenvoy

import (
	"errors"
	"net"
	"strconv"
	"strings"
)

// WithoutModule removes from an envoy.json what exists for the dynamic
// module and only that: the envoy.filters.http.dynamic_modules HTTP filter
// of every connection manager, its per-route configs, and jr2.rbac.mark
// (the RBAC that lets a stream through only when the module marked it
// decided, so without the module it would refuse everything). The
// listeners, the internal hop to the intercept listener, its TLS
// termination, the dynamic forward proxy, jr2.rbac.guard, the access logs
// and the upstream clusters stay as rendered. It returns how many filters
// it removed.
func WithoutModule(v any) int {
	return without(v, map[string]bool{"envoy.filters.http.dynamic_modules": true, "jr2.rbac.mark": true}, true)
}

// WithoutMark removes jr2.rbac.mark and only it: Envoy + module with the
// module's mark set but checked by nothing, for the RBAC's own cost.
func WithoutMark(v any) int { return without(v, map[string]bool{"jr2.rbac.mark": true}, false) }

// without removes the HTTP filters named in names from every connection
// manager, and with perRoute the dynamic module's per-route configs.
func without(v any, names map[string]bool, perRoute bool) int {
	n := 0
	switch x := v.(type) {
	case map[string]any:
		if hf, ok := x["http_filters"].([]any); ok {
			kept := hf[:0]
			for _, f := range hf {
				name, _ := f.(map[string]any)["name"].(string)
				if names[name] {
					n++
					continue
				}
				kept = append(kept, f)
			}
			x["http_filters"] = kept
		}
		if pf, ok := x["typed_per_filter_config"].(map[string]any); ok && perRoute {
			delete(pf, "envoy.filters.http.dynamic_modules")
			if len(pf) == 0 {
				delete(x, "typed_per_filter_config")
			}
		}
		for _, c := range x {
			n += without(c, names, perRoute)
		}
	case []any:
		for _, c := range x {
			n += without(c, names, perRoute)
		}
	}
	return n
}

// Relocate gives every listener of an envoy.json with a socket address a
// loopback port of its own (port returns a free one) and the admin
// interface the unix socket adminSock, so the copy runs beside the
// original. It returns each listener's new address by name; an
// envoy.json without an egress or health listener is an error.
func Relocate(cfg map[string]any, adminSock string, port func() int) (map[string]string, error) {
	addrs := map[string]string{}
	for _, l := range listeners(cfg) {
		a, _ := l["address"].(map[string]any)
		sa, ok := a["socket_address"].(map[string]any)
		if !ok {
			continue // an internal listener
		}
		p := port()
		sa["address"], sa["port_value"] = "127.0.0.1", p
		name, _ := l["name"].(string)
		addrs[name] = net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
	}
	if addrs["egress"] == "" || addrs["health"] == "" {
		return nil, errors.New("envoy.json has no egress or health listener: the render changed; update internal/testkit/benchenvoy")
	}
	if admin, ok := cfg["admin"].(map[string]any); ok {
		admin["address"] = map[string]any{"pipe": map[string]any{"path": adminSock, "mode": 384}}
	}
	return addrs, nil
}

// listener is the listener of cfg named name, or nil.
func listener(cfg map[string]any, name string) map[string]any {
	for _, l := range listeners(cfg) {
		if l["name"] == name {
			return l
		}
	}
	return nil
}

func listeners(cfg map[string]any) []map[string]any {
	sr, _ := cfg["static_resources"].(map[string]any)
	lst, _ := sr["listeners"].([]any)
	var out []map[string]any
	for _, l := range lst {
		if l, ok := l.(map[string]any); ok {
			out = append(out, l)
		}
	}
	return out
}

// interceptListeners are the intercept listeners: the shared one
// ("intercept", a leaf chosen by SNI) and a target's own
// ("intercept|host:port", a target named by its address).
func interceptListeners(cfg map[string]any) []map[string]any {
	var out []map[string]any
	for _, l := range listeners(cfg) {
		if n, _ := l["name"].(string); n == "intercept" || strings.HasPrefix(n, "intercept|") {
			out = append(out, l)
		}
	}
	return out
}

// connectionManager is the first HTTP connection manager's config on l.
func connectionManager(l map[string]any) map[string]any {
	fcs, _ := l["filter_chains"].([]any)
	for _, fc := range fcs {
		fs, _ := fc.(map[string]any)["filters"].([]any)
		for _, f := range fs {
			f, _ := f.(map[string]any)
			if f["name"] == "envoy.filters.network.http_connection_manager" {
				tc, _ := f["typed_config"].(map[string]any)
				return tc
			}
		}
	}
	return nil
}

// WithoutInterceptLogs removes the intercept listener's access logs (the
// CEL-filtered entries that write Envoy's own refusals of intercepted
// requests, evaluated at every request's end). It returns how many it
// removed.
func WithoutInterceptLogs(cfg map[string]any) int {
	n := 0
	for _, l := range interceptListeners(cfg) {
		hcm := connectionManager(l)
		logs, _ := hcm["access_log"].([]any)
		delete(hcm, "access_log")
		n += len(logs)
	}
	return n
}

// WithoutStats makes Envoy keep no stat (stats_matcher reject_all).
func WithoutStats(cfg map[string]any) {
	cfg["stats_config"] = map[string]any{"stats_matcher": map[string]any{"reject_all": true}}
}

// DirectIntercept makes the intercept listener a loopback TCP listener (at
// port 0, for Relocate to place) whose every connection is for target, as
// the CONNECT's filter state would have made it: a client then speaks TLS
// to it straight, and the egress listener's CONNECT, its connection
// manager and the internal hop are left out of the path. The listener is
// the target's own ("intercept|target") or the shared one; its filter
// chain, TLS, routes and clusters stay as rendered. It returns the
// listener's name (Relocate's key for its address).
func DirectIntercept(cfg map[string]any, target string) (string, error) {
	l := listener(cfg, "intercept|"+target)
	if l == nil {
		l = listener(cfg, "intercept")
	}
	if l == nil || connectionManager(l) == nil {
		return "", errors.New("envoy.json has no intercept listener with a connection manager: the render changed; update internal/testkit/benchenvoy")
	}
	delete(l, "internal_listener")
	l["address"] = map[string]any{"socket_address": map[string]any{"address": "127.0.0.1", "port_value": 0}}
	state := map[string]any{
		"name": "envoy.filters.network.set_filter_state",
		"typed_config": map[string]any{
			"@type": "type.googleapis.com/envoy.extensions.filters.network.set_filter_state.v3.Config",
			"on_new_connection": []any{map[string]any{
				"object_key":    "jr2.custodian.target",
				"factory_key":   "envoy.string",
				"format_string": map[string]any{"text_format_source": map[string]any{"inline_string": target}},
			}},
		},
	}
	for _, fc := range l["filter_chains"].([]any) {
		fc := fc.(map[string]any)
		fc["filters"] = append([]any{state}, fc["filters"].([]any)...)
	}
	name, _ := l["name"].(string)
	return name, nil
}

// WithModuleFile points every dynamic-module config (the filter's and each
// route's) at the shared object path, for a module built for the bench.
// It returns how many it changed.
func WithModuleFile(v any, path string) int {
	n := 0
	switch x := v.(type) {
	case map[string]any:
		if dm, ok := x["dynamic_module_config"].(map[string]any); ok {
			if m, ok := dm["module"].(map[string]any); ok {
				if l, ok := m["local"].(map[string]any); ok {
					l["filename"] = path
					n++
				}
			}
		}
		for _, c := range x {
			n += WithModuleFile(c, path)
		}
	case []any:
		for _, c := range x {
			n += WithModuleFile(c, path)
		}
	}
	return n
}
