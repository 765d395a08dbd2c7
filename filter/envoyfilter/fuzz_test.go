package envoyfilter

import (
	"sort"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/anypb"

	"jr2.dev/boundary/filter/pluginconf"
	"jr2.dev/boundary/filter/stream"
	"jr2.dev/boundary/filter/stream/streamtest"
)

// FuzzParse: no plugin config panics Parse (its recovery would hide one,
// so the fuzzer looks for the recovery's message), and what parses is one
// of the two config kinds.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"role":"intercept","target":"api.anthropic.com:443"}`), "")
	f.Add([]byte(`{"role":"control"}`), "")
	f.Add([]byte(`{"pod":"p","orchestrator":"o:1","valuesDir":"/nonexistent","secrets":[]}`), "")
	f.Add([]byte(`{"engineConfig":"/nonexistent/custodian.json"}`), "")
	f.Add([]byte(`{"engineConfig":"/"}`), "")
	f.Add([]byte("\n\x12\x04abcd"), "type.googleapis.com/google.protobuf.StringValue")
	f.Fuzz(func(t *testing.T, b []byte, typeURL string) {
		p := NewParser()
		// The StringValue is encoded by hand: proto's marshaller refuses
		// invalid UTF-8, and Envoy's bytes need not be valid.
		sv := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), b)
		for _, a := range []*anypb.Any{{TypeUrl: "type.googleapis.com/google.protobuf.StringValue", Value: sv}, {TypeUrl: typeURL, Value: b}} {
			cfg, err := p.Parse(a, nil)
			if err != nil {
				if cfg != nil {
					t.Fatalf("a config came with the error %v", err)
				}
				if strings.Contains(err.Error(), "internal error") {
					t.Fatalf("Parse panicked on %q", b)
				}
				continue
			}
			switch c := cfg.(type) {
			case *filterConfig:
				if c.engine == nil {
					t.Fatal("a filter config without an engine")
				}
			case *routeConfig:
				if _, err := pluginconf.ParseRoute(c.route.Marshal()); err != nil {
					t.Fatalf("an accepted route config does not round-trip: %v", err)
				}
			default:
				t.Fatalf("Parse returned %T", cfg)
			}
		}
		logs.take()
	})
}

// parseHeaderLines reads "name: value" lines into a header map; a line
// without ": " is a name with an empty value.
func parseHeaderLines(raw string) *fakeHeaders {
	h := headers()
	for _, line := range strings.Split(raw, "\n") {
		name, value, _ := strings.Cut(line, ": ")
		h.Add(name, value)
	}
	return h
}

// FuzzRequestFromHeaders: the conversion keeps the first :method,
// :authority and :path, every other value (in its name's order), no
// pseudo-header, and sorts names.
func FuzzRequestFromHeaders(f *testing.F) {
	f.Add(":method: GET\n:authority: a.example\n:path: /x\nx-api-key: k\nx-api-key: k2\naccept: */*")
	f.Add(":method: CONNECT\n:authority: a.example:443")
	f.Add(":status: 200\n:path\n\nz: 1\na: 2")
	f.Fuzz(func(t *testing.T, raw string) {
		h := parseHeaderLines(raw)
		r := stream.RequestOf(headerMap{h}.All())
		if r.Method != first(h.m[":method"]) || r.Authority != first(h.m[":authority"]) || r.Path != first(h.m[":path"]) {
			t.Fatalf("pseudo-headers: %+v from %v", r, h.m)
		}
		want := 0
		for name, vs := range h.m {
			if !strings.HasPrefix(name, ":") {
				want += len(vs)
			}
		}
		if len(r.Headers) != want {
			t.Fatalf("%d headers, want %d", len(r.Headers), want)
		}
		if !sort.SliceIsSorted(r.Headers, func(i, j int) bool { return r.Headers[i].Name < r.Headers[j].Name }) {
			t.Fatalf("names not sorted: %+v", r.Headers)
		}
		seen := map[string]int{}
		for _, x := range r.Headers {
			if strings.HasPrefix(x.Name, ":") {
				t.Fatalf("pseudo-header %q among the headers", x.Name)
			}
			if vs := h.m[x.Name]; seen[x.Name] >= len(vs) || vs[seen[x.Name]] != x.Value {
				t.Fatalf("header %q value %q out of order", x.Name, x.Value)
			}
			seen[x.Name]++
		}
	})
}

// FuzzStream: the shared suite's fuzz target (streamtest.Fuzz) over the
// SDK's fakes.
func FuzzStream(f *testing.F) { streamtest.Fuzz(f, sdkDriver{}) }

func first(vs []string) string {
	if len(vs) == 0 {
		return ""
	}
	return vs[0]
}
