//go:build linux

package run

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"jr2.dev/boundary/custodian/internal/relay"
	"jr2.dev/boundary/custodian/internal/runtest"
	"jr2.dev/boundary/filter/sigv4test"
	"jr2.dev/boundary/internal/testkit/testpki"
)

// The OAuth secret of TestAWSAndOAuthContained: its client's parts and
// the token its endpoint mints, sentinels that must reach no output and
// no record.
const (
	runClientID     = "run-client-public-7h6g"
	runClientSecret = "SENTINEL-run-client-secret-Hy6Tg5Rf4Ed3"
	runToken        = "SENTINEL-run-access-token-Ws2Qa1Zx9Cv8"
)

// kindsUpstream serves, under a test CA, the bound AWS host (it checks
// each request's SigV4 signature with the real key, as AWS would),
// api.example.com (it echoes the Authorization it got) and the token
// endpoint auth.example.com (the client-credentials grant).
type kindsUpstream struct {
	addr  string
	roots *testpki.CA
	mu    sync.Mutex
	got   []string // "host authorization-or-verdict"
}

func startKindsUpstream(t *testing.T) *kindsUpstream {
	t.Helper()
	u := &kindsUpstream{}
	note := func(s string) {
		u.mu.Lock()
		u.got = append(u.got, s)
		u.mu.Unlock()
	}
	u.addr, u.roots, _ = serveTLS(t, "run kinds upstream CA", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Host {
		case sigv4test.S3:
			body, _ := io.ReadAll(r.Body)
			req := relay.RequestOf(r)
			if err := sigv4test.Verify(req.Method, req.Authority, req.Path, req.Headers, req.ContentLength, body); err != nil {
				note(r.Host + " refused: " + err.Error())
				http.Error(w, "SignatureDoesNotMatch", 403)
				return
			}
			note(r.Host + " verified")
			fmt.Fprintf(w, "s3 ok auth=%s token=%s", r.Header.Get("Authorization"), r.Header.Get("X-Amz-Security-Token"))
		case "auth.example.com":
			id, secret, _ := r.BasicAuth()
			r.ParseForm()
			w.Header().Set("Content-Type", "application/json")
			if id != runClientID || secret != runClientSecret || r.PostForm.Get("grant_type") != "client_credentials" {
				w.WriteHeader(401)
				io.WriteString(w, `{"error":"invalid_client"}`)
				return
			}
			note(r.Host + " minted")
			json.NewEncoder(w).Encode(map[string]any{"access_token": runToken, "token_type": "Bearer", "expires_in": 3600})
		default:
			note(r.Host + " " + r.Header.Get("Authorization"))
			fmt.Fprintf(w, "api auth=%s secret=%s", r.Header.Get("Authorization"), runClientSecret)
		}
	}), sigv4test.S3, "api.example.com", "auth.example.com")
	return u
}

func (u *kindsUpstream) received() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.got...)
}

