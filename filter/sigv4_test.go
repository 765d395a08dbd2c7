package filter

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"jr2.dev/boundary/internal/contract"
)

// Sentinel parts of the AWS key: a test fails if the secret or the token
// appears in a reply, a log field or an error.
const (
	awsKeyIDValue  = "AKIASENTINELKEYID7Q3Z"
	awsSecretValue = "SENTINEL/aws+secret/k3y-0123456789abcdefXYZ"
	awsTokenValue  = "SENTINEL-aws-session-token-FwoGZXIvYXdzE0123456789"
)

const (
	bedrockHost = "bedrock-runtime.us-east-1.amazonaws.com"
	s3Host      = "s3.us-east-1.amazonaws.com"
)

func awsConfig(token bool) *Config {
	c := testConfig()
	c.Secrets = append([]SecretConfig{{
		Name: "AWS", StandIn: contract.StandIn("AWS"),
		Targets: []string{bedrockHost + ":443", s3Host + ":443"},
		Headers: AWSHeaders,
		AWS:     &AWSConfig{SessionToken: token},
	}}, c.Secrets...)
	return c
}

func awsValues(token bool) map[string][]byte {
	v := testValues()
	v["AWS_ACCESS_KEY_ID"] = []byte(awsKeyIDValue)
	v["AWS_SECRET_ACCESS_KEY"] = []byte(awsSecretValue)
	if token {
		v["AWS_SESSION_TOKEN"] = []byte(awsTokenValue)
	}
	return v
}

func awsEngine(t *testing.T, token bool) *Engine {
	t.Helper()
	e, err := New(awsConfig(token), awsValues(token))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

var (
	standInCreds = aws.Credentials{AccessKeyID: contract.StandIn("AWS_ACCESS_KEY_ID"), SecretAccessKey: contract.StandIn("AWS_SECRET_ACCESS_KEY"), SessionToken: contract.StandIn("AWS_SESSION_TOKEN")}
	realCreds    = aws.Credentials{AccessKeyID: awsKeyIDValue, SecretAccessKey: awsSecretValue, SessionToken: awsTokenValue}
)

// clientReq is a request as an SDK client builds it before signing.
type clientReq struct {
	method, host, path string
	headers            map[string]string
	body               string
	contentSHA         bool // send x-amz-content-sha256 (S3's clients do)
	payload            string
	service, region    string
}

func (c clientReq) http(t *testing.T) *http.Request {
	t.Helper()
	u, err := url.Parse("https://" + c.host + c.path)
	if err != nil {
		t.Fatal(err)
	}
	r := &http.Request{Method: c.method, URL: u, Host: c.host, Header: http.Header{}}
	for k, v := range c.headers {
		if k == strings.ToLower(k) {
			r.Header[k] = []string{v} // as sent: the signer's ignore list names canonical keys
		} else {
			r.Header.Set(k, v)
		}
	}
	if c.body != "" {
		r.ContentLength = int64(len(c.body))
	}
	return r
}

func (c clientReq) payloadHash() string {
	if c.payload != "" {
		return c.payload
	}
	sum := sha256.Sum256([]byte(c.body))
	return hex.EncodeToString(sum[:])
}

func (c clientReq) signer() *v4.Signer {
	return v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = c.service == "s3" })
}

// sign signs c as an SDK client does, with creds at when.
func (c clientReq) sign(t *testing.T, creds aws.Credentials, when time.Time) *http.Request {
	t.Helper()
	r := c.http(t)
	if c.contentSHA {
		r.Header.Set("X-Amz-Content-Sha256", c.payloadHash())
	}
	if err := c.signer().SignHTTP(context.Background(), creds, r, c.payloadHash(), c.service, c.region, when); err != nil {
		t.Fatal(err)
	}
	return r
}

