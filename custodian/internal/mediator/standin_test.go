package mediator

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"jr2.dev/boundary/custodian/internal/runtest"
	"jr2.dev/boundary/filter/standintest"
	"jr2.dev/boundary/internal/contract"
)

// keySentinel is the value of KEY, the placesPolicy's secret whose name
// holds no '_' (so that a header name holding its stand-in reaches rule
// 10 toward its bound host, not rule 2).
const keySentinel = "sk-sentinel-mediator-key-9f8e7d6c5b4a"

// placesPolicy binds KEY and EXAMPLE_TOKEN to api.example.com and allows
// two hosts no secret is bound to, over TLS and over plain HTTP.
const placesPolicy = `
allow_hosts = ["api.example.com", "open.example.com", "plain.example.com:80"]
[secrets]
KEY = { env = "KEY", hosts = ["api.example.com"], headers = ["x-api-key"] }
EXAMPLE_TOKEN = { env = "EXAMPLE_TOKEN", hosts = ["api.example.com"], headers = ["authorization"] }
`

// shapedPolicy is placesPolicy with KEY's stand-in shaped as an
// Anthropic key and EXAMPLE_TOKEN's as a GitHub token.
const shapedPolicy = `
allow_hosts = ["api.example.com", "open.example.com", "plain.example.com:80"]
[secrets]
KEY = { env = "KEY", hosts = ["api.example.com"], headers = ["x-api-key"], shape = "anthropic" }
EXAMPLE_TOKEN = { env = "EXAMPLE_TOKEN", hosts = ["api.example.com"], headers = ["authorization"], shape = "github" }
`

// TestStandInNeverSent holds the mediator to the shared table of rule 10's
// places (package standintest), with real HTTP through it, through the
// proxy and dialled directly: toward the bound api.example.com (beside the
// swap), and toward open.example.com (TLS) and plain.example.com (plain
// HTTP), which no secret is bound to. Each is the engine's 403, reason
// stand-in, with the same text custodian serve and Envoy answer; nothing
// reaches an upstream; the bundle records the engine's refusal; no log
// line holds a stand-in in any case, and nothing holds a value.
//
// It pins a defect: toward an allowed host with no secret, the mediator
// searched for stand-ins with a finder of its own that compared header
// names as Go's server had rewritten them (x-jr2-held-NAME arrives as
// X-Jr2-Held-Name), so a stand-in as a header name, in any case, was
// forwarded and recorded allow, while the engine folds case.
func TestStandInNeverSent(t *testing.T) {
	standInNeverSent(t, placesPolicy, contract.StandIn("KEY"), contract.StandIn("EXAMPLE_TOKEN"))
}

// TestShapedStandInNeverSent is TestStandInNeverSent with shaped
// stand-ins (a policy's shape): the mediator finds them in every place it
// finds plain ones, and logs neither.
func TestShapedStandInNeverSent(t *testing.T) {
	keySI, _ := contract.StandInOf("KEY", &contract.Shape{Kind: "anthropic"})
	tokSI, _ := contract.StandInOf("EXAMPLE_TOKEN", &contract.Shape{Kind: "github"})
	standInNeverSent(t, shapedPolicy, keySI, tokSI)
}

func standInNeverSent(t *testing.T, policy, keySI, tokSI string) {
	f := newFixtureOf(t, true, policy, "KEY="+keySentinel, "EXAMPLE_TOKEN="+sentinel)
	type sent struct {
		url    string
		via    bool
		swap   bool // the stand-in of KEY in x-api-key, the header it is bound to
		secret string
		c      standintest.Case
	}
	var all []sent
	names := map[string]string{keySI: "KEY", tokSI: "EXAMPLE_TOKEN"}
	for _, via := range []bool{true, false} {
		for _, c := range standintest.Cases(keySI, "/v1/") {
			all = append(all, sent{"https://api.example.com", via, true, "KEY", c})
		}
		for _, host := range []string{"https://open.example.com", "http://plain.example.com"} {
			for _, si := range []string{keySI, tokSI} {
				name := names[si]
				for _, c := range append(standintest.Cases(si, "/v1/"), standintest.Unbound(si, "/v1/")...) {
					all = append(all, sent{host, via, false, name, c})
				}
			}
		}
	}
	for _, s := range all {
		req, err := http.NewRequest("GET", s.url+s.c.Path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if s.swap {
			req.Header.Set("X-Api-Key", keySI)
		}
		if s.c.Header.Name != "" {
			req.Header[s.c.Header.Name] = []string{s.c.Header.Value} // written as spelled
		}
		resp, err := f.client(s.via).Do(req)
		if err != nil {
			t.Errorf("%s %s (proxy %v): %v", s.url, s.c.Name, s.via, err)
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := standintest.Body(s.secret, s.c.Place); resp.StatusCode != standintest.Status || string(b) != want {
			t.Errorf("%s, %s (proxy %v): %d %q\nwant %d %q", s.url, s.c.Name, s.via, resp.StatusCode, b, standintest.Status, want)
		}
		runtest.AssertNoValue(t, "the answer", b, sentinel)
		runtest.AssertNoValue(t, "the answer", b, keySentinel)
	}
	if got := append(f.tlsUp.received(), f.plainUp.received()...); len(got) != 0 {
		t.Errorf("a stand-in went upstream: %q", got)
	}
	rs := f.records(t)
	if n := len(runtest.Find(rs, "egress-decision", runtest.Rec{"decision": "deny", "rule": "engine", "reason": standintest.Reason, "status": standintest.Status})); n != len(all) {
		t.Errorf("%d engine denials with reason stand-in recorded, want %d", n, len(all))
	}
	if n := len(runtest.Find(rs, "egress-decision", runtest.Rec{"decision": "allow"})); n != len(all) {
		t.Errorf("%d connections allowed, want %d (one per request: no keep-alive)", n, len(all))
	}
	if n := len(runtest.Find(rs, "http-request", nil)); n != 0 {
		t.Errorf("%d http-request records: a refused request was sent", n)
	}
	logged := f.logged()
	for _, target := range []string{"api.example.com:443", "open.example.com:443", "plain.example.com:80"} {
		if !bytes.Contains(logged, []byte("jr2.custodian action=refuse target="+target+" reason=stand-in\n")) {
			t.Errorf("no stand-in refusal toward %s in the log:\n%s", target, logged)
		}
	}
	if n := bytes.Count(logged, []byte(" reason=stand-in\n")); n != len(all) {
		t.Errorf("%d stand-in lines, want %d", n, len(all))
	}
	if lo := bytes.ToLower(logged); bytes.Contains(lo, []byte(contract.StandInPrefix)) || bytes.Contains(lo, bytes.ToLower([]byte(contract.StandInMark))) {
		t.Errorf("a log line holds a stand-in:\n%s", logged)
	}
	for _, v := range []string{sentinel, keySentinel} {
		runtest.AssertNoValue(t, "the bundle", f.bundle.Bytes(), v)
		runtest.AssertNoValue(t, "the log", logged, v)
	}
	if t.Failed() {
		return
	}
	t.Logf("%d requests refused, none sent", len(all))
}