// TestAWSAndOAuthContained: a contained run whose policy holds an AWS key
// and an OAuth secret. Inside it, curl signs an S3 request with its own
// SigV4 (--aws-sigv4) from the AWS_* variables the child got, which hold
// the stand-ins; the upstream finds it signed with the real key and
// carrying the real session token. curl then sends the OAuth secret's
// stand-in as a bearer (retrying the 503 token-pending until the run has
// minted), and the upstream gets the token the run minted through the
// mediator's transport. Neither the child's output, the runner's nor the
// bundle holds a real part, the token or the client secret.
func TestAWSAndOAuthContained(t *testing.T) {
	requireRun(t, "curl", "sh")
	u := startKindsUpstream(t)
	pol := writePolicy(t, []string{sigv4test.S3, "api.example.com"}, nil, nil,
		`AWS = { hosts = ["`+sigv4test.S3+`"], aws = { sessionToken = true } }
API = { env = "API_TOKEN", hosts = ["api.example.com"], oauth = { grant = "client-credentials", tokenURL = "https://auth.example.com/token" }, parts = { client-id = "API_CLIENT_ID", client-secret = "API_CLIENT_SECRET" } }
`)
	environ := []string{"PATH=/usr/bin:/bin",
		"AWS_ACCESS_KEY_ID=" + sigv4test.KeyIDValue, "AWS_SECRET_ACCESS_KEY=" + sigv4test.SecretValue, "AWS_SESSION_TOKEN=" + sigv4test.TokenValue,
		"API_CLIENT_ID=" + runClientID, "API_CLIENT_SECRET=" + runClientSecret}
	script := curlFlags + ` --aws-sigv4 "aws:amz:us-east-1:s3" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" -H "x-amz-security-token: $AWS_SESSION_TOKEN" https://` + sigv4test.S3 + `/bucket/key; echo
` + curlFlags + ` --retry 20 --retry-delay 1 -H "Authorization: Bearer $API_TOKEN" https://api.example.com/v1/x; echo
echo "env=$AWS_ACCESS_KEY_ID $AWS_SECRET_ACCESS_KEY $AWS_SESSION_TOKEN $API_TOKEN ${API_CLIENT_SECRET:-unset}"
`
	res := containedWith(t, pol, u.addr, u.roots, environ, func(o *Options) {
		o.Resolve = func(host string, port uint16) (string, error) {
			if port == 443 && (host == sigv4test.S3 || host == "api.example.com" || host == "auth.example.com") {
				return u.addr, nil
			}
			return "", errors.New("no such test host")
		}
	}, "sh", "-c", script)
	if res.code != 0 || res.err != nil {
		t.Fatalf("exit %d, %v\nstderr: %s", res.code, res.err, res.stderr)
	}
	want := "s3 ok auth=[secret:AWS_ACCESS_KEY_ID] [secret:AWS_SECRET_ACCESS_KEY]"
	lines := strings.Split(res.stdout, "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "s3 ok auth=AWS4-HMAC-SHA256 Credential=[secret:AWS_ACCESS_KEY_ID]/") ||
		!strings.HasSuffix(lines[0], " token=[secret:AWS_SESSION_TOKEN]") {
		t.Errorf("the child printed %q; want the S3 answer with the real parts scrubbed (like %q)", res.stdout, want)
	}
	if len(lines) > 1 && lines[1] != "api auth=Bearer [secret:API] secret=[secret:API]" {
		t.Errorf("the API answer: %q; want the token and the client secret scrubbed", lines[1])
	}
	if len(lines) > 2 && lines[2] != "env=jr2-held-AWS_ACCESS_KEY_ID jr2-held-AWS_SECRET_ACCESS_KEY jr2-held-AWS_SESSION_TOKEN jr2-held-API unset" {
		t.Errorf("the child's variables: %q", lines[2])
	}
	got := u.received()
	wantGot := []string{"auth.example.com minted", sigv4test.S3 + " verified", "api.example.com Bearer " + runToken}
	if strings.Join(got, "\n") != strings.Join(wantGot, "\n") {
		t.Errorf("the upstream saw\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantGot, "\n"))
	}
	for _, name := range []string{"AWS", "API"} {
		if n := len(runtest.Find(res.records, "secret-injected", runtest.Rec{"name": name})); n != 1 {
			t.Errorf("%d secret-injected records of %s, want 1", n, name)
		}
	}
	if !strings.Contains(res.stderr, "jr2.custodian action=mint result=ok secret=API\n") {
		t.Errorf("no mint line on the runner's stderr:\n%s", res.stderr)
	}
	for _, v := range append(sigv4test.Sentinels, runClientSecret, runToken) {
		runtest.AssertNoValue(t, "the bundle", res.raw, v)
		runtest.AssertNoValue(t, "the child's and the runner's output", []byte(res.stdout+res.stderr), v)
	}
}