// filterRequest is r as a host hands it to the engine.
func filterRequest(r *http.Request) *Request {
	fr := &Request{Method: r.Method, Authority: r.Host, Path: r.URL.RequestURI()}
	for k, vs := range r.Header {
		for _, v := range vs {
			fr.Headers = append(fr.Headers, Header{Name: k, Value: v})
		}
	}
	if r.ContentLength > 0 {
		fr.ContentLength = strconv.FormatInt(r.ContentLength, 10)
	}
	return fr
}

func setOf(d Decision, name string) (string, bool) {
	for _, h := range d.Set {
		if h.Name == name {
			return h.Value, true
		}
	}
	return "", false
}

// fixedEngine is an engine holding the AWS key (with a session token when
// token), its clock fixed at the time it returns.
func fixedEngine(t *testing.T, token bool) (time.Time, *Engine) {
	t.Helper()
	when := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	fixedNow(t, when)
	return when, awsEngine(t, token)
}

func fixedNow(t *testing.T, at time.Time) {
	t.Helper()
	old := now
	now = func() time.Time { return at }
	t.Cleanup(func() { now = old })
}

var bedrockPost = clientReq{
	method: "POST", host: bedrockHost, path: "/model/anthropic.claude-v2/invoke",
	headers: map[string]string{"Content-Type": "application/json", "Accept": "application/json"},
	body:    `{"prompt":"hi"}`, service: "bedrock", region: "us-east-1",
}

var s3Get = clientReq{
	method: "GET", host: s3Host, path: "/bucket/some%20key.txt",
	contentSHA: true, payload: "UNSIGNED-PAYLOAD", service: "s3", region: "us-east-1",
}

// TestSigV4Resign: a request signed with the stand-ins goes upstream
// signed with the real key, exactly as a client holding the real key
// would have signed it; the session token replaced.
func TestSigV4Resign(t *testing.T) {
	when := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	fixedNow(t, when.Add(time.Minute))
	e := awsEngine(t, true)
	for _, tc := range []struct {
		name string
		c    clientReq
	}{
		{"s3 get, unsigned payload", s3Get},
		{"s3 put, payload hash", clientReq{method: "PUT", host: s3Host, path: "/bucket/k", body: "object body", contentSHA: true, service: "s3", region: "us-east-1"}},
		{"s3 put, trailer", clientReq{method: "PUT", host: s3Host, path: "/bucket/k", headers: map[string]string{"Content-Encoding": "aws-chunked", "X-Amz-Decoded-Content-Length": "11", "X-Amz-Trailer": "x-amz-checksum-crc32"}, contentSHA: true, payload: "STREAMING-UNSIGNED-PAYLOAD-TRAILER", service: "s3", region: "us-east-1"}},
		{"bedrock post, body hashed here", bedrockPost},
		{"query kept", clientReq{method: "GET", host: s3Host, path: "/bucket?list-type=2&prefix=a%2Fb", contentSHA: true, payload: "UNSIGNED-PAYLOAD", service: "s3", region: "us-east-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := filterRequest(tc.c.sign(t, standInCreds, when))
			target := tc.c.host + ":443"
			d := e.DecideRequest(target, r)
			if !tc.c.contentSHA {
				if !d.NeedBody || d.Reply == nil || d.Reply.Reason != ReasonBodySize {
					t.Fatalf("no x-amz-content-sha256: want NeedBody and a fail-closed reply, got %+v", d)
				}
				d = e.DecideRequestBody(target, r, []byte(tc.c.body))
			}
			if d.Reply != nil {
				t.Fatalf("refused: %d %s %s", d.Reply.Status, d.Reply.Reason, d.Reply.Body)
			}
			want := tc.c.sign(t, realCreds, when)
			if got, _ := setOf(d, "authorization"); got != want.Header.Get("Authorization") {
				t.Errorf("authorization\n got: %s\nwant: %s", got, want.Header.Get("Authorization"))
			}
			if got, _ := setOf(d, "x-amz-security-token"); got != awsTokenValue {
				t.Errorf("x-amz-security-token = %q, want the real token", got)
			}
			if d.Path != r.Path {
				t.Errorf("path %q, want %q", d.Path, r.Path)
			}
			if strings.Join(d.Secrets, ",") != "AWS" {
				t.Errorf("secrets %v", d.Secrets)
			}
			for _, f := range d.LogFields(200) {
				noAWS(t, "log", f)
			}
		})
	}
}

