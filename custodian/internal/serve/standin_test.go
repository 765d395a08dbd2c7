package serve

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"jr2.dev/boundary/filter/standintest"
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
	cases := standintest.Cases(keySI, "/v1/")
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
		if want := standintest.Body("KEY", c.Place); resp.StatusCode != standintest.Status || string(b) != want {
			t.Errorf("%s: %d %q\nwant %d %q", c.Name, resp.StatusCode, b, standintest.Status, want)
		}
		if strings.Contains(string(b), keyValue) {
			t.Errorf("%s: the answer holds the value", c.Name)
		}
	}
	if n := f.up.hits.Load(); n != 0 {
		t.Errorf("the upstream got %d refused requests", n)
	}
	line := "jr2.custodian action=refuse target=" + f.up.target + " reason=stand-in\n"
	waitLog(t, f.log, strings.Repeat(line, len(cases))) // one line each, one after another
	if strings.Contains(strings.ToLower(f.log.String()), "jr2-held-") {
		t.Errorf("a log line holds a stand-in:\n%s", f.log.String())
	}
}
