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