// TestSigV4NoToken: a key without a session token: the stand-in token
// the agent signed with is removed, and the request signed without one.
func TestSigV4NoToken(t *testing.T) {
	when, e := fixedEngine(t, false)
	r := filterRequest(s3Get.sign(t, standInCreds, when))
	d := e.DecideRequest(s3Host+":443", r)
	if d.Reply != nil {
		t.Fatalf("refused: %+v", d.Reply)
	}
	real := realCreds
	real.SessionToken = ""
	want := s3Get.sign(t, real, when)
	if got, _ := setOf(d, "authorization"); got != want.Header.Get("Authorization") {
		t.Errorf("authorization\n got: %s\nwant: %s", got, want.Header.Get("Authorization"))
	}
	if _, ok := setOf(d, "x-amz-security-token"); ok || !containsStr(d.Remove, "x-amz-security-token") {
		t.Errorf("the stand-in token must be removed: set %v remove %v", d.Set, d.Remove)
	}
}

// TestSigV4Presigned: a presigned GET is checked, and its query signed
// again with the real key.
func TestSigV4Presigned(t *testing.T) {
	when := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	fixedNow(t, when.Add(5*time.Minute))
	e := awsEngine(t, true)
	presign := func(creds aws.Credentials, expires string) string {
		r := s3Get.http(t)
		r.URL.RawQuery = "X-Amz-Expires=" + expires
		uri, _, err := s3Get.signer().PresignHTTP(context.Background(), creds, r, "UNSIGNED-PAYLOAD", "s3", "us-east-1", when)
		if err != nil {
			t.Fatal(err)
		}
		u, _ := url.Parse(uri)
		return u.RequestURI()
	}
	r := &Request{Method: "GET", Authority: s3Host, Path: presign(standInCreds, "900")}
	d := e.DecideRequest(s3Host+":443", r)
	if d.Reply != nil {
		t.Fatalf("refused: %+v", d.Reply)
	}
	wantQ, _ := url.ParseQuery(strings.SplitN(presign(realCreds, "900"), "?", 2)[1])
	gotQ, _ := url.ParseQuery(strings.SplitN(d.Path, "?", 2)[1])
	if gotQ.Encode() != wantQ.Encode() {
		t.Errorf("presigned query\n got: %s\nwant: %s", gotQ.Encode(), wantQ.Encode())
	}
	if !strings.HasPrefix(d.Path, "/bucket/some%20key.txt?") {
		t.Errorf("path %q", d.Path)
	}
	// Expired: dated 5 minutes ago, valid for 60 seconds.
	r = &Request{Method: "GET", Authority: s3Host, Path: presign(standInCreds, "60")}
	if d := e.DecideRequest(s3Host+":443", r); d.Reply == nil || d.Reply.Reason != ReasonSignedDate {
		t.Errorf("expired presigned URL: want %s, got %+v", ReasonSignedDate, d)
	}
	// Tampered: the key changed after signing.
	p := strings.Replace(presign(standInCreds, "900"), "some%20key", "other%20key", 1)
	if d := e.DecideRequest(s3Host+":443", &Request{Method: "GET", Authority: s3Host, Path: p}); d.Reply == nil || d.Reply.Reason != ReasonSignature || d.Reply.Status != 403 {
		t.Errorf("tampered presigned URL: want 403 %s, got %+v", ReasonSignature, d)
	}
}

