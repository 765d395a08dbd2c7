package streamtest

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/filter/pluginconf"
	"jr2.dev/boundary/internal/contract"
	"jr2.dev/boundary/internal/testkit/testpki"
)

// The OAuth pod: the suite's pod and two client-credentials secrets bound
// to OAuthTarget, OAUTH in x-api-key (its client accepted) and BADAUTH in
// x-bad-key (its client secret refused), both minting from a token
// endpoint of the suite's own over TLS.
const (
	OAuthTarget      = "oauth.example:443"
	OAuthSecret      = "cs-STREAMTEST-oauth-Wq7Zr2Tn8Ks4Lp"
	oauthWrongSecret = "cs-STREAMTEST-wrong-Hq4Xv8Nt2Lm6Kp"
	oauthTokenStart  = "at-STREAMTEST-oauth-"
)

// roots holds, by value directory, the PEM of the token endpoint's CA that
// Prepare writes beside a pod's custodian.json.
var roots sync.Map

// Prepare writes, into dir (where a driver writes c's custodian.json),
// what a rendered directory holds beside it that c needs: for the OAuth
// pod, ca/upstream.crt, the roots its token endpoint is verified against.
// A driver calls it for every config; for any other it writes nothing.
func Prepare(t testing.TB, c filter.Config, dir string) {
	t.Helper()
	pem, ok := roots.Load(c.ValuesDir)
	if !ok {
		return
	}
	if err := os.MkdirAll(filepath.Join(dir, "ca"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ca", "upstream.crt"), pem.([]byte), 0o644); err != nil {
		t.Fatal(err)
	}
}

// OAuth is an OAuth secret through an adapter: the engine's minter (Go's
// side, on a goroutine of its own) gets OAUTH's token through the
// transport the shared config gives it, and a stream that begins after
// carries the token upstream in place of the stand-in, its echo scrubbed;
// the endpoint is asked once. BADAUTH's request is the engine's 502 naming
// the secret and the endpoint's OAuth error code, never its description.
// The adapter only reads the engine pointer when a stream begins.
func OAuth(t *testing.T, d Driver) {
	ca := testpki.NewCA(t, "streamtest token endpoint CA")
	var good atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		id, secret, _ := r.BasicAuth()
		secret, _ = url.QueryUnescape(secret)
		if r.ParseForm() != nil || r.PostForm.Get("grant_type") != "client_credentials" || id != "st-client" || secret != OAuthSecret {
			w.WriteHeader(401)
			json.NewEncoder(w).Encode(map[string]string{"error": "invalid_client", "error_description": "you sent " + secret})
			return
		}
		n := good.Add(1)
		json.NewEncoder(w).Encode(map[string]any{"access_token": fmt.Sprintf("%s%d-Zk3Qw9Rt5Vx1Lm7P", oauthTokenStart, n), "token_type": "Bearer", "expires_in": 3600})
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Leaf(t, "127.0.0.1").TLS}}
	srv.StartTLS()
	t.Cleanup(srv.Close)

	dir := t.TempDir()
	c := Config(t, dir)
	c.LocalTargets = true // the endpoint listens on loopback
	for f, v := range map[string]string{"OAUTH.client-id": "st-client", "OAUTH.client-secret": OAuthSecret, "BADAUTH.client-id": "st-client", "BADAUTH.client-secret": oauthWrongSecret} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	o := &filter.OAuthConfig{Grant: filter.GrantClientCredentials, TokenURL: srv.URL + "/token"}
	c.Secrets = append(c.Secrets,
		filter.SecretConfig{Name: "OAUTH", StandIn: contract.StandIn("OAUTH"), Targets: []string{OAuthTarget}, Headers: []string{"x-api-key"}, OAuth: o},
		filter.SecretConfig{Name: "BADAUTH", StandIn: contract.StandIn("BADAUTH"), Targets: []string{OAuthTarget}, Headers: []string{"x-bad-key"}, OAuth: o})
	roots.Store(dir, ca.CertPEM)
	pod := d.Pod(t, c)

	req := H(":method", "GET", ":path", "/v1/x", ":authority", "oauth.example", ":scheme", "https", "x-api-key", contract.StandIn("OAUTH"))
	token := oauthTokenStart + "1-Zk3Qw9Rt5Vx1Lm7P"
	// Poll with new streams until one carries the token (before it, each
	// is the engine's 503); the bound only stops a hung test.
	var e Exchange
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		e = exchange(t, pod.Stream(t, pluginconf.RoleIntercept, OAuthTarget), req, &Answer{Status: "200", Headers: H("content-type", "text/plain"), Chunks: []string{"you sent " + token}})
		if e.Local == nil {
			break
		}
		if e.Local.Status != 503 || e.Local.Body != "jr2 custodian: the access token of OAUTH is not minted yet; try again shortly" {
			t.Fatalf("before the token: %+v", e.Local)
		}
	}
	if got := get(e.Forwarded, "x-api-key"); got != token {
		t.Fatalf("x-api-key upstream %q, want the token", got)
	}
	if e.Status != 200 || e.Body() != "you sent [secret:OAUTH]" {
		t.Errorf("the echo: %d %q", e.Status, e.Body())
	}
	if n := good.Load(); n != 1 {
		t.Errorf("%d tokens issued, want 1", n)
	}

	bad := H(":method", "GET", ":path", "/v1/x", ":authority", "oauth.example", ":scheme", "https", "x-bad-key", contract.StandIn("BADAUTH"))
	want := "jr2 custodian: the token endpoint of BADAUTH refused the credentials: invalid_client"
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if e = exchange(t, pod.Stream(t, pluginconf.RoleIntercept, OAuthTarget), bad, nil); e.Local == nil || e.Local.Status != 503 {
			break
		}
	}
	if e.Local == nil || e.Local.Status != 502 || e.Local.Body != want || e.Forwarded != nil {
		t.Fatalf("BADAUTH: %+v, want 502 %q", e.Local, want)
	}
	for _, l := range e.Logs {
		if strings.Contains(l, oauthWrongSecret) || strings.Contains(l, oauthTokenStart) {
			t.Errorf("a line holds the client secret or a token: %q", l)
		}
	}
}
