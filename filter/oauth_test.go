package filter_test

import (
	"cmp"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/filter/sigv4test"
	"jr2.dev/boundary/internal/contract"
	"jr2.dev/boundary/internal/testkit/oauthtest"
	"jr2.dev/boundary/internal/valuedir"
)

// Sentinels of the token endpoint's test: none may reach an answer or a
// log line.
const (
	oauthClientID     = "jr2-test-client"
	oauthClientSecret = "cs-SENTINEL-Zq8Wm3Kt7Rv2Lp9Xn4Hb"
	oauthRefresh      = "rt-SENTINEL-Pn5Qw8Ls2Vk7Jd3Tc9Fy"
	oauthEmail        = "jr2-test@jr2-test.iam.gserviceaccount.com"
	echoedDescription = "echo of " + oauthClientSecret
)

// tokenEndpoint is a token endpoint of the test's own, over real TLS: it
// grants client-credentials (client authenticated by Basic), refresh-token
// and the JWT bearer grant (the assertion's RS256 signature verified with
// the service account's public key, its iss, aud — Google's token endpoint,
// as google-auth writes it — and scope checked), and
// answers every other request invalid_client with a description that
// echoes the client secret.
type tokenEndpoint struct {
	srv     *httptest.Server
	pub     *rsa.PublicKey
	life    int // expires_in of each token
	hits    atomic.Int64
	rotate  bool // each refresh answers a new refresh token, and takes only the newest
	mu      sync.Mutex
	issued  []string
	refresh string // the newest refresh token, when rotate
}

func newTokenEndpoint(t *testing.T, pub *rsa.PublicKey, life int) *tokenEndpoint {
	te := &tokenEndpoint{pub: pub, life: life}
	te.srv = httptest.NewTLSServer(http.HandlerFunc(te.serve))
	t.Cleanup(te.srv.Close)
	return te
}

func (te *tokenEndpoint) url() string { return te.srv.URL + "/token" }

func (te *tokenEndpoint) serve(w http.ResponseWriter, r *http.Request) {
	te.hits.Add(1)
	ok := false
	if r.Method == "POST" && r.URL.Path == "/token" && r.ParseForm() == nil {
		id, secret, basic := r.BasicAuth()
		client := basic && id == oauthClientID && secret == oauthClientSecret
		switch r.PostForm.Get("grant_type") {
		case "client_credentials":
			ok = client && r.PostForm.Get("scope") == "read write"
		case "refresh_token":
			te.mu.Lock()
			want := cmp.Or(te.refresh, oauthRefresh)
			te.mu.Unlock()
			ok = client && r.PostForm.Get("refresh_token") == want
		case "urn:ietf:params:oauth:grant-type:jwt-bearer":
			ok = oauthtest.Assertion(r.PostForm.Get("assertion"), te.pub, oauthEmail, filter.GoogleTokenAudience, "https://www.googleapis.com/auth/cloud-platform")
		}
	}
	w.Header().Set("Content-Type", "application/json")
	if !ok {
		w.WriteHeader(401)
		json.NewEncoder(w).Encode(map[string]string{"error": "invalid_client", "error_description": echoedDescription})
		return
	}
	te.mu.Lock()
	tok := fmt.Sprintf("at-%d-%x", len(te.issued), sha256.Sum256([]byte(fmt.Sprint(te.hits.Load(), r.RemoteAddr))))
	te.issued = append(te.issued, tok)
	answer := map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": te.life}
	if te.rotate && r.PostForm.Get("grant_type") == "refresh_token" {
		te.refresh = fmt.Sprintf("rt-rotated-%d-Wm3Kt7Rv2Lp9Xn4Hb", len(te.issued))
		answer["refresh_token"] = te.refresh
	}
	te.mu.Unlock()
	json.NewEncoder(w).Encode(answer)
}

func (te *tokenEndpoint) token(i int) string {
	te.mu.Lock()
	defer te.mu.Unlock()
	if i >= len(te.issued) {
		return ""
	}
	return te.issued[i]
}

// oauthLive writes the parts and builds a Live holding API, an OAuth
// secret of grant bound to api.example.com in authorization, minting
// through te; the log lines go to lines, and each mint's line to minted.
type oauthLive struct {
	live   *filter.Live
	mu     sync.Mutex
	lines  []string
	minted chan string // each mint line, result=ok or refused
}

