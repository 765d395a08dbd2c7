package envoyfilter

import (
	"sort"
	"strings"

	"github.com/envoyproxy/envoy/contrib/golang/common/go/api"

	"jr2.dev/boundary/filter"
)

// requestFromHeaders reads what the engine judges from a request's header
// map: :method, :authority and :path (the first value of each), and every
// header that is not a pseudo-header.
//
// The SDK keeps headers in a Go map (name → values in arrival order), so
// the order between different names is lost; names are sorted to make the
// engine's choices (which offending header a reply names) the same on
// every run. Values of one name keep their order. Hop-by-hop headers are
// not removed here: Envoy's connection manager removes them before any
// filter runs, and what it leaves is judged.
func requestFromHeaders(h api.RequestHeaderMap) filter.Request {
	all := h.GetAllHeaders()
	var r filter.Request
	r.Method = first(all[":method"])
	r.Authority = first(all[":authority"])
	r.Path = first(all[":path"])
	for _, name := range sortedNames(all) {
		if strings.HasPrefix(name, ":") {
			continue
		}
		for _, v := range all[name] {
			r.Headers = append(r.Headers, filter.Header{Name: name, Value: v})
		}
	}
	return r
}

// responseHeaders reads every non-pseudo response header, names sorted.
func responseHeaders(h api.ResponseHeaderMap) []filter.Header {
	all := h.GetAllHeaders()
	var out []filter.Header
	for _, name := range sortedNames(all) {
		if strings.HasPrefix(name, ":") {
			continue
		}
		for _, v := range all[name] {
			out = append(out, filter.Header{Name: name, Value: v})
		}
	}
	return out
}

// applyRequest applies a forward decision to the request's header map: the
// engine's path, its removals, then its Set headers (each replacing every
// value of its name).
func applyRequest(h api.RequestHeaderMap, d *filter.Decision) {
	if d.Path != "" {
		h.SetPath(d.Path)
	}
	for _, n := range d.Remove {
		h.Del(n)
	}
	for _, x := range d.Set {
		h.Set(x.Name, x.Value)
	}
}

// applyResponse applies a response decision: its removals, then its Set
// headers, where several entries of one name become several values.
func applyResponse(h api.ResponseHeaderMap, d *filter.ResponseDecision) {
	for _, n := range d.Remove {
		h.Del(n)
	}
	setAll(h, d.Set)
}

// scrubTrailers applies the engine's verdict on the trailers: a name that
// holds a form of a held value is removed, and every value is replaced
// with its scrubbed form.
func scrubTrailers(t api.ResponseTrailerMap, e *filter.Engine) {
	all := t.GetAllHeaders()
	var in []filter.Header
	for _, name := range sortedNames(all) {
		for _, v := range all[name] {
			in = append(in, filter.Header{Name: name, Value: v})
		}
	}
	out := e.DecideTrailers(in)
	kept := map[string]bool{}
	for _, x := range out {
		kept[x.Name] = true
	}
	for _, name := range sortedNames(all) {
		if !kept[strings.ToLower(name)] {
			t.Del(name)
		}
	}
	setAll(t, out)
}

// setAll makes each name's values exactly the listed ones, in order.
func setAll(h api.HeaderMap, set []filter.Header) {
	done := map[string]bool{}
	for _, x := range set {
		if done[x.Name] {
			h.Add(x.Name, x.Value)
			continue
		}
		done[x.Name] = true
		h.Set(x.Name, x.Value)
	}
}

func sortedNames(m map[string][]string) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func first(vs []string) string {
	if len(vs) == 0 {
		return ""
	}
	return vs[0]
}
