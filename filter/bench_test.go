package filter

import (
	"fmt"
	"testing"

	"jr2.dev/boundary/internal/contract"
)

// benchEngine holds n secrets, each bound to its own host and to a shared
// gateway with its own header, so lookups and stand-in searches see all n.
func benchEngine(b testing.TB, n int) *Engine {
	return benchEngineShaped(b, n, nil)
}

// benchEngineShaped is benchEngine with each stand-in of shape sh (nil:
// none).
func benchEngineShaped(b testing.TB, n int, sh *contract.Shape) *Engine {
	b.Helper()
	c := &Config{Pod: "bench", Orchestrator: "o.example:4000", ValuesDir: "/x"}
	vals := map[string][]byte{}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("SECRET_%03d", i)
		si, err := contract.StandInOf(name, sh)
		if err != nil {
			b.Fatal(err)
		}
		c.Secrets = append(c.Secrets, SecretConfig{
			Name: name, StandIn: si, Shape: sh,
			Targets: []string{fmt.Sprintf("h%03d.example.com:443", i), "gateway.example.com:443"},
			Headers: []string{fmt.Sprintf("x-key-%03d", i)},
			Paths:   []string{"/v1/"},
		})
		vals[name] = []byte(fmt.Sprintf("value-%03d-0123456789abcdef", i))
	}
	e, err := New(c, vals)
	if err != nil {
		b.Fatal(err)
	}
	return e
}

// BenchmarkDecideRequest: one intercepted request's decision with 100 held
// secrets (make bench prints ns/op and allocs/op).
func BenchmarkDecideRequest(b *testing.B) {
	benchDecide(b, benchEngine(b, 100), benchRequest())
}

// benchDecide decides req toward h050 b.N times; a refusal fails.
func benchDecide(b *testing.B, e *Engine, req Request) {
	r := &req
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d := e.DecideRequest("h050.example.com:443", r)
		if d.Reply != nil {
			b.Fatal(d.Reply.Body)
		}
	}
}

// benchRequest is BenchmarkDecideRequest's request: a swap of the stand-in
// alone toward h050, one of 100 targets.
func benchRequest() Request {
	return Request{Method: "POST", Authority: "h050.example.com", Path: "/v1/messages?beta=true", Headers: []Header{
		{"content-type", "application/json"}, {"x-key-050", contract.StandIn("SECRET_050")}, {"user-agent", "bench/1.0"},
		{"accept", "*/*"}, {"anthropic-version", "2023-06-01"}, {"content-length", "1024"},
	}}
}

// BenchmarkDecideRequestShaped is BenchmarkDecideRequest with every
// stand-in shaped as an Anthropic key: the fast scan looks for the mark
// too.
func BenchmarkDecideRequestShaped(b *testing.B) {
	benchDecide(b, benchEngineShaped(b, 100, &contract.Shape{Kind: "anthropic"}), benchRequestShaped(b))
}

// benchRequestShaped is benchRequest with SECRET_050's stand-in shaped as
// an Anthropic key.
func benchRequestShaped(b testing.TB) Request {
	r := benchRequest()
	si, err := contract.StandInOf("SECRET_050", &contract.Shape{Kind: "anthropic"})
	if err != nil {
		b.Fatal(err)
	}
	r.Headers = append([]Header(nil), r.Headers...)
	r.Headers[1].Value = si
	return r
}

// BenchmarkDecideRequestGateway: the target has all 100 secrets bound.
func BenchmarkDecideRequestGateway(b *testing.B) {
	e := benchEngine(b, 100)
	r := &Request{Method: "GET", Authority: "gateway.example.com", Path: "/v1/models", Headers: []Header{
		{"x-key-099", contract.StandIn("SECRET_099")}, {"accept", "application/json"},
	}}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if d := e.DecideRequest("gateway.example.com:443", r); d.Reply != nil {
			b.Fatal(d.Reply.Body)
		}
	}
}
