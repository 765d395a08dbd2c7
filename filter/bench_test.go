package filter

import (
	"fmt"
	"testing"

	"jr2.dev/boundary/internal/contract"
)

// benchEngine holds n secrets, each bound to its own host and to a shared
// gateway with its own header, so lookups and stand-in searches see all n.
func benchEngine(b testing.TB, n int) *Engine {
	b.Helper()
	c := &Config{Pod: "bench", Orchestrator: "o.example:4000", ValuesDir: "/x"}
	vals := map[string][]byte{}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("SECRET_%03d", i)
		c.Secrets = append(c.Secrets, SecretConfig{
			Name: name, StandIn: contract.StandIn(name),
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
	e := benchEngine(b, 100)
	req := benchRequest()
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
