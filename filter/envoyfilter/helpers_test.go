package envoyfilter

import (
	"encoding/base64"
	"testing"

	"jr2.dev/boundary/filter/stream/streamtest"
)

// The adapter's own tests (config, sentinels, fuzz, bench); its stream
// cases are the shared suite's (TestConformance).

const (
	anthropicStandIn = "jr2-held-ANTHROPIC_API_KEY"
	githubStandIn    = "jr2-held-GITHUB_TOKEN"
	tokenStandIn     = "jr2-held-JR2_SANDBOX_TOKEN"
)

func bearer(standIn string) string { return "Bearer " + standIn }

func basic(user, pass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}

func gzipped(t testing.TB, s string) string { return streamtest.Gzipped(t, s) }

func split(s string, n int) []string { return streamtest.Split(s, n) }

func anthropicRequest(method string) *fakeHeaders {
	return headers(":method", method, ":authority", "api.anthropic.com", ":path", "/v1/messages", "x-api-key", anthropicStandIn)
}
