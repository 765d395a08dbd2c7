//go:build linux

package e2e

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/filter/scrub"
	"jr2.dev/boundary/internal/contract"
	"jr2.dev/boundary/internal/testkit/oauthtest"
	"jr2.dev/boundary/internal/testkit/testpki"
)

// TestOAuth runs an OAuth secret through each host (custodian serve, and
// core Envoy with the dynamic module), rendered from a manifest's oauth:
// API_TOKEN, a client-credentials secret whose token endpoint is the
// test's own over TLS (its leaf of the upstream CA, so it is trusted as
// any upstream, through the host's dial guard), and BAD_TOKEN, whose client
// secret the endpoint refuses. The host asks the endpoint once for
// API_TOKEN, swaps the token for "Bearer <stand-in>" toward the bound
// upstream and scrubs it from the echo; BAD_TOKEN's request is the engine's
// 502 naming the secret and the OAuth error code, never the endpoint's
// description. The client secrets, the token and the description appear
// in no line the host printed, no answer, and not in its argv.
func TestOAuth(t *testing.T) {
	for _, host := range hostsToRun(t) {
		t.Run(host.Name(), func(t *testing.T) { testOAuth(t, host) })
	}
}

// oauthEndpoint is the test's token endpoint: client-credentials for
// e2e-client with secret, and the JWT bearer grant of the service account
// whose public key is pub (the assertion's RS256 signature verified with
// it, its iss, aud — Google's token endpoint, as google-auth writes it,
// whatever URL the endpoint has — and scope checked), both for scope
// "read".
type oauthEndpoint struct {
	secret string // the client secret it accepts
	pub    *rsa.PublicKey
	url    string // its own token URL
	good   atomic.Int64
	mu     sync.Mutex
	issued []string
	echoed string // the description it answers a refusal with
}

// saEmail is the test's service account.
const saEmail = "jr2-e2e@jr2-e2e.iam.gserviceaccount.com"

func (e *oauthEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	id, secret, _ := r.BasicAuth()
	// RFC 6749 §2.3.1 form-encodes the pair before Basic (x/oauth2 does);
	// requests-oauthlib sends it as it is: either is taken.
	if raw, err := url.QueryUnescape(secret); err == nil && raw == e.secret {
		secret = raw
	}
	id, _ = url.QueryUnescape(id)
	ok := r.ParseForm() == nil && r.URL.Path == "/token"
	switch r.PostForm.Get("grant_type") {
	case "client_credentials":
		ok = ok && r.PostForm.Get("scope") == "read" && id == "e2e-client" && secret == e.secret
	case "urn:ietf:params:oauth:grant-type:jwt-bearer":
		ok = ok && oauthtest.Assertion(r.PostForm.Get("assertion"), e.pub, saEmail, filter.GoogleTokenAudience, "read")
	default:
		ok = false
	}
	if !ok {
		w.WriteHeader(401)
		json.NewEncoder(w).Encode(map[string]string{"error": "invalid_client", "error_description": e.echoed + secret})
		return
	}
	n := e.good.Add(1)
	e.mu.Lock()
	tok := "at-SENTINEL-e2e-" + strconv.FormatInt(n, 10) + "-" + strings.TrimPrefix(e.echoed, "echo-")
	e.issued = append(e.issued, tok)
	e.mu.Unlock()
	json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": 3600})
}

// newOAuthEndpoint serves an oauthEndpoint over TLS with a leaf of ca.
func newOAuthEndpoint(t *testing.T, ca *testpki.CA, secret string, pub *rsa.PublicKey) *oauthEndpoint {
	ep := &oauthEndpoint{secret: secret, pub: pub, echoed: "echo-" + sentinel(t, "DESCRIPTION")}
	ep.url = "https://" + serveTLS(t, ca, "127.0.0.1", ep) + "/token"
	return ep
}

// serviceAccountKey makes a service account's key, and its key file as
// Google issues it, naming tokenURI.
func serviceAccountKey(t *testing.T, tokenURI string) (*rsa.PrivateKey, string) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]string{
		"type": "service_account", "project_id": "jr2-e2e", "private_key_id": "e2e-key-1",
		"private_key": keyPEM(key), "client_email": saEmail, "client_id": "1000000000000000001", "token_uri": tokenURI,
	})
	return key, string(b)
}

func keyPEM(key *rsa.PrivateKey) string {
	der, _ := x509.MarshalPKCS8PrivateKey(key)
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

// all is every token issued.
func (e *oauthEndpoint) all() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.issued...)
}

