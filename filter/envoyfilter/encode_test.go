package envoyfilter

import (
	"bytes"
	"compress/gzip"
	"strconv"
	"strings"
	"testing"

	"github.com/envoyproxy/envoy/contrib/golang/common/go/api"

	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/filter/pluginconf"
)

const scrubbedAnthropic = "[secret:ANTHROPIC_API_KEY]"

func gzipped(t testing.TB, s string) string {
	t.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	if _, err := w.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// split cuts s into n pieces of about equal length.
func split(s string, n int) []string {
	var out []string
	for i := 0; i < n; i++ {
		out = append(out, s[i*len(s)/n:(i+1)*len(s)/n])
	}
	return out
}

func anthropicRequest(method string) *fakeHeaders {
	return headers(":method", method, ":authority", "api.anthropic.com", ":path", "/v1/messages", "x-api-key", anthropicStandIn)
}

// TestEncode: responses from a bound target, through an intercept route.
func TestEncode(t *testing.T) {
	pd := newPod(t, testConfig())
	cfg := pd.route(t, pluginconf.RoleIntercept, anthropic)
	ok := interceptLine(anthropic, "ANTHROPIC_API_KEY", "POST")
	gz := gzipped(t, "answer: "+anthropicValue+" and more text after it\n")

	for _, tc := range []struct {
		name    string
		method  string
		resp    *upstream
		status  int
		headers string   // the response headers the agent gets, "name: value" lines; @LEN@ is len(body)
		writes  []string // each piece of body the agent gets, in order; nil: compare body only
		body    string
		tr      string // the trailers the agent gets
		reset   bool
		logs    []string
	}{
		{
			name:    "content-length is dropped when a body follows",
			resp:    &upstream{headers: headers(":status", "200", "content-length", "11", "content-type", "text/plain"), chunks: []string{"hello world"}},
			status:  200,
			headers: ":status: 200\ncontent-type: text/plain",
			body:    "hello world",
			logs:    []string{ok},
		},
		{
			name:    "a response without a body keeps its headers",
			resp:    &upstream{headers: headers(":status", "204", "x-request-id", "r1")},
			status:  204,
			headers: ":status: 204\nx-request-id: r1",
			logs:    []string{ok[:len(ok)-3] + "204"},
		},
		{
			name:    "a HEAD answer keeps its content-length",
			method:  "HEAD",
			resp:    &upstream{headers: headers(":status", "200", "content-length", "1234")},
			status:  200,
			headers: ":status: 200\ncontent-length: 1234",
			logs:    []string{interceptLine(anthropic, "ANTHROPIC_API_KEY", "HEAD")},
		},
		{
			name:    "header values are scrubbed, every value of a name in order",
			resp:    &upstream{headers: headers(":status", "401", "x-echo", "key="+anthropicValue, "set-cookie", "a="+anthropicValue, "set-cookie", "b=2", "x-plain", "p")},
			status:  401,
			headers: ":status: 401\nset-cookie: a=" + scrubbedAnthropic + "\nset-cookie: b=2\nx-echo: key=" + scrubbedAnthropic + "\nx-plain: p",
			logs:    []string{ok[:len(ok)-3] + "401"},
		},
		{
			name:    "a value cut across chunk borders is scrubbed",
			resp:    &upstream{headers: headers(":status", "200"), chunks: append(append([]string{"before sk-ant-"}, split(anthropicValue[len("sk-ant-"):], 3)...), " after")},
			status:  200,
			headers: ":status: 200",
			body:    "before " + scrubbedAnthropic + " after",
			logs:    []string{ok},
		},
		{
			name:    "server-sent events pass in the write that brought them",
			resp:    &upstream{headers: headers(":status", "200", "content-type", "text/event-stream"), chunks: []string{"event: ping\ndata: 1\n\n", "data: {\"n\":2}\n\n", ""}},
			status:  200,
			headers: ":status: 200\ncontent-type: text/event-stream",
			writes:  []string{"event: ping\ndata: 1\n\n", "data: {\"n\":2}\n\n", ""},
			logs:    []string{ok},
		},
		{
			name:    "a gzip body is decoded and scrubbed",
			resp:    &upstream{headers: headers(":status", "200", "content-encoding", "gzip", "content-length", "99"), chunks: split(gz, 4)},
			status:  200,
			headers: ":status: 200",
			body:    "answer: " + scrubbedAnthropic + " and more text after it\n",
			logs:    []string{ok},
		},
		{
			name:    "a br body is refused 502 naming br",
			resp:    &upstream{headers: headers(":status", "200", "content-encoding", "br"), chunks: []string{"\x1b\x00 brotli bytes " + anthropicValue}},
			status:  502,
			headers: ":status: 502\ncontent-length: @LEN@\ncontent-type: text/plain; charset=utf-8",
			body:    "jr2 custodian: api.anthropic.com:443 answered with content-encoding br, which the Custodian cannot read to scrub; the answer was not passed on",
			logs:    []string{ok[:len(ok)-3] + "502", refuseLine(anthropic, filter.ReasonEncoding)},
		},
		{
			name:    "two encodings are refused 502 naming both",
			resp:    &upstream{headers: headers(":status", "200", "content-encoding", "gzip, zstd"), chunks: []string{"x"}},
			status:  502,
			headers: ":status: 502\ncontent-length: @LEN@\ncontent-type: text/plain; charset=utf-8",
			body:    "jr2 custodian: api.anthropic.com:443 answered with content-encoding gzip, zstd, which the Custodian cannot read to scrub; the answer was not passed on",
			logs:    []string{ok[:len(ok)-3] + "502", refuseLine(anthropic, filter.ReasonEncoding)},
		},
		{
			name:    "a body that claims gzip and is not resets the stream",
			resp:    &upstream{headers: headers(":status", "200", "content-encoding", "gzip"), chunks: []string{"plain " + anthropicValue, "more"}},
			status:  200,
			headers: ":status: 200",
			reset:   true,
			logs:    []string{ok, refuseLine(anthropic, filter.ReasonEncoding)},
		},
		{
			name:    "a gzip body cut short resets the stream rather than end it",
			resp:    &upstream{headers: headers(":status", "200", "content-encoding", "gzip"), chunks: []string{gz[:len(gz)/2], gz[len(gz)/2 : len(gz)-6]}},
			status:  200,
			headers: ":status: 200",
			reset:   true,
			logs:    []string{ok, refuseLine(anthropic, filter.ReasonEncoding)},
		},
		{
			name: "trailers are scrubbed and the held tail comes before them",
			resp: &upstream{
				headers:  headers(":status", "200"),
				chunks:   []string{"text ending in " + anthropicValue[:12]},
				trailers: headers("grpc-message", "bad key "+anthropicValue, "grpc-status", "16"),
			},
			status:  200,
			headers: ":status: 200",
			body:    "text ending in " + anthropicValue[:12],
			tr:      "grpc-message: bad key " + scrubbedAnthropic + "\ngrpc-status: 16",
			logs:    []string{ok},
		},
		{
			name: "a trailer whose name holds a value is dropped, as a header would be",
			resp: &upstream{
				headers:  headers(":status", "200"),
				chunks:   []string{"ok"},
				trailers: headers(strings.ToLower(anthropicValue), "1", "x-sum", anthropicValue),
			},
			status:  200,
			headers: ":status: 200",
			body:    "ok",
			tr:      "x-sum: " + scrubbedAnthropic,
			logs:    []string{ok},
		},
		{
			name:    "the router's own answer to a forwarded request is logged with its status",
			resp:    &upstream{headers: headers(":status", "503", "content-length", "19", "content-type", "text/plain"), chunks: []string{"no healthy upstream"}},
			status:  503,
			headers: ":status: 503\ncontent-type: text/plain",
			body:    "no healthy upstream",
			logs:    []string{ok[:len(ok)-3] + "503"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			method := tc.method
			if method == "" {
				method = "POST"
			}
			o := exchange(t, cfg, anthropicRequest(method), tc.resp)
			if o.status != tc.status || o.reset != tc.reset {
				t.Errorf("got status %d reset %v, want %d %v", o.status, o.reset, tc.status, tc.reset)
			}
			wantHeaders := strings.ReplaceAll(tc.headers, "@LEN@", strconv.Itoa(len(tc.body)))
			if got := o.headers.String(); got != wantHeaders {
				t.Errorf("headers\n got:\n%s\nwant:\n%s", got, wantHeaders)
			}
			if tc.writes != nil {
				got := make([]string, len(o.writes))
				for i, w := range o.writes {
					got[i] = string(w)
				}
				if !equal(got, tc.writes) {
					t.Errorf("writes\n got %q\nwant %q", got, tc.writes)
				}
			} else if !tc.reset && o.body() != tc.body {
				t.Errorf("body\n got %q\nwant %q", o.body(), tc.body)
			}
			if tc.tr != "" {
				if o.trailers == nil || o.trailers.String() != tc.tr {
					t.Errorf("trailers\n got %v\nwant %s", o.trailers, tc.tr)
				}
			}
			if !equal(o.logs, tc.logs) {
				t.Errorf("logs\n got %q\nwant %q", o.logs, tc.logs)
			}
			for i, w := range o.writes {
				noSentinel(t, "write "+string(rune('0'+i)), string(w))
			}
			noSentinel(t, "the headers", o.headers.String())
			if o.trailers != nil {
				noSentinel(t, "the trailers", o.trailers.String())
			}
		})
	}
}

// TestEncodeTrailersAddData: the scrubber's held tail is added in
// EncodeTrailers with AddData (Envoy passes it on before the trailers).
func TestEncodeTrailersAddData(t *testing.T) {
	pd := newPod(t, testConfig())
	cfg := pd.route(t, pluginconf.RoleIntercept, anthropic)
	o := exchange(t, cfg, anthropicRequest("GET"), &upstream{
		headers:  headers(":status", "200"),
		chunks:   []string{"abc " + anthropicValue[:10]},
		trailers: headers("x-t", "1"),
	})
	if o.reset || o.body() != "abc "+anthropicValue[:10] {
		t.Fatalf("got\n%s", o.describe())
	}
	added := bytes.Join(o.cb.enc.added, nil)
	if len(o.cb.enc.added) != 1 || !bytes.HasSuffix(added, []byte(anthropicValue[:10])) {
		t.Errorf("AddData in EncodeTrailers got %q, want the held tail", o.cb.enc.added)
	}
}

// TestEncodeControl: the Orchestrator's answers are scrubbed too.
func TestEncodeControl(t *testing.T) {
	pd := newPod(t, testConfig())
	cfg := pd.route(t, pluginconf.RoleControl, "")
	o := exchange(t, cfg,
		headers(":method", "GET", ":authority", "127.0.0.1:8081", ":path", "/agents/a1/surface", "authorization", bearer(tokenStandIn)),
		&upstream{headers: headers(":status", "200", "x-debug", tokenValue, "content-length", "40"), chunks: []string{"echo " + tokenValue}})
	if o.status != 200 || o.body() != "echo [secret:JR2_SANDBOX_TOKEN]" || o.headers.String() != ":status: 200\nx-debug: [secret:JR2_SANDBOX_TOKEN]" {
		t.Errorf("got\n%s", o.describe())
	}
}

// TestEncodeEgress: a tunnel's bytes are not the filter's to read.
func TestEncodeEgress(t *testing.T) {
	pd := newPod(t, testConfig())
	cfg := pd.route(t, pluginconf.RoleEgress, "")
	raw := "\x16\x03\x01 tls bytes " + anthropicValue
	o := exchange(t, cfg, headers(":method", "CONNECT", ":authority", "example.org:443"),
		&upstream{headers: headers(":status", "200"), chunks: []string{raw}})
	if o.status != 200 || o.body() != raw || len(o.logs) != 0 { // the tunnel line is Envoy's access log's
		t.Errorf("got\n%s", o.describe())
	}
}

// TestDestroyWithoutResponse: a forwarded request whose stream ends before
// any response still gets its one action=intercept line, with status=0,
// and the body scrubber is released.
func TestDestroyWithoutResponse(t *testing.T) {
	pd := newPod(t, testConfig())
	cfg := pd.route(t, pluginconf.RoleIntercept, anthropic)
	logs.take()
	cb := newCallbacks()
	f := Factory(cfg, cb)
	if st := f.DecodeHeaders(anthropicRequest("GET"), true); st != api.Continue {
		t.Fatalf("DecodeHeaders: %d", st)
	}
	if st := f.EncodeHeaders(headers(":status", "200", "content-encoding", "gzip"), false); st != api.Continue {
		t.Fatalf("EncodeHeaders: %d", st)
	}
	s := f.(*goFilter).m
	if !s.Scrubbing() {
		t.Fatal("no body scrubber for a response with a body")
	}
	f.OnDestroy(api.Terminate)
	if s.Scrubbing() {
		t.Error("the body scrubber outlived the stream")
	}
	want := []string{interceptLine(anthropic, "ANTHROPIC_API_KEY", "GET")}
	if got := logs.take(); !equal(got, want) {
		t.Errorf("logs %q, want %q", got, want)
	}

	cb = newCallbacks()
	f = Factory(cfg, cb)
	f.DecodeHeaders(anthropicRequest("GET"), true)
	f.OnDestroy(api.Terminate)
	want = []string{strings.Replace(interceptLine(anthropic, "ANTHROPIC_API_KEY", "GET"), "status=200", "status=0", 1)}
	if got := logs.take(); !equal(got, want) {
		t.Errorf("logs %q, want %q", got, want)
	}
}
