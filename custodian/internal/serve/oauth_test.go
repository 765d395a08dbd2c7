package serve

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/internal/contract"
	"jr2.dev/boundary/internal/testkit/testpki"
)

// The sentinels of TestOAuth: the client secret, and every token the
// endpoint issues, appear in no answer and no log line.
const (
	oauthSecret     = "cs-SENTINEL-serve-Wq7Zr2Tn8Ks4Lp"
	oauthWrong      = "cs-WRONG-serve-Hq4Xv8Nt2Lm6Kp3R"
	oauthTokenStart = "at-SENTINEL-serve-"
)

// tokenServer is a client-credentials token endpoint of the test's own
// over TLS with a leaf of the upstream CA (so custodian serve trusts it as
// any upstream): the client authenticates by Basic; any other request is
// invalid_client, its description echoing what was sent.
func tokenServer(t *testing.T, uca *testpki.CA, hits *atomic.Int64) *httptest.Server {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		id, secret, _ := r.BasicAuth()
		if r.ParseForm() != nil || r.PostForm.Get("grant_type") != "client_credentials" || id != "serve-client" || secret != oauthSecret {
			w.WriteHeader(400)
			json.NewEncoder(w).Encode(map[string]string{"error": "invalid_client", "error_description": "you sent " + secret})
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"access_token": fmt.Sprintf("%s%d-Zk3Qw9Rt5Vx1Lm7P", oauthTokenStart, n), "token_type": "Bearer", "expires_in": 3600})
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{uca.Leaf(t, "127.0.0.1").TLS}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// oauthFixture is a custodian serve holding API, a client-credentials
// secret bound to the upstream in authorization, whose client secret is
// secret.
func oauthFixture(t *testing.T, secret string, hits *atomic.Int64) *fixture {
	return newFixtureHeld(t, nil, nil, func(uca *testpki.CA) ([]filter.SecretConfig, map[string]string) {
		ts := tokenServer(t, uca, hits)
		return []filter.SecretConfig{{Name: "API", StandIn: contract.StandIn("API"), Headers: []string{"authorization"},
				OAuth: &filter.OAuthConfig{Grant: filter.GrantClientCredentials, TokenURL: ts.URL + "/token"}}},
			map[string]string{"API.client-id": "serve-client", "API.client-secret": secret}
	})
}

func (f *fixture) bearer(t *testing.T) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", "https://"+f.up.target+"/v1/x", nil)
	must(t, err)
	req.Header.Set("Authorization", "Bearer "+contract.StandIn("API"))
	resp, err := f.client().Do(req)
	must(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestOAuth: custodian serve mints API's token through its own transport
// (the dial guard, the upstream roots), swaps it for "Bearer <stand-in>"
// toward the bound upstream, and scrubs it from the answer that echoes it;
// the endpoint is asked once; neither the token nor the client secret is in
// an answer or a log line.
func TestOAuth(t *testing.T) {
	var hits atomic.Int64
	f := oauthFixture(t, oauthSecret, &hits)
	waitLog(t, f.log, "jr2.custodian action=mint result=ok secret=API\n")
	status, body := f.bearer(t)
	f.up.mu.Lock()
	got := f.up.lastReq.Header.Get("Authorization")
	f.up.mu.Unlock()
	if status != 200 || got != "Bearer "+oauthTokenStart+"1-Zk3Qw9Rt5Vx1Lm7P" {
		t.Fatalf("%d, upstream authorization %q", status, got)
	}
	if !strings.Contains(body, `"Bearer [secret:API]"`) || strings.Contains(body, oauthTokenStart) {
		t.Errorf("the echo is not scrubbed: %s", body)
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("%d token requests, want 1", n)
	}
	if l := f.log.String(); strings.Contains(l, oauthTokenStart) || strings.Contains(l, oauthSecret) {
		t.Errorf("a log line holds the token or the client secret:\n%s", l)
	}
}

// TestOAuthRefused: a token endpoint that refuses the client is custodian
// serve's 502, the engine's text naming the secret and the OAuth error
// code, never the endpoint's description (which echoed the secret sent);
// nothing reaches the upstream.
func TestOAuthRefused(t *testing.T) {
	var hits atomic.Int64
	f := oauthFixture(t, oauthWrong, &hits)
	waitLog(t, f.log, "jr2.custodian action=mint result=refused secret=API reason=token-refused\n")
	status, body := f.bearer(t)
	if want := "jr2 custodian: the token endpoint of API refused the credentials: invalid_client"; status != 502 || body != want {
		t.Errorf("%d %q, want 502 %q", status, body, want)
	}
	if n := f.up.hits.Load(); n != 0 {
		t.Errorf("the upstream got %d requests", n)
	}
	waitLog(t, f.log, "jr2.custodian action=refuse target="+f.up.target+" reason=token-refused\n")
	if l := f.log.String(); strings.Contains(l, oauthWrong) {
		t.Errorf("a log line holds the client secret:\n%s", l)
	}
}
