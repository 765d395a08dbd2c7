//go:build linux

package run

import (
	"errors"
	"strings"
	"testing"

	"jr2.dev/boundary/custodian/internal/runtest"
	"jr2.dev/boundary/filter/standintest"
)

// TestStandInNeverSentTowardAnotherHost: inside a contained run whose
// policy allows the secret's host and another, curl sends the stand-in to
// the other host as a header name (as written, as Go's server rewrites it,
// in capitals), in a header value, the path, the query and as a bearer.
// Each is the engine's 403, reason stand-in, with the text every host
// answers; the upstream gets nothing; the bundle records each refusal and
// no allow of a request; the runner's lines hold no stand-in in any case.
//
// It pins a defect seen as a new user would meet it: the stand-in as a
// header name, in either case, was forwarded and recorded allow, while as
// a header value it was refused, because the mediator's own finder
// compared names case-sensitively after Go had rewritten them.
func TestStandInNeverSentTowardAnotherHost(t *testing.T) {
	requireRun(t, "curl", "sh")
	u := startUpstream(t)
	pol := writePolicy(t, []string{"api.example.com", "open.example.com"}, nil, nil,
		`EXAMPLE_TOKEN = { env = "EXAMPLE_TOKEN", hosts = ["api.example.com"] }`+"\n")
	const si = "jr2-held-EXAMPLE_TOKEN"
	var script strings.Builder
	var want strings.Builder
	for _, c := range append(standintest.Cases(si, "/v1/"), standintest.Unbound(si, "/v1/")...) {
		// The stand-in comes from the child's own environment where curl's
		// line spells it as the stand-in is written.
		path := strings.ReplaceAll(c.Path, si, "$EXAMPLE_TOKEN")
		script.WriteString(curlFlags + ` "https://open.example.com` + path + `"`)
		if c.Header.Name != "" {
			h := strings.ReplaceAll(c.Header.Name+": "+c.Header.Value, si, "$EXAMPLE_TOKEN")
			script.WriteString(` -H "` + h + `"`)
		}
		script.WriteString("; echo\n")
		want.WriteString(standintest.Body("EXAMPLE_TOKEN", c.Place) + "\n")
	}
	res := containedWith(t, pol, u.addr, u.roots, []string{"PATH=/usr/bin:/bin", "EXAMPLE_TOKEN=" + sentinel}, func(o *Options) {
		o.Resolve = func(host string, port uint16) (string, error) {
			if (host == "api.example.com" || host == "open.example.com") && port == 443 {
				return u.addr, nil
			}
			return "", errors.New("no such test host")
		}
	}, "sh", "-c", script.String())
	if res.code != 0 || res.err != nil {
		t.Fatalf("exit %d, %v\nstderr: %s", res.code, res.err, res.stderr)
	}
	if res.stdout != want.String() {
		t.Errorf("curl printed\n%s\nwant\n%s", res.stdout, want.String())
	}
	if got := u.received(); len(got) != 0 {
		t.Errorf("a stand-in went upstream: %q", got)
	}
	n := strings.Count(want.String(), "\n")
	if got := len(runtest.Find(res.records, "egress-decision", runtest.Rec{"host": "open.example.com", "decision": "deny", "rule": "engine", "reason": standintest.Reason, "status": standintest.Status})); got != n {
		t.Errorf("%d stand-in refusals recorded, want %d", got, n)
	}
	if got := len(runtest.Find(res.records, "http-request", nil)); got != 0 {
		t.Errorf("%d http-request records: a refused request was sent", got)
	}
	if got := strings.Count(res.stderr, "jr2.custodian action=refuse target=open.example.com:443 reason=stand-in\n"); got != n {
		t.Errorf("%d refuse lines, want %d:\n%s", got, n, res.stderr)
	}
	if strings.Contains(strings.ToLower(res.stderr), "jr2-held-") {
		t.Errorf("the runner's output holds a stand-in:\n%s", res.stderr)
	}
	runtest.AssertNoValue(t, "the bundle", res.raw, sentinel)
	runtest.AssertNoValue(t, "the child's and the runner's output", []byte(res.stdout+res.stderr), sentinel)
}