func (o *oauthLive) log() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return strings.Join(o.lines, "\n")
}

func newOAuthLive(t *testing.T, te *tokenEndpoint, grant string, parts map[string]string, scopes ...string) *oauthLive {
	t.Helper()
	return newOAuthLiveBeside(t, te, grant, parts, false, nil, scopes...)
}

// mintClock is a minter's clock and timer of the test's own: each wait
// the minter asks for is recorded and ends only when the test ticks, so a
// test counts mints and reads their schedule without waiting on time; now
// is the real clock (x/oauth2 dates each token by it) moved on by skip.
type mintClock struct {
	waits chan time.Duration
	fire  chan time.Time
	skip  atomic.Int64
}

func newMintClock() *mintClock {
	return &mintClock{waits: make(chan time.Duration, 256), fire: make(chan time.Time)}
}

func (c *mintClock) now() time.Time { return time.Now().Add(time.Duration(c.skip.Load())) }

func (c *mintClock) after(d time.Duration) <-chan time.Time {
	c.waits <- d
	return c.fire
}

// next is the wait the minter asked for after its last fetch.
func (c *mintClock) next(t *testing.T) time.Duration {
	t.Helper()
	return <-c.waits
}

// tick ends the minter's wait: it fetches again.
func (c *mintClock) tick() { c.fire <- time.Time{} }

