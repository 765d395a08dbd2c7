package envoyfilter

import (
	"strings"
	"testing"

	"github.com/envoyproxy/envoy/contrib/golang/common/go/api"

	"jr2.dev/boundary/filter/pluginconf"
)

// quietLogs is a CommonCAPI that drops lines, so a benchmark measures the
// filter and not the capture.
type quietLogs struct{}

func (quietLogs) Log(api.LogType, string) {}
func (quietLogs) LogLevel() api.LogType   { return api.Info }

func quiet(b *testing.B) {
	api.SetCommonCAPI(quietLogs{})
	b.Cleanup(func() { api.SetCommonCAPI(logs) })
}

// BenchmarkDecodeHeaders: one intercepted request with a dozen headers —
// conversion, the engine's rules, the swap applied, the mark — per op.
func BenchmarkDecodeHeaders(b *testing.B) {
	pd := newPod(b, testConfig())
	cfg := pd.route(b, pluginconf.RoleIntercept, anthropic)
	req := headers(":method", "POST", ":authority", "api.anthropic.com", ":path", "/v1/messages?beta=true", ":scheme", "https",
		"x-api-key", anthropicStandIn, "anthropic-version", "2023-06-01", "content-type", "application/json",
		"accept", "application/json", "accept-encoding", "gzip, deflate, br", "user-agent", "claude-cli/1.0",
		"x-stainless-lang", "js", "x-stainless-os", "Linux", "content-length", "1234")
	quiet(b)
	b.ReportAllocs()
	for b.Loop() {
		cb := newCallbacks()
		f := Factory(cfg, cb)
		if f.DecodeHeaders(req.clone(), false) != api.Continue {
			b.Fatal("refused")
		}
	}
}

// BenchmarkEncodeData: a 256 KiB text response in 16 KiB chunks through
// the streaming scrubber (no value in it: the common case); bytes/s is the
// response throughput of one stream.
func BenchmarkEncodeData(b *testing.B) {
	benchmarkEncode(b, false)
}

// BenchmarkEncodeDataGzip: the same response, gzip-encoded upstream.
func BenchmarkEncodeDataGzip(b *testing.B) {
	benchmarkEncode(b, true)
}

func benchmarkEncode(b *testing.B, gz bool) {
	pd := newPod(b, testConfig())
	cfg := pd.route(b, pluginconf.RoleIntercept, anthropic)
	text := strings.Repeat("data: {\"type\":\"content_block_delta\",\"delta\":{\"text\":\"hello world\"}}\n\n", 4000)[:256<<10]
	body := text
	respHeaders := headers(":status", "200", "content-type", "text/event-stream")
	if gz {
		body = gzipped(b, text)
		respHeaders.Add("content-encoding", "gzip")
	}
	const chunk = 16 << 10
	var chunks []string
	for i := 0; i < len(body); i += chunk {
		chunks = append(chunks, body[i:min(i+chunk, len(body))])
	}
	quiet(b)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		cb := newCallbacks()
		f := Factory(cfg, cb)
		f.DecodeHeaders(anthropicRequest("POST"), true)
		if f.EncodeHeaders(respHeaders.clone(), false) != api.Continue {
			b.Fatal("refused")
		}
		n := 0
		for i, c := range chunks {
			buf := &fakeBuffer{b: []byte(c)}
			if f.EncodeData(buf, i == len(chunks)-1) != api.Continue {
				b.Fatal("cut off")
			}
			n += buf.Len()
		}
		if n != len(text) {
			b.Fatalf("%d bytes passed, want %d", n, len(text))
		}
		f.OnDestroy(api.Normal)
	}
}
