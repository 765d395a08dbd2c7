package filter

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"jr2.dev/boundary/internal/contract"
)

// benchEngine holds n secrets, each bound to its own host and to a shared
// gateway with its own header, so lookups and stand-in searches see all n.
func benchEngine(b testing.TB, n int) *Engine {
	return benchEngineShaped(b, n, nil)
}

// benchEngineShaped is benchEngine with each stand-in of shape sh (nil:
// none).
func benchEngineShaped(b testing.TB, n int, sh *contract.Shape) *Engine {
	b.Helper()
	c := &Config{Pod: "bench", Orchestrator: "o.example:4000", ValuesDir: "/x"}
	vals := map[string][]byte{}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("SECRET_%03d", i)
		si, err := contract.StandInOf(name, sh)
		if err != nil {
			b.Fatal(err)
		}
		c.Secrets = append(c.Secrets, SecretConfig{
			Name: name, StandIn: si, Shape: sh,
			Targets: []string{fmt.Sprintf("h%03d.example.com:443", i), "gateway.example.com:443"},
			Headers: []string{fmt.Sprintf("x-key-%03d", i)},
			Paths:   []string{"/v1/"},
		})
		vals[name] = []byte(fmt.Sprintf("value-%03d-0123456789abcdef", i))
	}
	e, err := New(c, vals)
	if err != nil {
		b.Fatal(err)
	}
	return e
}

// BenchmarkDecideRequest: one intercepted request's decision with 100 held
// secrets (make bench prints ns/op and allocs/op).
func BenchmarkDecideRequest(b *testing.B) {
	benchDecide(b, benchEngine(b, 100), benchRequest())
}

// benchDecide decides req toward h050 b.N times; a refusal fails.
func benchDecide(b *testing.B, e *Engine, req Request) {
	r := &req
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d := e.DecideRequest("h050.example.com:443", r)
		if d.Reply != nil {
			b.Fatal(d.Reply.Body)
		}
	}
}

// benchRequest is BenchmarkDecideRequest's request: a swap of the stand-in
// alone toward h050, one of 100 targets.
func benchRequest() Request {
	return Request{Method: "POST", Authority: "h050.example.com", Path: "/v1/messages?beta=true", Headers: []Header{
		{"content-type", "application/json"}, {"x-key-050", contract.StandIn("SECRET_050")}, {"user-agent", "bench/1.0"},
		{"accept", "*/*"}, {"anthropic-version", "2023-06-01"}, {"content-length", "1024"},
	}}
}

// BenchmarkDecideRequestShaped is BenchmarkDecideRequest with every
// stand-in shaped as an Anthropic key: the fast scan looks for the mark
// too.
func BenchmarkDecideRequestShaped(b *testing.B) {
	benchDecide(b, benchEngineShaped(b, 100, &contract.Shape{Kind: "anthropic"}), benchRequestShaped(b))
}

// benchRequestShaped is benchRequest with SECRET_050's stand-in shaped as
// an Anthropic key.
func benchRequestShaped(b testing.TB) Request {
	r := benchRequest()
	si, err := contract.StandInOf("SECRET_050", &contract.Shape{Kind: "anthropic"})
	if err != nil {
		b.Fatal(err)
	}
	r.Headers = append([]Header(nil), r.Headers...)
	r.Headers[1].Value = si
	return r
}

// BenchmarkDecideRequestGateway: the target has all 100 secrets bound.
func BenchmarkDecideRequestGateway(b *testing.B) {
	e := benchEngine(b, 100)
	r := &Request{Method: "GET", Authority: "gateway.example.com", Path: "/v1/models", Headers: []Header{
		{"x-key-099", contract.StandIn("SECRET_099")}, {"accept", "application/json"},
	}}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if d := e.DecideRequest("gateway.example.com:443", r); d.Reply != nil {
			b.Fatal(d.Reply.Body)
		}
	}
}