// newOAuthLiveBeside is newOAuthLive, with the sigv4test AWS key held
// beside API when aws is set, and the minter on clk when it is not nil.
func newOAuthLiveBeside(t *testing.T, te *tokenEndpoint, grant string, parts map[string]string, aws bool, clk *mintClock, scopes ...string) *oauthLive {
	t.Helper()
	dir := t.TempDir()
	for f, v := range parts {
		if err := os.WriteFile(filepath.Join(dir, "API."+f), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c := &filter.Config{Pod: "oauth-test", ValuesDir: dir, LocalTargets: true, Secrets: []filter.SecretConfig{{
		Name: "API", StandIn: contract.StandIn("API"), Targets: []string{boundT}, Headers: []string{"authorization"},
		OAuth: &filter.OAuthConfig{Grant: grant, TokenURL: te.url(), Scopes: scopes},
	}}}
	if aws {
		c.Secrets = append(c.Secrets, sigv4test.Secret(sigv4test.S3+":443"))
		if err := sigv4test.WriteValues(dir); err != nil {
			t.Fatal(err)
		}
	}
	vals, err := filter.LoadValues(c)
	if err != nil {
		t.Fatal(err)
	}
	o := &oauthLive{minted: make(chan string, 64)}
	o.live, err = filter.NewLive(c, vals, filter.LiveOptions{Log: func(kv ...string) {
		line := strings.Join(kv, " ")
		o.mu.Lock()
		o.lines = append(o.lines, line)
		o.mu.Unlock()
		if strings.HasPrefix(line, "action mint") {
			o.minted <- line
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if clk != nil {
		filter.SetMintClock(o.live, clk.now, clk.after)
	}
	t.Cleanup(o.live.Mint(te.srv.Client().Transport))
	return o
}

func bearerReq() *filter.Request {
	return &filter.Request{Method: "GET", Authority: "api.example.com", Path: "/v1/x", Headers: []filter.Header{{Name: "authorization", Value: "Bearer " + contract.StandIn("API")}}}
}

// checkNoSentinel fails when s holds a part or a description the endpoint
// echoed.
func checkNoSentinel(t *testing.T, what, s string) {
	t.Helper()
	for _, v := range []string{oauthClientSecret, oauthRefresh, echoedDescription, "PRIVATE KEY"} {
		if strings.Contains(s, v) {
			t.Errorf("%s holds %q", what, v)
		}
	}
}

// TestOAuthGrants: each grant gets a token from the test's own endpoint
// through the host's transport, and the swap puts the current token where
// "Bearer <stand-in>" was; the token, the client secret and the refresh
// token are scrubbed from answers; no log line holds any of them.
func TestOAuthGrants(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	keyJSON, _ := json.Marshal(map[string]string{
		"type": "service_account", "client_email": oauthEmail, "private_key_id": "k1",
		"private_key": string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: must(x509.MarshalPKCS8PrivateKey(key))})),
		"token_uri":   "https://attacker.example/token", // never read: the config names the endpoint
	})
	for _, tc := range []struct {
		grant  string
		parts  map[string]string
		scopes []string
	}{
		{filter.GrantClientCredentials, map[string]string{"client-id": oauthClientID, "client-secret": oauthClientSecret}, []string{"read", "write"}},
		{filter.GrantRefreshToken, map[string]string{"client-id": oauthClientID, "client-secret": oauthClientSecret, "refresh-token": oauthRefresh}, nil},
		{filter.GrantServiceAccount, map[string]string{"key.json": string(keyJSON)}, []string{"https://www.googleapis.com/auth/cloud-platform"}},
	} {
		t.Run(tc.grant, func(t *testing.T) {
			te := newTokenEndpoint(t, &key.PublicKey, 3600)
			o := newOAuthLive(t, te, tc.grant, tc.parts, tc.scopes...)
			if line := <-o.minted; line != "action mint result ok secret API" {
				t.Fatalf("mint: %s", line)
			}
			tok := te.token(0)
			d := o.live.Engine().DecideRequest(boundT, bearerReq())
			if d.Reply != nil || len(d.Set) == 0 || d.Set[0] != (filter.Header{Name: "authorization", Value: "Bearer " + tok}) {
				t.Fatalf("decision %+v, want the token %s swapped", d, tok)
			}
			sc := o.live.Engine().Scrubber()
			for _, v := range []string{tok, oauthClientSecret, oauthRefresh} {
				if v != tok && !strings.Contains(strings.Join(mapValues(tc.parts), "\n"), v) {
					continue // not a part of this grant
				}
				if got := sc.String("echo " + v + " ."); got != "echo [secret:API] ." {
					t.Errorf("scrubbed %q", got)
				}
			}
			if n := te.hits.Load(); n != 1 {
				t.Errorf("%d requests to the token endpoint, want 1", n)
			}
			checkNoSentinel(t, "the log", o.log())
			if strings.Contains(o.log(), tok) {
				t.Errorf("the log holds the token")
			}
		})
	}
}

func mapValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestOAuthOneFetch: however many requests decide at once, the token
// endpoint is asked once: requests never fetch, one minter per secret
// does; before its first token every request is the engine's 503, after
// it every request gets the same token.
func TestOAuthOneFetch(t *testing.T) {
	te := newTokenEndpoint(t, nil, 3600)
	gate := make(chan struct{})
	inner := te.srv.Config.Handler
	te.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-gate // the first fetch waits while requests decide
		inner.ServeHTTP(w, r)
	})
	o := newOAuthLive(t, te, filter.GrantClientCredentials, map[string]string{"client-id": oauthClientID, "client-secret": oauthClientSecret}, "read", "write")
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := o.live.Engine().Latest().DecideRequest(boundT, bearerReq())
			want := "jr2 custodian: the access token of API is not minted yet; try again shortly"
			if d.Reply == nil || d.Reply.Status != 503 || d.Reply.Reason != filter.ReasonTokenPending || d.Reply.Body != want {
				t.Errorf("before the first token: %+v", d.Reply)
			}
		}()
	}
	wg.Wait()
	close(gate)
	<-o.minted
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if d := o.live.Engine().Latest().DecideRequest(boundT, bearerReq()); d.Reply != nil || d.Set[0].Value != "Bearer "+te.token(0) {
				t.Errorf("after it: %+v", d)
			}
		}()
	}
	wg.Wait()
	if n := te.hits.Load(); n != 1 {
		t.Errorf("%d requests to the token endpoint, want 1", n)
	}
}

