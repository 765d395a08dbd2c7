package envoyfilter

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/filter/pluginconf"
)

// TestSentinel: with held values that upstreams echo everywhere and an
// agent that spells them wherever it can, no value reaches a log line, a
// local reply, an error or what the agent receives, and no stand-in
// reaches a log line or an intercepted request's upstream.
func TestSentinel(t *testing.T) {
	c := testConfig()
	c.Secrets = append(c.Secrets, filter.SecretConfig{
		Name: "HEX_TOKEN", StandIn: filter.StandIn("HEX_TOKEN"), Targets: []string{"a.example:443"}, Headers: []string{"x-k"},
	})
	pd := newPod(t, c)
	intercept := pd.route(t, pluginconf.RoleIntercept, anthropic)
	control := pd.route(t, pluginconf.RoleControl, "")
	egress := pd.route(t, pluginconf.RoleEgress, "")
	echo := func(chunks ...string) *upstream {
		return &upstream{
			headers:  headers(":status", "200", "x-echo", anthropicValue, "www-authenticate", "Bearer "+tokenValue, "x-hex", hexValue),
			chunks:   chunks,
			trailers: headers("x-trailer", githubValue+" "+hexValue),
		}
	}
	every := strings.Join(sentinels, " | ")

	for _, tc := range []struct {
		name string
		cfg  interface{}
		req  *fakeHeaders
		resp *upstream
	}{
		{"the agent sends a value instead of the stand-in", intercept,
			headers(":method", "GET", ":authority", "api.anthropic.com", ":path", "/v1/x", "x-api-key", anthropicValue), nil},
		{"the agent sends a value in another credential header", intercept,
			headers(":method", "GET", ":authority", "api.anthropic.com", ":path", "/v1/x", "x-api-key", anthropicStandIn, "authorization", "Bearer "+githubValue), echo(every)},
		{"a value in the query, echoed back", intercept,
			headers(":method", "GET", ":authority", "api.anthropic.com", ":path", "/v1/x?k="+hexValue, "x-api-key", anthropicStandIn), echo("you asked for k="+hexValue, " and "+every)},
		{"values cut across chunks", intercept, anthropicRequest("POST"),
			echo(split(every+every, 7)...)},
		{"values in a gzip body", intercept, anthropicRequest("POST"),
			&upstream{headers: headers(":status", "200", "content-encoding", "gzip"), chunks: split(gzipped(t, every), 3)}},
		{"values in a br body", intercept, anthropicRequest("POST"),
			&upstream{headers: headers(":status", "200", "content-encoding", "br", "x-echo", anthropicValue), chunks: []string{every}}},
		{"values in a broken gzip body", intercept, anthropicRequest("POST"),
			&upstream{headers: headers(":status", "200", "content-encoding", "gzip"), chunks: []string{every}}},
		{"a value in a refused path", intercept,
			headers(":method", "GET", ":authority", "api.anthropic.com", ":path", "/v2/"+anthropicValue, "x-api-key", anthropicStandIn), nil},
		{"a value in a refused method", intercept,
			headers(":method", strings.ToUpper(hexValue), ":authority", "api.anthropic.com", ":path", "/v1/", "x-api-key", anthropicStandIn), nil},
		{"a value in a header name", intercept,
			headers(":method", "GET", ":authority", "api.anthropic.com", ":path", "/v1/", "x-api-key", anthropicStandIn, hexValue+"_x", "1"), nil},
		{"a value as the control bearer", control,
			headers(":method", "GET", ":authority", "127.0.0.1:8081", ":path", "/agents/a/surface", "authorization", "Bearer "+tokenValue), nil},
		{"the Orchestrator echoes the token", control,
			headers(":method", "GET", ":authority", "127.0.0.1:8081", ":path", "/agents/a/surface", "authorization", bearer(tokenStandIn)), echo(every)},
		{"a value spelled as a tunnel's host", egress,
			headers(":method", "CONNECT", ":authority", hexValue+".evil.example:443"), nil},
		{"a value spelled as a guarded host", egress,
			headers(":method", "CONNECT", ":authority", hexValue+".localhost:443"), nil},
		{"a stand-in spelled as a tunnel's host", egress,
			headers(":method", "CONNECT", ":authority", "jr2-held-HEX_TOKEN.evil.example:443"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := exchange(t, tc.cfg, tc.req.clone(), tc.resp)
			for _, l := range o.logs {
				noSentinel(t, "a log line", l)
				noStandIn(t, "a log line", l)
			}
			if o.local != nil {
				noSentinel(t, "a local reply", o.local.body+" "+o.local.details)
				for k, vs := range o.local.headers {
					noSentinel(t, "a local reply header", k+": "+strings.Join(vs, ","))
				}
			}
			noSentinel(t, "the headers the agent got", o.headers.String())
			noSentinel(t, "the body the agent got", o.body())
			if o.trailers != nil {
				noSentinel(t, "the trailers the agent got", o.trailers.String())
			}
			// A tunnel's target is the agent's to spell; a stand-in there
			// is logged redacted and tunneled like any other name.
			if o.upstreamReq != nil && tc.cfg != egress {
				for k, vs := range o.upstreamReq.m {
					noStandIn(t, "the upstream request", k+": "+strings.Join(vs, ","))
				}
			}
		})
	}

	t.Run("config errors", func(t *testing.T) {
		dir := t.TempDir()
		for name, v := range map[string]string{
			"ANTHROPIC_API_KEY": anthropicValue + "\x7f",
			"GITHUB_TOKEN":      githubValue + "\n\n",
			"HEX_TOKEN":         hexValue + "\x00" + hexValue,
		} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		for _, name := range []string{"ANTHROPIC_API_KEY", "GITHUB_TOKEN", "HEX_TOKEN"} {
			one := testConfig()
			one.Secrets = []filter.SecretConfig{{Name: name, StandIn: filter.StandIn(name), Targets: []string{"a.example:443"}, Headers: []string{"x-k"}}}
			one.ValuesDir = dir
			b := writeEngine(t, one)
			_, err := NewParser().Parse(stringAny(t, b), nil)
			if err == nil {
				t.Fatalf("%s: a broken value was accepted", name)
			}
			noSentinel(t, "a config error", err.Error())
		}
		for _, l := range logs.take() {
			noSentinel(t, "a log line", l)
		}
	})
}