// first is the first token issued ("" before one).
func (e *oauthEndpoint) first() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.issued) == 0 {
		return ""
	}
	return e.issued[0]
}

func testOAuth(t *testing.T, host Host) {
	tmp := t.TempDir()
	upCA := testpki.NewCA(t, "e2e oauth upstream CA")
	good, wrong := sentinel(t, "CLIENT_SECRET"), sentinel(t, "WRONG_SECRET")
	key, keyJSON := serviceAccountKey(t, "https://attacker.invalid/token")
	ep := newOAuthEndpoint(t, upCA, good, &key.PublicKey)
	tokenURL := ep.url
	seen := make(chan string, 16) // each request's authorization and x-goog-api-key
	target := serveTLS(t, upCA, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := r.Header.Get("Authorization") + r.Header.Get("X-Goog-Api-Key")
		seen <- got
		io.WriteString(w, "you sent "+got)
	}))
	orch := serveLoopback(t, http.NotFoundHandler())
	oauth := &filter.OAuthConfig{Grant: filter.GrantClientCredentials, TokenURL: tokenURL, Scopes: []string{"read"}}
	m := manifest{Pod: podName, Orchestrator: orch, Sandbox: podName, Secrets: []manifestSecret{
		{Name: "API_TOKEN", Hosts: []string{target}, Headers: []string{"authorization"}, OAuth: oauth},
		{Name: "BAD_TOKEN", Hosts: []string{target}, Headers: []string{"x-api-key"}, OAuth: oauth},
		{Name: "SA_TOKEN", Hosts: []string{target}, Headers: []string{"x-goog-api-key"}, OAuth: &filter.OAuthConfig{Grant: filter.GrantServiceAccount, TokenURL: tokenURL, Scopes: []string{"read"}}},
	}}
	dir, roots := renderLocalPod(t, tmp, host, m, upCA, map[string]string{
		"API_TOKEN.client-id": "e2e-client", "API_TOKEN.client-secret": good,
		"BAD_TOKEN.client-id": "e2e-client", "BAD_TOKEN.client-secret": wrong,
		"SA_TOKEN.key.json": keyJSON,
		contract.TokenName:  sentinel(t, contract.TokenName),
	})
	p := &hopPod{run: host.Start(t, dir, ""), target: target, roots: roots}
	waitLines(t, p.run, regexp.QuoteMeta("jr2.custodian action=mint result=ok secret=API_TOKEN"), 1)
	waitLines(t, p.run, regexp.QuoteMeta("jr2.custodian action=mint result=ok secret=SA_TOKEN"), 1)
	waitAtLeast(t, p.run, regexp.QuoteMeta("jr2.custodian action=mint result=refused secret=BAD_TOKEN reason=token-refused"))

	var apiToken string
	run(t, "the token swapped and scrubbed", func(t *testing.T) {
		status, body := p.interceptRoundTrip(t, "GET /v1/x HTTP/1.1\r\nHost: "+target+"\r\nauthorization: Bearer "+standIn("API_TOKEN")+"\r\nConnection: close\r\n\r\n")
		got := <-seen
		if tok, ok := strings.CutPrefix(got, "Bearer "); !ok || !slices.Contains(ep.all(), tok) {
			t.Errorf("the upstream got authorization %q, want a token issued", got)
		} else {
			apiToken = tok
		}
		if status != 200 || body != "you sent Bearer [secret:API_TOKEN]" {
			t.Errorf("%d %q, want 200 the echo scrubbed", status, body)
		}
		if n := ep.good.Load(); n != 2 {
			t.Errorf("%d tokens issued, want 2 (API_TOKEN's, SA_TOKEN's)", n)
		}
	})
	run(t, "the service account's token, its assertion verified", func(t *testing.T) {
		status, body := p.interceptRoundTrip(t, "GET /v1/x HTTP/1.1\r\nHost: "+target+"\r\nx-goog-api-key: "+standIn("SA_TOKEN")+"\r\nConnection: close\r\n\r\n")
		got := <-seen
		if !slices.Contains(ep.all(), got) || got == apiToken {
			t.Errorf("the upstream got x-goog-api-key %q, want SA_TOKEN's token", got)
		}
		if status != 200 || body != "you sent [secret:SA_TOKEN]" {
			t.Errorf("%d %q, want 200 the echo scrubbed", status, body)
		}
	})
	run(t, "a refused client is the engine's 502", func(t *testing.T) {
		line := regexp.QuoteMeta("jr2.custodian action=refuse target=" + target + " reason=token-refused")
		before := countLines(p.run, line)
		status, body := p.interceptRoundTrip(t, "GET /v1/x HTTP/1.1\r\nHost: "+target+"\r\nx-api-key: "+standIn("BAD_TOKEN")+"\r\nConnection: close\r\n\r\n")
		if want := "jr2 custodian: the token endpoint of BAD_TOKEN refused the credentials: invalid_client"; status != 502 || body != want {
			t.Errorf("%d %q, want 502 %q", status, body, want)
		}
		if len(seen) != 0 {
			t.Errorf("a refused request reached the upstream")
		}
		waitLines(t, p.run, line, before+1)
	})
	run(t, "argv and output", func(t *testing.T) {
		secrets := append([]string{good, wrong, ep.echoed, keyPEM(key)}, ep.all()...)
		argv, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.run.cmd.Process.Pid))
		if err != nil {
			t.Fatal(err)
		}
		if err := p.run.Stop(); err != nil {
			t.Errorf("the host did not stop cleanly: %v", err)
		}
		for _, v := range secrets {
			for _, f := range scrub.Forms([]byte(v)) {
				if strings.Contains(string(argv), string(f)) {
					t.Errorf("the host's argv holds a form of a sentinel")
				}
				for _, l := range p.run.out.Lines() {
					if strings.Contains(l, string(f)) {
						t.Errorf("the output holds a form of a sentinel: %q", l)
					}
				}
			}
		}
		for _, l := range p.run.out.Lines() {
			if strings.HasPrefix(l, "jr2.custodian") && !logLine.MatchString(l) {
				t.Errorf("not a line of the log contract: %q", l)
			}
		}
	})
}

