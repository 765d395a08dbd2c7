package mediator

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"jr2.dev/boundary/custodian/internal/relay"
	"jr2.dev/boundary/custodian/internal/runtest"
	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/filter/sigv4test"
	"jr2.dev/boundary/internal/contract"
)

// awsHandler is the bound AWS hosts' upstream: it checks, as AWS would,
// that each request is signed with the real key, and answers 200 "ok"
// echoing the Authorization, the session token and the body (the real
// parts: the mediator must scrub them), else 403.
func awsHandler(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	req := relay.RequestOf(r) // the request as the engine reads one: the same reader verifies it here
	if err := sigv4test.Verify(req.Method, req.Authority, req.Path, req.Headers, req.ContentLength, body); err != nil {
		http.Error(w, "SignatureDoesNotMatch: "+err.Error(), 403)
		return
	}
	io.WriteString(w, "ok "+r.Header.Get("Authorization")+" "+r.Header.Get("X-Amz-Security-Token")+" "+string(body))
}

// awsPolicy binds the sigv4test key to every host the shared table
// sends to (sigv4test.Hosts), as serve's and the adapters' tests do.
var awsPolicy = `allow_hosts = ` + tomlList(sigv4test.Hosts) + `
[secrets]
AWS = { hosts = ` + tomlList(sigv4test.Hosts) + `, aws = { sessionToken = true } }
`

// tomlList writes hosts as a TOML array of strings.
func tomlList(hosts []string) string {
	return `["` + strings.Join(hosts, `", "`) + `"]`
}

// TestSigV4 runs the shared SigV4 table (package sigv4test) through the
// mediator, as custodian serve and both Envoy adapters run it: the child
// signs with the stand-ins the policy's aws secret gives it, the upstream
// checks the real key's signature; each refusal is the engine's, with
// nothing upstream; the real parts are in no answer, record or log line.
func TestSigV4(t *testing.T) {
	f := newFixtureOf(t, true, awsPolicy, "AWS_ACCESS_KEY_ID="+sigv4test.KeyIDValue,
		"AWS_SECRET_ACCESS_KEY="+sigv4test.SecretValue, "AWS_SESSION_TOKEN="+sigv4test.TokenValue)
	forwarded := 0
	for _, c := range sigv4test.Cases(time.Now().UTC(), "") {
		t.Run(c.Name, func(t *testing.T) {
			req, err := http.NewRequest(c.Method, "https://"+c.Host+c.Path, bytes.NewReader([]byte(c.Body)))
			if err != nil {
				t.Fatal(err)
			}
			if c.Body == "" {
				req.Body, req.ContentLength = nil, 0
			}
			for _, h := range c.Headers {
				req.Header[h.Name] = append(req.Header[h.Name], h.Value)
			}
			resp, err := f.client(true).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			for _, v := range sigv4test.Sentinels {
				runtest.AssertNoValue(t, "the answer", b, v)
			}
			switch c.Status {
			case -1: // forwarded, then cut at the chunk that does not verify
				if resp.StatusCode != 403 || !strings.Contains(string(b), filter.SigV4ChunkText) {
					t.Fatalf("want the engine's 403 at the bad chunk, got %d %q", resp.StatusCode, b)
				}
			case 0:
				forwarded++
				if resp.StatusCode != 200 || !strings.HasPrefix(string(b), "ok ") {
					t.Fatalf("%d %q", resp.StatusCode, b)
				}
			default:
				if resp.StatusCode != c.Status || !strings.HasPrefix(string(b), "jr2 custodian: ") {
					t.Fatalf("want %d from the engine, got %d %q", c.Status, resp.StatusCode, b)
				}
			}
		})
	}
	rs := f.records(t)
	if n := len(runtest.Find(rs, "secret-injected", runtest.Rec{"name": "AWS"})); n < forwarded {
		t.Errorf("%d secret-injected records of AWS, want at least %d", n, forwarded)
	}
	logged := f.logged()
	for _, c := range sigv4test.Cases(time.Now().UTC(), "") {
		if c.Status > 0 && !bytes.Contains(logged, []byte("action=refuse target="+c.Host+":443 reason="+c.Reason+"\n")) {
			t.Errorf("no refuse line with reason %s:\n%s", c.Reason, logged)
		}
	}
	for _, v := range sigv4test.Sentinels {
		runtest.AssertNoValue(t, "the bundle", f.bundle.Bytes(), v)
		runtest.AssertNoValue(t, "the log", logged, v)
	}
	if bytes.Contains(logged, []byte(contract.StandInPrefix)) {
		t.Errorf("a log line holds a stand-in:\n%s", logged)
	}
}

