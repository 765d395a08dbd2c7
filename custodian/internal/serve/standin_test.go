package serve

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/filter/standintest"
	"jr2.dev/boundary/internal/contract"
	"jr2.dev/boundary/internal/testkit/testpki"
)

// TestStandInPlaces holds custodian serve to the shared table of rule 10's
// places (package standintest), with real HTTP through its egress listener
// toward the bound target, beside the swap: Go's client writes each header
// name as spelled and Go's server canonicalises it, so the header-name
// places reach the engine rewritten. Each is the engine's 403, reason
// stand-in, with the text every host answers; nothing reaches the upstream;
// each is one refuse line, and no line holds a stand-in (the fixture's
// cleanup checks every line in any case).
func TestStandInPlaces(t *testing.T) {
	f := newFixture(t, nil)
	cases := sendPlaces(t, f, "KEY", keySI)
	if n := f.up.hits.Load(); n != 0 {
		t.Errorf("the upstream got %d refused requests", n)
	}
	line := "jr2.custodian action=refuse target=" + f.up.target + " reason=stand-in\n"
	waitLog(t, f.log, strings.Repeat(line, len(cases))) // one line each, one after another
	if strings.Contains(strings.ToLower(f.log.String()), "jr2-held-") {
		t.Errorf("a log line holds a stand-in:\n%s", f.log.String())
	}
}

// shapedValue is SHAPED's value in TestShapedStandIn.
const shapedValue = "sk-shaped-SERVETEST-Lm4Qz8Rt2Wv6Kx"

// TestShapedStandIn: a stand-in shaped as an Anthropic key, held beside
// KEY and bound to the upstream in authorization, swaps through custodian
// serve as "Bearer <stand-in>" and is refused in every place of the shared
// table (beside KEY's swap) with the text every host answers; nothing
// refused reaches the upstream, and no log line holds the stand-in, its
// mark or the value.
func TestShapedStandIn(t *testing.T) {
	sh := &contract.Shape{Kind: "anthropic"}
	si, err := contract.StandInOf("SHAPED", sh)
	must(t, err)
	f := newFixtureHeld(t, nil, nil, func(*testpki.CA) ([]filter.SecretConfig, map[string]string) {
		return []filter.SecretConfig{{Name: "SHAPED", StandIn: si, Shape: sh, Headers: []string{"authorization"}, Paths: []string{"/v1/"}}}, map[string]string{"SHAPED": shapedValue}
	})

	req, err := http.NewRequest("GET", "https://"+f.up.target+"/v1/x", nil)
	must(t, err)
	req.Header.Set("Authorization", "Bearer "+si)
	resp, err := f.client().Do(req)
	must(t, err)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	f.up.mu.Lock()
	got := f.up.lastReq.Header.Get("Authorization")
	f.up.mu.Unlock()
	if resp.StatusCode != 200 || got != "Bearer "+shapedValue {
		t.Fatalf("swap: %d, upstream authorization %q", resp.StatusCode, got)
	}
	hits := f.up.hits.Load()

	cases := sendPlaces(t, f, "SHAPED", si)
	if n := f.up.hits.Load() - hits; n != 0 {
		t.Errorf("the upstream got %d refused requests", n)
	}
	line := "jr2.custodian action=refuse target=" + f.up.target + " reason=stand-in\n"
	waitLog(t, f.log, strings.Repeat(line, len(cases)))
	lo := strings.ToLower(f.log.String())
	if strings.Contains(lo, strings.ToLower(contract.StandInMark)) || strings.Contains(f.log.String(), shapedValue) {
		t.Errorf("a log line holds the shaped stand-in or its value:\n%s", f.log.String())
	}
}

// sendPlaces sends the shared table's places of secret's stand-in si
// through f's egress listener toward the upstream, beside KEY's swap, and
// checks each answer: the engine's 403 with the text every host answers,
// no value in it. It returns the cases sent.
func sendPlaces(t *testing.T, f *fixture, secret, si string) []standintest.Case {
	t.Helper()
	cases := standintest.Cases(si, "/v1/")
	for _, c := range cases {
		req, err := http.NewRequest("GET", "https://"+f.up.target+c.Path, nil)
		must(t, err)
		req.Header.Set("X-Api-Key", keySI)
		if c.Header.Name != "" {
			req.Header[c.Header.Name] = []string{c.Header.Value} // written as spelled
		}
		resp, err := f.client().Do(req)
		if err != nil {
			t.Errorf("%s: %v", c.Name, err)
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := standintest.Body(secret, c.Place); resp.StatusCode != standintest.Status || string(b) != want {
			t.Errorf("%s: %d %q\nwant %d %q", c.Name, resp.StatusCode, b, standintest.Status, want)
		}
		if strings.Contains(string(b), keyValue) || strings.Contains(string(b), shapedValue) {
			t.Errorf("%s: the answer holds a value", c.Name)
		}
	}
	return cases
}