// waitAtLeast waits (up to 10 s) until the host printed line (a regular
// expression, matched whole) at least once.
func waitAtLeast(t *testing.T, r *Running, line string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for countLines(r, line) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the host never printed %q:\n%s", line, r.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestOAuthRealClients holds the test's token endpoint to real clients, so
// that the grants the hosts are proven against are the grants real
// clients send: Google's google-auth refreshes a service account's
// credentials made in the test (the JWT bearer grant, the assertion
// verified there with the account's public key), and requests-oauthlib's
// client-credentials client fetches a token. Each prints the token the
// endpoint issued.
func TestOAuthRealClients(t *testing.T) {
	py := filepath.Join(suiteDir(), "..", ".cache", "python-oauth", "venv", "bin", "python")
	if _, err := os.Stat(py); err != nil {
		t.Fatal("the OAuth clients' venv is not installed: run make .cache/python-oauth/venv (make test does)")
	}
	tmp := t.TempDir()
	ca := testpki.NewCA(t, "e2e oauth clients CA")
	caFile := ca.WriteFile(t, tmp, "ca.pem")
	secret := sentinel(t, "CLIENT_SECRET")
	key, keyJSON := serviceAccountKey(t, "")
	ep := newOAuthEndpoint(t, ca, secret, &key.PublicKey)
	var info map[string]string
	json.Unmarshal([]byte(keyJSON), &info)
	info["token_uri"] = ep.url
	for i, spec := range []map[string]any{
		{"client": "google", "key": info, "scopes": []string{"read"}},
		{"client": "client-credentials", "token_url": ep.url, "client_id": "e2e-client", "client_secret": secret, "scopes": []string{"read"}},
	} {
		t.Run(spec["client"].(string), func(t *testing.T) {
			b, _ := json.Marshal(spec)
			f := filepath.Join(tmp, fmt.Sprintf("spec-%d.json", i))
			mustWrite(t, f, string(b), 0o600)
			cmd := exec.Command(py, filepath.Join(suiteDir(), "python", "oauth_clients.py"), f)
			cmd.Env = []string{"REQUESTS_CA_BUNDLE=" + caFile, "PATH=/usr/bin:/bin", "NO_PROXY=*"}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%v:\n%s", err, out)
			}
			if got, want := strings.TrimSpace(string(out)), ep.all()[len(ep.all())-1]; got != want {
				t.Errorf("the client printed %q, want the token issued %q", got, want)
			}
		})
	}
	if n := ep.good.Load(); n != 2 {
		t.Errorf("%d tokens issued, want 2", n)
	}
}
