package module

import (
	"bytes"
	"testing"

	"jr2.dev/boundary/filter"
)

// BenchmarkPassedRequest is one intercepted request the module passes, as
// the bench's load sends it (a 1 KiB POST answered with the same bytes),
// from the request's headers to the stream's end, over the fake ABI (whose
// own copies of headers and body count: the real ABI copies them too).
// Its allocations are the module's per request inside Envoy.
func BenchmarkPassedRequest(b *testing.B) {
	fc, rc := pod(&testing.T{})
	body := bytes.Repeat([]byte("a"), 1024)
	req := []string{":method", "POST", ":scheme", "https", ":authority", "api.anthropic.com", ":path", "/v1/echo",
		"user-agent", "Go-http-client/1.1", "content-length", "1024", "x-api-key", "jr2-held-ANTHROPIC_API_KEY", "accept-encoding", "gzip",
		"x-forwarded-proto", "https", "x-request-id", "5b0cc8c5-8f4e-4f4b-9d7e-4b1e0f7f0c11"}
	resp := []filter.Header{{Name: ":status", Value: "200"}, {Name: "content-type", Value: "application/octet-stream"},
		{Name: "content-length", Value: "1024"}, {Name: "date", Value: "Fri, 04 Dec 2026 10:30:00 GMT"}}
	b.ReportAllocs()
	for b.Loop() {
		f, x := newStream(fc, rc, req...)
		if f.requestHeaders() != statusContinue || x.mark == nil || !*x.mark {
			b.Fatal("the request was not passed")
		}
		x.hdr[responseHeader] = append(x.hdr[responseHeader][:0], resp...)
		if f.responseHeaders(false) != statusContinue {
			b.Fatal("the answer's headers were stopped")
		}
		x.chunk = append(x.chunk[:0], body...)
		if f.responseBody(true) != statusContinue || len(x.chunk) != len(body) {
			b.Fatal("the answer's body was stopped or changed")
		}
		f.streamComplete()
	}
}