// TestOAuthRotates: a token that expires is got again before it does, and
// swaps in like a rotated value: the new one is sent, the old one is never
// sent again and is still scrubbed. The endpoint rotates refresh tokens,
// taking only the newest: the second refresh sends the one the first
// returned, and the one it returned is scrubbed as the file's is.
func TestOAuthRotates(t *testing.T) {
	te := newTokenEndpoint(t, nil, 3600)
	te.rotate = true
	clk := newMintClock()
	o := newOAuthLiveBeside(t, te, filter.GrantRefreshToken, map[string]string{"client-id": oauthClientID, "client-secret": oauthClientSecret, "refresh-token": oauthRefresh}, false, clk)
	for i := range 3 {
		if line := <-o.minted; line != "action mint result ok secret API" {
			t.Fatalf("mint: %s", line)
		}
		if clk.next(t); i < 2 {
			clk.tick() // the next is got at once
		}
	}
	te.mu.Lock()
	rotated := te.refresh // read before the engine: the engine holds it, or (a mint since) the one after it
	te.mu.Unlock()
	e := o.live.Engine()
	// Every refresh token the engine holds is scrubbed as a value: the
	// file's, and the one the endpoint rotated to (which the minter alone
	// sends, to the endpoint).
	for _, v := range []string{oauthRefresh, rotated} {
		if got := e.Scrubber().String("echo " + v); got != "echo [secret:API]" {
			t.Errorf("a refresh token is not scrubbed: %q", got)
		}
	}
	old, cur := te.token(1), te.token(2)
	if d := e.DecideRequest(boundT, bearerReq()); d.Reply != nil || d.Set[0].Value != "Bearer "+cur {
		t.Fatalf("after the second mint: %+v", d)
	}
	if old == "" || old == cur {
		t.Fatalf("tokens %q %q", old, cur)
	}
	for _, v := range []string{old, cur} {
		if got := e.Scrubber().String(v); got != "[secret:API]" {
			t.Errorf("scrubbed %q", got)
		}
	}
}

// TestOAuthRefused: a token endpoint that refuses the credentials is the
// engine's 502 naming the secret and the endpoint's OAuth error code,
// never its description (which echoed the client secret); the log line
// names the secret and the word only.
func TestOAuthRefused(t *testing.T) {
	te := newTokenEndpoint(t, nil, 3600)
	o := newOAuthLive(t, te, filter.GrantClientCredentials, map[string]string{"client-id": oauthClientID, "client-secret": "cs-WRONG-Hq4Xv8Nt2Lm6Kp3Rz"}, "read", "write")
	if line := <-o.minted; line != "action mint result refused secret API reason token-refused" {
		t.Fatalf("mint: %s", line)
	}
	d := o.live.Engine().DecideRequest(boundT, bearerReq())
	want := "jr2 custodian: the token endpoint of API refused the credentials: invalid_client"
	if d.Reply == nil || d.Reply.Status != 502 || d.Reply.Reason != filter.ReasonTokenRefused || d.Reply.Body != want || d.Set != nil {
		t.Fatalf("%+v, want 502 %s %q", d.Reply, filter.ReasonTokenRefused, want)
	}
	checkNoSentinel(t, "the answer", d.Reply.Body)
	checkNoSentinel(t, "the log", o.log())
}

// TestOAuthConfig: the refusals of an oauth entry, each naming the path.
func TestOAuthConfig(t *testing.T) {
	for _, tc := range []struct {
		o    filter.OAuthConfig
		want string
	}{
		{filter.OAuthConfig{Grant: "password", TokenURL: "https://auth.example.com/token"}, `engine config: secrets[0].oauth.grant: "password" is no grant; write client-credentials, refresh-token or service-account`},
		{filter.OAuthConfig{Grant: "client-credentials", TokenURL: "http://auth.example.com/token"}, "engine config: secrets[0].oauth.tokenURL: write the token endpoint as https://host[:port]/path, with no userinfo, query or fragment"},
		{filter.OAuthConfig{Grant: "client-credentials", TokenURL: "https://u:p@auth.example.com/token"}, "engine config: secrets[0].oauth.tokenURL: write the token endpoint as https://host[:port]/path, with no userinfo, query or fragment"},
		{filter.OAuthConfig{Grant: "client-credentials", TokenURL: "https://169.254.169.254/token"}, "engine config: secrets[0].oauth.tokenURL: the host is guarded (link-local (the cloud metadata address 169.254.169.254 included)): the agent could serve it and take the credentials; name a token endpoint the agent cannot serve (tests on one machine set localTargets)"},
		{filter.OAuthConfig{Grant: "client-credentials", TokenURL: "https://auth.example.com/token", Scopes: []string{"a b"}}, "engine config: secrets[0].oauth.scopes[0]: write one scope, without spaces or quotes"},
	} {
		o := tc.o
		_, err := filter.New(&filter.Config{Pod: "p", Secrets: []filter.SecretConfig{{Name: "API", StandIn: contract.StandIn("API"), Targets: []string{boundT}, Headers: []string{"authorization"}, OAuth: &o}}}, nil)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%+v: %v\nwant %s", tc.o, err, tc.want)
		}
	}
}

