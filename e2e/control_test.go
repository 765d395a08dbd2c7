//go:build linux

package e2e

import (
	"fmt"
	"testing"

	"jr2.dev/boundary/internal/contract"
)

// testControl drives the control listener with each client (plain HTTP on
// loopback, which NO_PROXY sends direct): the four routes reach the fake
// Orchestrator with the token swapped in and every other credential
// removed, the answer comes back with the token scrubbed; anything else is
// 404 and a request without the token's stand-in 403, and neither reaches
// the Orchestrator.
func (w *world) testControl(t *testing.T) {
	o := w.orch
	token := w.values[contract.TokenName]
	bearer := "Bearer " + standIn(contract.TokenName)
	log := w.logOf(o.addr)
	base := "http://" + w.run.Control
	const notRoute = "not a route of the control listener; it serves GET /agents/{id}/surface, POST /agents/{id}/events, GET /agents/{id}/deliveries/{d} and POST /fetch"
	const noToken = "needs the stand-in of " + contract.TokenName + " in authorization"

	for _, c := range clients {
		run(t, c.name, func(t *testing.T) {
			agent := c.name + "-a1"
			routes := []struct{ method, path, upstream, body string }{
				{"GET", "/agents/" + agent + "/surface", "/agents/" + agent + "/surface", ""},
				{"POST", "/agents/" + agent + "/events", "/agents/" + agent + "/events", `{"pick":"` + c.name + `"}`},
				{"GET", "/agents/" + agent + "/deliveries/d1", "/agents/" + agent + "/deliveries/d1", ""},
				{"POST", "/fetch", "/sandboxes/" + podName + "/fetch", "ask from " + c.name},
			}
			for _, r := range routes {
				resp := c.do(t, w.env, request{Method: r.method, URL: base + r.path, Body: r.body,
					Headers: [][2]string{{"authorization", bearer}, {"x-api-key", "leftover-credential"}}})
				got, _ := o.last()
				if got.URI != r.upstream || got.Method != r.method || got.Body != r.body {
					t.Fatalf("%s %s reached the Orchestrator as %s %s %q", r.method, r.path, got.Method, got.URI, got.Body)
				}
				if got.Header.Get("Authorization") != "Bearer "+token || got.Header.Get("X-Api-Key") != "" {
					t.Fatalf("%s %s: the Orchestrator got authorization %q, x-api-key %q", r.method, r.path,
						redact(got.Header.Get("Authorization"), token), got.Header.Get("X-Api-Key"))
				}
				want := fmt.Sprintf(`{"path":%q,"auth":"Bearer [secret:%s]","body":%q}`, r.upstream, contract.TokenName, r.body)
				if resp.Status != 200 || resp.Body != want {
					t.Fatalf("%s %s: %d %q, want 200 %q", r.method, r.path, resp.Status, resp.Body, want)
				}
				log.expect(t, lineFor("action", "intercept", "target", o.addr, "secret", contract.TokenName, "method", r.method, "status", "200"))
			}

			refused := []struct {
				method, path string
				headers      [][2]string
				status       int
				body, reason string
			}{
				{"GET", "/admin", [][2]string{{"authorization", bearer}}, 404, notRoute, "route"},
				{"POST", "/agents/" + agent + "/surface", [][2]string{{"authorization", bearer}}, 404, notRoute, "route"},
				{"GET", "/agents/" + agent + "/../../admin", [][2]string{{"authorization", bearer}}, 404, notRoute, "route"},
				{"GET", "/agents/" + agent + "/surface", nil, 403, noToken, "no-stand-in"},
				{"GET", "/agents/" + agent + "/surface", [][2]string{{"authorization", "Bearer " + standIn(keyName(c.name))}}, 403, noToken, "no-stand-in"},
			}
			for _, r := range refused {
				before := o.hits.Load()
				resp := c.do(t, w.env, request{Method: r.method, URL: base + r.path, Headers: r.headers})
				if want := "jr2 custodian: " + r.body; resp.Status != r.status || resp.Body != want {
					t.Errorf("%s %s: %d %q, want %d %q", r.method, r.path, resp.Status, resp.Body, r.status, want)
				}
				if n := o.hits.Load() - before; n != 0 {
					t.Errorf("%s %s reached the Orchestrator", r.method, r.path)
				}
				log.expect(t, lineFor("action", "refuse", "target", o.addr, "reason", r.reason))
			}
		})
	}
}