// TestSigV4Refused: each way a SigV4 request is refused, with its reason.
func TestSigV4Refused(t *testing.T) {
	when, e := fixedEngine(t, true)
	other := s3Get
	other.region = "eu-west-1"
	otherService := bedrockPost
	otherService.service = "sagemaker"
	chunked := s3Get
	chunked.method, chunked.payload = "PUT", "STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD"
	ranged := s3Get
	ranged.headers = map[string]string{"Range": "bytes=0-3"}
	foreign := aws.Credentials{AccessKeyID: "AKIAOTHERKEY", SecretAccessKey: "other"}
	for _, tc := range []struct {
		name   string
		r      *Request
		body   *string
		status int
		reason string
	}{
		{"another region", filterRequest(other.sign(t, standInCreds, when)), nil, 403, ReasonScope},
		{"another service", filterRequest(otherService.sign(t, standInCreds, when)), &bedrockPost.body, 403, ReasonScope},
		{"skewed", filterRequest(s3Get.sign(t, standInCreds, when.Add(-16*time.Minute))), nil, 403, ReasonSignedDate},
		{"signed with another secret", filterRequest(s3Get.sign(t, aws.Credentials{AccessKeyID: standInCreds.AccessKeyID, SecretAccessKey: "guess"}, when)), nil, 403, ReasonSignature},
		{"body changed", filterRequest(bedrockPost.sign(t, standInCreds, when)), ptr(`{"prompt":"bye"}`), 403, ReasonSignature},
		{"ECDSA-signed chunks", filterRequest(chunked.sign(t, standInCreds, when)), nil, 400, ReasonAWSChunked},
		{"SigV4a", &Request{Method: "GET", Authority: s3Host, Path: "/b", Headers: []Header{
			{Name: "Authorization", Value: "AWS4-ECDSA-P256-SHA256 Credential=" + standInCreds.AccessKeyID + "/20130524/s3/aws4_request, SignedHeaders=host;x-amz-date;x-amz-region-set, Signature=3045022100" + strings.Repeat("ab", 32)},
			{Name: "X-Amz-Date", Value: "20130524T000000Z"}, {Name: "X-Amz-Region-Set", Value: "*"}}}, nil, 400, ReasonSignature},
		{"SigV4a presigned", &Request{Method: "GET", Authority: s3Host, Path: "/b?X-Amz-Algorithm=AWS4-ECDSA-P256-SHA256&X-Amz-Credential=" + standInCreds.AccessKeyID + "%2F20130524%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Region-Set=%2A&X-Amz-SignedHeaders=host&X-Amz-Signature=3045"}, nil, 400, ReasonSignature},
		{"signed range", filterRequest(ranged.sign(t, standInCreds, when)), nil, 400, ReasonSignature},
		{"another key: today's rules", filterRequest(s3Get.sign(t, foreign, when)), nil, 400, ReasonDuplicate},
		{"malformed", &Request{Method: "GET", Authority: s3Host, Path: "/b", Headers: []Header{{Name: "Authorization", Value: "AWS4-HMAC-SHA256 Credential=" + standInCreds.AccessKeyID + "/x"}}}, nil, 400, ReasonSignature},
		{"stand-in elsewhere", func() *Request {
			r := filterRequest(s3Get.sign(t, standInCreds, when))
			r.Headers = append(r.Headers, Header{Name: "X-Note", Value: standInCreds.SecretAccessKey})
			return r
		}(), nil, 403, ReasonStandIn},
		{"header changed after signing", func() *Request {
			c := s3Get
			c.headers = map[string]string{"X-Amz-Meta-A": "1"}
			r := filterRequest(c.sign(t, standInCreds, when))
			for i := range r.Headers {
				if r.Headers[i].Name == "X-Amz-Meta-A" {
					r.Headers[i].Value = "2"
				}
			}
			return r
		}(), nil, 403, ReasonSignature},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := contract.JoinTarget(tc.r.Authority, 443)
			d := e.DecideRequest(target, tc.r)
			if tc.body != nil && d.NeedBody {
				d = e.DecideRequestBody(target, tc.r, []byte(*tc.body))
			}
			if d.Reply == nil || d.Reply.Status != tc.status || d.Reply.Reason != tc.reason {
				t.Fatalf("want %d %s, got %+v", tc.status, tc.reason, d.Reply)
			}
			if strings.HasPrefix(tc.name, "SigV4a") && !strings.Contains(d.Reply.Body, SigV4aText) {
				t.Fatalf("want the SigV4a answer, got %q", d.Reply.Body)
			}
			noAWS(t, "reply", d.Reply.Body)
			for _, f := range d.LogFields(0) {
				noAWS(t, "log", f)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestSigV4NotBound: toward a host no AWS key is bound to, a SigV4
// Authorization is a credential header like any: removed.
func TestSigV4NotBound(t *testing.T) {
	when, e := fixedEngine(t, true)
	c := clientReq{method: "GET", host: "api.github.com", path: "/user", service: "s3", region: "us-east-1", contentSHA: true, payload: "UNSIGNED-PAYLOAD", headers: map[string]string{"X-Api-Key": "x"}}
	r := filterRequest(c.sign(t, standInCreds, when))
	r.Headers = append(r.Headers, Header{Name: "Proxy-Authorization", Value: "Bearer " + contract.StandIn("GITHUB_TOKEN")})
	d := e.DecideRequest("api.github.com:443", r)
	if d.Reply == nil || d.Reply.Reason != ReasonDuplicate {
		t.Fatalf("want %s (today's rule 6: a SigV4 Authorization is a list), got %+v", ReasonDuplicate, d)
	}
}

// TestSigV4Scrubbed: the real key id, secret and token are scrubbed from
// an answer like any value.
func TestSigV4Scrubbed(t *testing.T) {
	e := awsEngine(t, true)
	body := "id " + awsKeyIDValue + " secret " + awsSecretValue + " token " + awsTokenValue
	out := string(e.Scrubber().Bytes([]byte(body)))
	for _, v := range []string{awsKeyIDValue, awsSecretValue, awsTokenValue} {
		if strings.Contains(out, v) {
			t.Errorf("scrubbed answer still holds a part: %q", out)
		}
	}
}

// TestAWSConfig: the parts are files of the value directory; a missing
// one, and a config the hosts cannot run, are refused with the path and
// the fix.
func TestAWSConfig(t *testing.T) {
	dir := t.TempDir()
	c := awsConfig(true)
	c.ValuesDir = dir
	for n, v := range awsValues(true) {
		if err := os.WriteFile(filepath.Join(dir, n), append(v, '\n'), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	vals, err := LoadValues(c)
	if err != nil {
		t.Fatal(err)
	}
	if string(vals["AWS_SECRET_ACCESS_KEY"]) != awsSecretValue {
		t.Fatal("the secret part was not read from its file")
	}
	os.Remove(filepath.Join(dir, "AWS_SESSION_TOKEN"))
	_, err = LoadValues(c)
	if err == nil || !strings.Contains(err.Error(), "no value file AWS_SESSION_TOKEN") {
		t.Errorf("missing token file: %v", err)
	}
	for _, tc := range []struct {
		edit func(*SecretConfig)
		want string
	}{
		{func(s *SecretConfig) { s.Headers = []string{"authorization"} }, `secrets[0].headers: an aws secret rides authorization and x-amz-security-token; write ["authorization", "x-amz-security-token"]`},
		{func(s *SecretConfig) { s.Targets = []string{"example.com:443"} }, `secrets[0].targets[0]: "example.com:443" names no AWS region and service; bind a host named <service>.<region>.amazonaws.com (bedrock-runtime.us-east-1.amazonaws.com), or a global endpoint (sts.amazonaws.com, iam.amazonaws.com, s3.amazonaws.com)`},
		{func(s *SecretConfig) {
			s.OAuth = &OAuthConfig{Grant: "client-credentials", TokenURL: "https://auth.example.com/token"}
		},
			`secrets[0]: an aws secret signs with its key and an oauth secret swaps a token it mints; give AWS one of aws and oauth`},
	} {
		c := awsConfig(true)
		tc.edit(&c.Secrets[0])
		if err := c.check(); err == nil || err.Error() != tc.want {
			t.Errorf("got %v\nwant %s", err, tc.want)
		}
	}
	b, err := jsonMarshal(awsConfig(true))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"aws": {`) {
		t.Errorf("custodian.json has no aws object:\n%s", b)
	}
}

// TestAWSScope: the region and service a bound host signs for, read from
// its name, regional or global.
func TestAWSScope(t *testing.T) {
	for _, tc := range []struct{ host, region, service string }{
		{"bedrock-runtime.us-east-1.amazonaws.com", "us-east-1", "bedrock"},
		{"s3.eu-west-1.amazonaws.com", "eu-west-1", "s3"},
		{"bucket.s3.us-gov-west-1.amazonaws.com", "us-gov-west-1", "s3"},
		// The global endpoints name no region and sign for us-east-1.
		{"sts.amazonaws.com", "us-east-1", "sts"},
		{"iam.amazonaws.com", "us-east-1", "iam"},
		{"S3.amazonaws.com.", "us-east-1", "s3"},
		{"bucket.s3.amazonaws.com", "us-east-1", "s3"},
		{"bedrock-runtime.amazonaws.com", "", ""},
		{"amazonaws.com", "", ""},
		{"s3.example.com", "", ""},
	} {
		r, s, ok := AWSScope(tc.host)
		if r != tc.region || s != tc.service || ok != (tc.region != "") {
			t.Errorf("AWSScope(%s) = %s %s %v", tc.host, r, s, ok)
		}
	}
}

// noAWS fails when the real secret or token is in s.
func noAWS(t *testing.T, where, s string) {
	t.Helper()
	for _, v := range []string{awsSecretValue, awsTokenValue, awsKeyIDValue} {
		if strings.Contains(s, v) {
			t.Errorf("%s holds a real AWS part: %q", where, s)
		}
	}
}

// TestSigV4UpstreamHost: a Host the Host rule lets through in another
// spelling (capitals, :443) is checked as the agent signed it, and the new
// signature covers the Host the upstream gets, the target's own.
func TestSigV4UpstreamHost(t *testing.T) {
	when, e := fixedEngine(t, true)
	c := s3Get
	c.host = "S3.US-East-1.amazonaws.com:443"
	r := filterRequest(c.sign(t, standInCreds, when))
	d := e.DecideRequest(s3Host+":443", r)
	if d.Reply != nil {
		t.Fatalf("refused: %+v", d.Reply)
	}
	want := s3Get.sign(t, realCreds, when)
	if got, _ := setOf(d, "authorization"); got != want.Header.Get("Authorization") {
		t.Errorf("authorization\n got: %s\nwant: %s", got, want.Header.Get("Authorization"))
	}
}

// FuzzParseSigV4Auth: an Authorization value the agent chose never
// panics the reader, and one it accepts names each of its parts once, in
// the one form the engine re-signs (written back, it reads the same).
func FuzzParseSigV4Auth(f *testing.F) {
	f.Add("AWS4-HMAC-SHA256 Credential=AKID/20260101/us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-date, Signature=" + strings.Repeat("a", 64))
	f.Add("AWS4-HMAC-SHA256 Credential=a/b/c/d/aws4_request,Signature=x,SignedHeaders=y,Signature=z")
	f.Add("AWS4-HMAC-SHA256 Credential=/////aws4_request, SignedHeaders=, Signature=")
	f.Fuzz(func(t *testing.T, v string) {
		p, ok := parseSigV4Auth(v)
		if !ok {
			return
		}
		for _, part := range []string{p.keyID, p.date, p.region, p.service} {
			if strings.Contains(part, "/") {
				t.Fatalf("a Credential part holds '/': %q", part)
			}
		}
		back := "AWS4-HMAC-SHA256 Credential=" + p.keyID + "/" + p.date + "/" + p.region + "/" + p.service + "/aws4_request, SignedHeaders=" + p.signed + ", Signature=" + p.signature
		if q, ok := parseSigV4Auth(back); !ok || q != p {
			t.Fatalf("%q read as %+v; written back it reads %+v (%v)", v, p, q, ok)
		}
	})
}