// TestOAuthPartsRotate: a rotation of a part (the client secret, renamed
// over its file) is the minter's next parts: the refused client becomes a
// token, and the client secret it replaced is still scrubbed (retired as a
// rotated value is).
func TestOAuthPartsRotate(t *testing.T) {
	te := newTokenEndpoint(t, nil, 3600)
	const wrong = "cs-WRONG-Hq4Xv8Nt2Lm6Kp3Rz"
	o := newOAuthLive(t, te, filter.GrantClientCredentials, map[string]string{"client-id": oauthClientID, "client-secret": wrong}, "read", "write")
	if line := <-o.minted; line != "action mint result refused secret API reason token-refused" {
		t.Fatalf("mint: %s", line)
	}
	t.Cleanup(o.live.Watch(valuedir.WatchOptions{}))
	dir := o.live.Config().ValuesDir
	tmp := filepath.Join(dir, ".tmp")
	if err := os.WriteFile(tmp, []byte(oauthClientSecret), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "API.client-secret")); err != nil {
		t.Fatal(err)
	}
	for line := range o.minted {
		if line == "action mint result ok secret API" {
			break
		}
	}
	e := o.live.Engine()
	if d := e.DecideRequest(boundT, bearerReq()); d.Reply != nil || d.Set[0].Value != "Bearer "+te.token(0) {
		t.Fatalf("after the rotation: %+v", d)
	}
	for _, v := range []string{wrong, oauthClientSecret, te.token(0)} {
		if got := e.Scrubber().String(v); got != "[secret:API]" {
			t.Errorf("scrubbed %q", got)
		}
	}
}

// TestOAuthNoToken: a token endpoint that cannot be reached, and one that
// answers a token no value may be (shorter than a value's floor), are
// each the engine's 502 naming the secret, in words of the engine's own.
func TestOAuthNoToken(t *testing.T) {
	short := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"access_token":"abc","token_type":"Bearer","expires_in":3600}`)
	}))
	t.Cleanup(short.Close)
	closed := httptest.NewTLSServer(http.NotFoundHandler())
	closed.Close()
	for _, tc := range []struct {
		srv  *httptest.Server
		want string
	}{
		{short, "jr2 custodian: the token endpoint of API answered no access token usable as a value"},
		{closed, "jr2 custodian: the token endpoint of API could not be reached"},
	} {
		te := &tokenEndpoint{srv: tc.srv}
		o := newOAuthLive(t, te, filter.GrantClientCredentials, map[string]string{"client-id": oauthClientID, "client-secret": oauthClientSecret}, "read", "write")
		if line := <-o.minted; line != "action mint result refused secret API reason token-refused" {
			t.Fatalf("mint: %s", line)
		}
		d := o.live.Engine().DecideRequest(boundT, bearerReq())
		if d.Reply == nil || d.Reply.Status != 502 || d.Reply.Reason != filter.ReasonTokenRefused || d.Reply.Body != tc.want {
			t.Errorf("%+v, want 502 %q", d.Reply, tc.want)
		}
	}
}

// TestOAuthBesideAWSKey: a token is minted, swapped in and scrubbed when
// the table also holds an AWS key, whose parts each new engine keeps (it
// signs with the real key still, and scrubs it). It pins a defect the
// contained run met first: a token's new engine was built without the
// AWS key's parts, so it was refused, no token was ever swapped in, and
// every request got 503 token-pending.
func TestOAuthBesideAWSKey(t *testing.T) {
	te := newTokenEndpoint(t, nil, 3600)
	o := newOAuthLiveBeside(t, te, filter.GrantClientCredentials, map[string]string{"client-id": oauthClientID, "client-secret": oauthClientSecret}, true, nil, "read", "write")
	if line := <-o.minted; line != "action mint result ok secret API" {
		t.Fatalf("mint: %s", line)
	}
	e := o.live.Engine()
	if d := e.DecideRequest(boundT, bearerReq()); d.Reply != nil || len(d.Set) == 0 || d.Set[0].Value != "Bearer "+te.token(0) {
		t.Fatalf("decision %+v, want the token swapped", d)
	}
	for _, v := range append(sigv4test.Sentinels, te.token(0), oauthClientSecret) {
		if got := e.Scrubber().String("echo " + v + " ."); got == "echo "+v+" ." {
			t.Errorf("%.12q… is not scrubbed by the token's engine", v)
		}
	}
}
