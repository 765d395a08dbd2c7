//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/filter/scrub"
	"jr2.dev/boundary/internal/contract"
	"jr2.dev/boundary/internal/testpki"
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

// oauthEndpoint is the test's token endpoint.
type oauthEndpoint struct {
	secret string // the client secret it accepts
	good   atomic.Int64
	mu     sync.Mutex
	issued []string
	echoed string // the description it answers a refusal with
}

func (e *oauthEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	id, secret, _ := r.BasicAuth()
	id, _ = url.QueryUnescape(id) // RFC 6749 §2.3.1: form-encoded, then Basic
	secret, _ = url.QueryUnescape(secret)
	if r.ParseForm() != nil || r.PostForm.Get("grant_type") != "client_credentials" || r.PostForm.Get("scope") != "read" || id != "e2e-client" || secret != e.secret {
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
	ep := &oauthEndpoint{secret: good, echoed: "echo-" + sentinel(t, "DESCRIPTION")}
	tokenURL := "https://" + serveTLS(t, upCA, "127.0.0.1", ep) + "/token"
	seen := make(chan string, 16)
	target := serveTLS(t, upCA, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Get("Authorization")
		io.WriteString(w, "you sent "+r.Header.Get("Authorization"))
	}))
	orch := serveLoopback(t, http.NotFoundHandler())
	oauth := &filter.OAuthConfig{Grant: filter.GrantClientCredentials, TokenURL: tokenURL, Scopes: []string{"read"}}
	m := manifest{Pod: podName, Orchestrator: orch, Sandbox: podName, Secrets: []manifestSecret{
		{Name: "API_TOKEN", Hosts: []string{target}, Headers: []string{"authorization"}, OAuth: oauth},
		{Name: "BAD_TOKEN", Hosts: []string{target}, Headers: []string{"x-api-key"}, OAuth: oauth},
	}}
	dir, roots := renderLocalPod(t, tmp, host, m, upCA, map[string]string{
		"API_TOKEN.client-id": "e2e-client", "API_TOKEN.client-secret": good,
		"BAD_TOKEN.client-id": "e2e-client", "BAD_TOKEN.client-secret": wrong,
		contract.TokenName: sentinel(t, contract.TokenName),
	})
	p := &hopPod{run: host.Start(t, dir, ""), target: target, roots: roots}
	waitLines(t, p.run, regexp.QuoteMeta("jr2.custodian action=mint result=ok secret=API_TOKEN"), 1)
	waitAtLeast(t, p.run, regexp.QuoteMeta("jr2.custodian action=mint result=refused secret=BAD_TOKEN reason=token-refused"))

	run(t, "the token swapped and scrubbed", func(t *testing.T) {
		status, body := p.interceptRoundTrip(t, "GET /v1/x HTTP/1.1\r\nHost: "+target+"\r\nauthorization: Bearer "+standIn("API_TOKEN")+"\r\nConnection: close\r\n\r\n")
		tok := ep.first()
		if got := <-seen; got != "Bearer "+tok {
			t.Errorf("the upstream got authorization %q, want the token", got)
		}
		if status != 200 || body != "you sent Bearer [secret:API_TOKEN]" {
			t.Errorf("%d %q, want 200 the echo scrubbed", status, body)
		}
		if n := ep.good.Load(); n != 1 {
			t.Errorf("%d tokens issued, want 1", n)
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
		secrets := []string{good, wrong, ep.echoed, ep.first()}
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
