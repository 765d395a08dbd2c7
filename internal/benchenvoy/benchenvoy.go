// Package benchenvoy makes, for `make bench` (issue 25), Envoy without the
// module from the module render's envoy.json: the same listeners, internal
// hop, TLS interception, forward proxy, guard, access logs and upstream
// clusters, with the dynamic-module filter and only what exists for it
// left out, so the bench shows Envoy's own cost beside Envoy + module. It
// is a transform in the bench, not a render option: the render has one
// output, the one the e2e suite and the red team test.
//
// Invariant: it removes only the envoy.filters.http.dynamic_modules HTTP
// filter, its per-route configs and jr2.rbac.mark, and reports how many
// filters it removed, so a caller can fail loudly when the render's shape
// changes under it.
package benchenvoy

import (
	"errors"
	"net"
	"strconv"
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
	n := 0
	switch x := v.(type) {
	case map[string]any:
		if hf, ok := x["http_filters"].([]any); ok {
			kept := hf[:0]
			for _, f := range hf {
				name, _ := f.(map[string]any)["name"].(string)
				if name == "envoy.filters.http.dynamic_modules" || name == "jr2.rbac.mark" {
					n++
					continue
				}
				kept = append(kept, f)
			}
			x["http_filters"] = kept
		}
		if pf, ok := x["typed_per_filter_config"].(map[string]any); ok {
			delete(pf, "envoy.filters.http.dynamic_modules")
			if len(pf) == 0 {
				delete(x, "typed_per_filter_config")
			}
		}
		for _, c := range x {
			n += WithoutModule(c)
		}
	case []any:
		for _, c := range x {
			n += WithoutModule(c)
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
	sr, _ := cfg["static_resources"].(map[string]any)
	lst, _ := sr["listeners"].([]any)
	for _, l := range lst {
		l, _ := l.(map[string]any)
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
		return nil, errors.New("envoy.json has no egress or health listener: the render changed; update internal/benchenvoy")
	}
	if admin, ok := cfg["admin"].(map[string]any); ok {
		admin["address"] = map[string]any{"pipe": map[string]any{"path": adminSock, "mode": 384}}
	}
	return addrs, nil
}