// The OAuth secret of the tests: its token endpoint (on the TLS upstream),
// its grant's parts and what the endpoint mints, each a sentinel that must
// reach no answer, record or log line.
const (
	tokenHost      = "auth.example.com"
	oauthClientID  = "client-id-mediator-public-4d3c"
	oauthSecret    = "SENTINEL-oauth-client-secret-7Qw2Er4Ty6"
	oauthRefresh   = "SENTINEL-oauth-refresh-first-9Zx8Cv7Bn6"
	oauthRotated   = "SENTINEL-oauth-refresh-rotated-5Mk4Lj3Hg2"
	oauthToken     = "SENTINEL-oauth-access-token-1Pq0Wo9Ie8"
	oauthStandInOf = "G"
)

// oauthSentinels are the parts the engine holds for the OAuth secret
// that must be scrubbed from every answer (the client id is public: see
// docs/custodian.md).
var oauthSentinels = []string{oauthSecret, oauthRefresh, oauthRotated, oauthToken}

// tokenHandler is the token endpoint: it takes the refresh-token grant
// with the client's credentials in Basic auth and the file's refresh token
// or the one it rotated to, and mints oauthToken with a new refresh token
// (a rotating endpoint).
func tokenHandler(w http.ResponseWriter, r *http.Request) {
	id, secret, _ := r.BasicAuth()
	r.ParseForm()
	if id != oauthClientID || secret != oauthSecret || r.PostForm.Get("grant_type") != "refresh_token" ||
		(r.PostForm.Get("refresh_token") != oauthRefresh && r.PostForm.Get("refresh_token") != oauthRotated) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(400)
		io.WriteString(w, `{"error":"invalid_grant"}`)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"access_token": oauthToken, "token_type": "Bearer", "expires_in": 3600, "refresh_token": oauthRotated})
}

// oauthPolicy binds the OAuth secret G to api.example.com.
const oauthPolicy = `allow_hosts = ["api.example.com"]
[secrets.G]
env = "G_TOKEN"
hosts = ["api.example.com"]
oauth = { grant = "refresh-token", tokenURL = "https://` + tokenHost + `/token" }
parts = { client-id = "G_CLIENT_ID", client-secret = "G_CLIENT_SECRET", refresh-token = "G_REFRESH" }
`

// TestOAuth: a contained run's OAuth secret is minted by the run itself,
// through the mediator's token transport (its resolution, the upstream
// roots): until the first token the engine answers 503 token-pending,
// then the stand-in the child sends becomes the minted token toward the
// bound host, and what the upstream echoes of every part the engine holds
// (the client secret, the refresh token and the one the endpoint rotated
// to, the token) comes back scrubbed, in the answer and the bundle.
func TestOAuth(t *testing.T) {
	f := newFixtureOf(t, true, oauthPolicy, "G_CLIENT_ID="+oauthClientID, "G_CLIENT_SECRET="+oauthSecret, "G_REFRESH="+oauthRefresh)
	si := contract.StandIn(oauthStandInOf)
	var status int
	var body string
	for i := 0; i < 100; i++ { // the first mint is under way: 503 token-pending until it lands
		var err error
		status, body, _, err = get(t, f.client(true), "https://api.example.com/v1/parts", "Authorization", "Bearer "+si)
		if err != nil {
			t.Fatal(err)
		}
		if status != 503 {
			break
		}
		if !strings.Contains(body, filter.ReasonTokenPending) && !strings.Contains(body, "not minted yet") {
			t.Fatalf("503 that is not token-pending: %q", body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if status != 200 || !strings.Contains(body, "auth=Bearer [secret:G]") {
		t.Fatalf("%d %q; want the upstream's answer with the token scrubbed", status, body)
	}
	if got := f.tlsUp.received(); len(got) != 1 || got[0] != "GET api.example.com /v1/parts Bearer "+oauthToken {
		t.Errorf("the upstream got %q; want the minted token in place of the stand-in", got)
	}
	for _, v := range oauthSentinels {
		runtest.AssertNoValue(t, "the answer", []byte(body), v)
	}
	rs := f.records(t)
	if n := len(runtest.Find(rs, "secret-injected", runtest.Rec{"name": "G"})); n != 1 {
		t.Errorf("%d secret-injected records of G, want 1", n)
	}
	logged := f.logged()
	if !bytes.Contains(logged, []byte("jr2.custodian action=mint result=ok secret=G\n")) {
		t.Errorf("no mint line:\n%s", logged)
	}
	for _, v := range oauthSentinels {
		runtest.AssertNoValue(t, "the bundle", f.bundle.Bytes(), v)
		runtest.AssertNoValue(t, "the log", logged, v)
	}
}