// benchKindsEngine is benchEngine's 100 secrets with an AWS key bound to
// benchS3 and an OAuth secret, its token already minted, bound to
// benchOAuth: the engine a host holds once a token is in use.
func benchKindsEngine(b testing.TB) *Engine {
	b.Helper()
	e := benchEngine(b, 100)
	c := *e.Config()
	c.Secrets = append(append([]SecretConfig(nil), c.Secrets...),
		SecretConfig{Name: "AWS", StandIn: contract.StandIn("AWS"), Targets: []string{benchS3 + ":443"}, Headers: AWSHeaders, AWS: &AWSConfig{SessionToken: true}},
		SecretConfig{Name: "OAUTH", StandIn: contract.StandIn("OAUTH"), Targets: []string{benchOAuth + ":443"}, Headers: []string{"authorization"},
			OAuth: &OAuthConfig{Grant: GrantClientCredentials, TokenURL: "https://auth.example.com/token"}})
	vals := e.valueSet()
	vals[contract.AWSKeyID.Of("AWS")] = []byte("AKIABENCHKEYID000001")
	vals[contract.AWSSecret.Of("AWS")] = []byte("bench/secret+key0123456789abcdefghijklmn")
	vals[contract.AWSToken.Of("AWS")] = []byte("bench-session-token-0123456789abcdefghijklmnopqrstuvwxyz")
	vals["OAUTH"] = []byte("at-bench-minted-token-0123456789abcdef")
	vals[partFile("OAUTH", PartClientID)] = []byte("bench-client")
	vals[partFile("OAUTH", PartClientSecret)] = []byte("cs-bench-client-secret-0123456789")
	k, err := New(&c, vals)
	if err != nil {
		b.Fatal(err)
	}
	return k
}

// The bound hosts of benchKindsEngine's AWS key and OAuth secret.
const (
	benchS3    = "s3.us-east-1.amazonaws.com"
	benchOAuth = "oauth.example.com"
)

// benchSigV4Request is an S3 GET as an SDK signs it with the stand-ins
// (header-signed, UNSIGNED-PAYLOAD, with the session token), at now.
func benchSigV4Request(b testing.TB) Request {
	b.Helper()
	r, err := http.NewRequest("GET", "https://"+benchS3+"/bucket/some/key.txt", nil)
	if err != nil {
		b.Fatal(err)
	}
	r.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
	r.Header.Set("User-Agent", "bench/1.0")
	creds := aws.Credentials{AccessKeyID: contract.StandIn(contract.AWSKeyID.Of("AWS")), SecretAccessKey: contract.StandIn(contract.AWSSecret.Of("AWS")),
		SessionToken: contract.StandIn(contract.AWSToken.Of("AWS"))}
	signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	if err := signer.SignHTTP(context.Background(), creds, r, "UNSIGNED-PAYLOAD", "s3", "us-east-1", time.Now().UTC()); err != nil {
		b.Fatal(err)
	}
	req := Request{Method: "GET", Authority: benchS3, Path: r.URL.RequestURI()}
	for k, vs := range r.Header {
		for _, v := range vs {
			req.Headers = append(req.Headers, Header{strings.ToLower(k), v})
		}
	}
	return req
}

// BenchmarkDecideKinds: what a credential of each kind costs one request
// with 100 plain secrets and one of each other kind held: plain, the swap
// of a value (benchRequest's); sigv4, an SDK's header-signed request
// verified with the stand-ins and signed again with the real key; oauth,
// the swap of an OAuth secret's minted token for its stand-in.
func BenchmarkDecideKinds(b *testing.B) {
	e := benchKindsEngine(b)
	for _, c := range []struct {
		name, target string
		req          Request
	}{
		{"plain", "h050.example.com:443", benchRequest()},
		{"sigv4", benchS3 + ":443", benchSigV4Request(b)},
		{"oauth", benchOAuth + ":443", Request{Method: "POST", Authority: benchOAuth, Path: "/v1/messages", Headers: []Header{
			{"content-type", "application/json"}, {"authorization", "Bearer " + contract.StandIn("OAUTH")}, {"user-agent", "bench/1.0"},
			{"accept", "*/*"}, {"content-length", "1024"},
		}}},
	} {
		b.Run(c.name, func(b *testing.B) {
			r := &c.req
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if d := e.DecideRequest(c.target, r); d.Reply != nil || len(d.Set) == 0 {
					b.Fatalf("%+v", d)
				}
			}
		})
	}
}
