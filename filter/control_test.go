package filter

import (
	"reflect"
	"strings"
	"testing"

	"jr2.dev/boundary/internal/contract"
)

func TestDecideControl(t *testing.T) {
	e := testEngine(t)
	tok := "Bearer " + contract.StandIn(contract.TokenName)
	const notRoute = "jr2 custodian: not a route of the control listener; it serves GET /agents/{id}/surface, POST /agents/{id}/events, GET /agents/{id}/deliveries/{d} and POST /fetch"
	const needs = "jr2 custodian: needs the stand-in of JR2_SANDBOX_TOKEN in authorization"
	cases := []struct {
		name   string
		req    Request
		status int
		body   string
		path   string
		read   bool
		remove []string
	}{
		{"surface", Request{"GET", "127.0.0.1:8081", "/agents/a-1/surface", hs("authorization", tok), ""}, 0, "", "/agents/a-1/surface", true, nil},
		{"events", Request{"POST", "127.0.0.1:8081", "/agents/a-1/events", hs("authorization", tok, "x-api-key", "k"), ""}, 0, "", "/agents/a-1/events", false, []string{"x-api-key"}},
		{"delivery with query", Request{"GET", "127.0.0.1:8081", "/agents/a-1/deliveries/d.2?wait=25", hs("Authorization", "bearer "+contract.StandIn(contract.TokenName)), ""}, 0, "", "/agents/a-1/deliveries/d.2?wait=25", true, nil},
		{"fetch", Request{"POST", "127.0.0.1:8081", "/fetch", hs("authorization", tok), ""}, 0, "", "/sandboxes/ws-7f3a/fetch", false, nil},
		{"range dropped", Request{"GET", "127.0.0.1:8081", "/agents/a-1/surface", hs("authorization", tok, "range", "bytes=0-3"), ""}, 0, "", "/agents/a-1/surface", true, []string{"range"}},
		{"unknown route", Request{"GET", "127.0.0.1:8081", "/agents", hs("authorization", tok), ""}, 404, notRoute, "", false, nil},
		{"wrong method", Request{"GET", "127.0.0.1:8081", "/agents/a/events", hs("authorization", tok), ""}, 404, notRoute, "", false, nil},
		{"extra segment", Request{"GET", "127.0.0.1:8081", "/agents/a/surface/x", hs("authorization", tok), ""}, 404, notRoute, "", false, nil},
		{"dot id", Request{"GET", "127.0.0.1:8081", "/agents/../surface", hs("authorization", tok), ""}, 404, notRoute, "", false, nil},
		{"encoded id", Request{"GET", "127.0.0.1:8081", "/agents/a%2fb/surface", hs("authorization", tok), ""}, 404, notRoute, "", false, nil},
		{"orchestrator path", Request{"GET", "127.0.0.1:8081", "/sandboxes/ws-7f3a/fetch", hs("authorization", tok), ""}, 404, notRoute, "", false, nil},
		{"404 before 403", Request{"GET", "127.0.0.1:8081", "/admin", nil, ""}, 404, notRoute, "", false, nil},
		{"no bearer", Request{"GET", "127.0.0.1:8081", "/agents/a/surface", nil, ""}, 403, needs, "", false, nil},
		{"real token", Request{"GET", "127.0.0.1:8081", "/agents/a/surface", hs("authorization", "Bearer "+tokenValue), ""}, 403, needs, "", false, nil},
		{"other stand-in", Request{"GET", "127.0.0.1:8081", "/agents/a/surface", hs("authorization", "Bearer "+ghSI), ""}, 403, needs, "", false, nil},
		{"bare stand-in", Request{"GET", "127.0.0.1:8081", "/agents/a/surface", hs("authorization", contract.StandIn(contract.TokenName)), ""}, 403, needs, "", false, nil},
		{"twice", Request{"GET", "127.0.0.1:8081", "/agents/a/surface", hs("authorization", tok, "authorization", tok), ""}, 400,
			"jr2 custodian: header authorization was sent more than once; send it once", "", false, nil},
		{"twice, joined by a proxy", Request{"GET", "127.0.0.1:8081", "/agents/a/surface", hs("authorization", tok+","+tok), ""}, 400,
			"jr2 custodian: header authorization was sent more than once; send it once", "", false, nil},
		{"fragment", Request{"GET", "127.0.0.1:8081", "/agents/a/surface#x", hs("authorization", tok), ""}, 404, notRoute, "", false, nil},
		{"fragment in the query", Request{"GET", "127.0.0.1:8081", "/agents/a/surface?a#x", hs("authorization", tok), ""}, 404, notRoute, "", false, nil},
		{"underscore", Request{"GET", "127.0.0.1:8081", "/agents/a/surface", hs("authorization", tok, "x_y", "1"), ""}, 400,
			`jr2 custodian: header x_y has "_" in its name; header names here use "-"`, "", false, nil},
		{"stand-in elsewhere", Request{"GET", "127.0.0.1:8081", "/agents/a/surface?k=" + anthSI, hs("authorization", tok), ""}, 403,
			"jr2 custodian: the stand-in of ANTHROPIC_API_KEY is in the query; a stand-in rides only a header its secret is bound to, and is never sent upstream", "", false, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := e.DecideControl(&c.req)
			if c.status != 0 {
				if d.Reply == nil || d.Reply.Status != c.status || d.Reply.Body != c.body {
					t.Fatalf("got %+v, want %d %q", d.Reply, c.status, c.body)
				}
				noSentinel(t, "reply", d.Reply.Body)
				return
			}
			if d.Reply != nil {
				t.Fatalf("refused: %d %s", d.Reply.Status, d.Reply.Body)
			}
			if d.Path != c.path || d.Read != c.read || d.Target != "jr2-orchestrator.jr2.svc:4000" {
				t.Fatalf("path %q read %v target %s", d.Path, d.Read, d.Target)
			}
			scheme, _, _ := strings.Cut(c.req.Headers[0].Value, " ")
			wantSet := hs("authorization", scheme+" "+tokenValue, "accept-encoding", "identity")
			if !reflect.DeepEqual(d.Set, wantSet) {
				t.Fatalf("set %v", d.Set)
			}
			if !reflect.DeepEqual(d.Remove, c.remove) {
				t.Fatalf("remove %v, want %v", d.Remove, c.remove)
			}
			noSentinel(t, "log", strings.Join(d.LogFields(200), " "))
		})
	}
}

func TestControlFetchWithoutSandbox(t *testing.T) {
	c := testConfig()
	c.Sandbox = ""
	e, err := New(c, testValues())
	if err != nil {
		t.Fatal(err)
	}
	d := e.DecideControl(&Request{"POST", "127.0.0.1:8081", "/fetch", hs("authorization", "Bearer "+contract.StandIn(contract.TokenName)), ""})
	if d.Reply == nil || d.Reply.Status != 404 || d.Reply.Body != "jr2 custodian: POST /fetch is not served here: this pod has no Sandbox" {
		t.Fatalf("got %+v", d.Reply)
	}
}
