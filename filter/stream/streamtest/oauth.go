package streamtest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
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

// The rotating pod's parts: ROTATE (refresh-token grant, in x-rot-key)
// and SAKEY (a service-account key, in x-sa-key), minting from the same
// endpoint, which rotates ROTATE's refresh token with each token. Every
// part but the client id is a sentinel an upstream echoes.
const (
	rotateSecret  = "cs-STREAMTEST-rotate-Pk5Mn3Bv7Cx9Zq"
	rotateRefresh = "rt-STREAMTEST-file-Lh6Gf4Ds2Aq8Wz"
	rotateNext    = "rt-STREAMTEST-rotated-Yu1Ti3Or5Ep7Nb"
	rotateToken   = "at-STREAMTEST-rotate-Jm2Kn4Lb6Vc8Xz"
	saToken       = "at-STREAMTEST-sakey-Qa1Ws3Ed5Rf7Tg"
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
	srv.Config.Handler = rotatingEndpoint(srv.Config.Handler)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Leaf(t, "127.0.0.1").TLS}}
	srv.StartTLS()
	t.Cleanup(srv.Close)

	dir := t.TempDir()
	c := Config(t, dir)
	c.LocalTargets = true // the endpoint listens on loopback
	saKey, saPrivate := serviceAccountKey(t)
	for f, v := range map[string]string{"OAUTH.client-id": "st-client", "OAUTH.client-secret": OAuthSecret, "BADAUTH.client-id": "st-client", "BADAUTH.client-secret": oauthWrongSecret,
		"ROTATE.client-id": "st-rotate", "ROTATE.client-secret": rotateSecret, "ROTATE.refresh-token": rotateRefresh, "SAKEY.key.json": saKey} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	o := &filter.OAuthConfig{Grant: filter.GrantClientCredentials, TokenURL: srv.URL + "/token"}
	c.Secrets = append(c.Secrets,
		filter.SecretConfig{Name: "OAUTH", StandIn: contract.StandIn("OAUTH"), Targets: []string{OAuthTarget}, Headers: []string{"x-api-key"}, OAuth: o},
		filter.SecretConfig{Name: "BADAUTH", StandIn: contract.StandIn("BADAUTH"), Targets: []string{OAuthTarget}, Headers: []string{"x-bad-key"}, OAuth: o},
		filter.SecretConfig{Name: "ROTATE", StandIn: contract.StandIn("ROTATE"), Targets: []string{OAuthTarget}, Headers: []string{"x-rot-key"},
			OAuth: &filter.OAuthConfig{Grant: filter.GrantRefreshToken, TokenURL: o.TokenURL}},
		filter.SecretConfig{Name: "SAKEY", StandIn: contract.StandIn("SAKEY"), Targets: []string{OAuthTarget}, Headers: []string{"x-sa-key"},
			OAuth: &filter.OAuthConfig{Grant: filter.GrantServiceAccount, TokenURL: o.TokenURL}})
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

	rotatedParts(t, pod, saPrivate)

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

// rotatingEndpoint answers ROTATE's refresh-token grant (its file's
// refresh token or the one it rotated to; each token comes with a new
// refresh token, as a rotating endpoint's does) and SAKEY's JWT bearer
// grant; next takes every other request.
func rotatingEndpoint(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ParseForm() != nil {
			w.WriteHeader(400)
			return
		}
		id, secret, _ := r.BasicAuth()
		secret, _ = url.QueryUnescape(secret)
		switch g := r.PostForm.Get("grant_type"); {
		case g == "refresh_token" && id == "st-rotate" && secret == rotateSecret &&
			(r.PostForm.Get("refresh_token") == rotateRefresh || r.PostForm.Get("refresh_token") == rotateNext):
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]any{"access_token": rotateToken, "token_type": "Bearer", "expires_in": 3600, "refresh_token": rotateNext})
		case g == "urn:ietf:params:oauth:grant-type:jwt-bearer" && r.PostForm.Get("assertion") != "":
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]any{"access_token": saToken, "token_type": "Bearer", "expires_in": 3600})
		case g == "refresh_token" || strings.HasPrefix(g, "urn:"):
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(400)
			io.WriteString(w, `{"error":"invalid_grant"}`)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// serviceAccountKey is a Google service-account key file made in code,
// and its private key's PEM text.
func serviceAccountKey(t *testing.T) (file, private string) {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	private = string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	b, err := json.Marshal(map[string]string{"type": "service_account", "client_email": "st@streamtest.iam.gserviceaccount.com",
		"private_key_id": "st-key-1", "private_key": private})
	if err != nil {
		t.Fatal(err)
	}
	return string(b), private
}

// rotatedParts: once ROTATE's token is minted (the endpoint rotated its
// refresh token in the same answer) and SAKEY's, an upstream that echoes
// every part the engine holds for them — the client secret, the file's
// refresh token, the rotated one, both tokens, the service-account
// private key's text, raw and as its key file spells it — comes back
// with each replaced by its secret's label. The client id is public and
// not scrubbed (docs/custodian.md).
func rotatedParts(t *testing.T, pod Pod, saPrivate string) {
	t.Helper()
	escaped, _ := json.Marshal(saPrivate)
	echo := strings.Join([]string{rotateToken, rotateSecret, rotateRefresh, rotateNext, saToken, saPrivate, string(escaped)}, " ")
	sentinels := []string{rotateToken, rotateSecret, rotateRefresh, rotateNext, saToken, saPrivate}
	secrets := []struct{ name, header string }{{"ROTATE", "x-rot-key"}, {"SAKEY", "x-sa-key"}}
	reqOf := func(name, header string) []filter.Header {
		return H(":method", "GET", ":path", "/v1/parts", ":authority", "oauth.example", ":scheme", "https", header, contract.StandIn(name))
	}
	for _, c := range secrets { // both minted first: the echo is then of every part
		for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			if e := exchange(t, pod.Stream(t, pluginconf.RoleIntercept, OAuthTarget), reqOf(c.name, c.header), &Answer{Status: "200"}); e.Local == nil || e.Local.Status != 503 {
				break
			}
		}
	}
	for _, c := range secrets {
		e := exchange(t, pod.Stream(t, pluginconf.RoleIntercept, OAuthTarget), reqOf(c.name, c.header), &Answer{Status: "200", Headers: H("content-type", "text/plain"), Chunks: []string{echo}})
		if e.Local != nil {
			t.Fatalf("%s: %+v, want its token upstream", c.name, e.Local)
		}
		want := map[string]string{"ROTATE": rotateToken, "SAKEY": saToken}[c.name]
		if got := get(e.Forwarded, c.header); got != want {
			t.Fatalf("%s upstream %q, want the minted token", c.header, got)
		}
		body := e.Body()
		for _, v := range sentinels {
			if strings.Contains(body, v) {
				t.Errorf("%s: the echo holds a part the engine holds (%.24q…): %q", c.name, v, body)
			}
		}
		if !strings.Contains(body, `[secret:ROTATE] [secret:ROTATE] [secret:ROTATE] [secret:ROTATE] [secret:SAKEY] [secret:SAKEY] "[secret:SAKEY]"`) {
			t.Errorf("%s: the echo %q, want each part's label", c.name, body)
		}
		for _, l := range e.Logs {
			for _, v := range sentinels {
				if strings.Contains(l, v) {
					t.Errorf("a line holds a part: %q", l)
				}
			}
		}
	}
}
