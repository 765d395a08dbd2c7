package filter

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
)

// TestSigV4SignedAsSent: the real key signs exactly the bytes that go
// upstream, and those are exactly what the agent signed. Each request here
// is one an agent can sign with the stand-ins whose signed form and sent
// form would differ — a signed header the engine removes, a query pair
// Go's parser drops, a header sent twice — so the upstream would answer
// SignatureDoesNotMatch and echo its canonical request (the real session
// token in it) and the real key's signature: each is refused, 400
// signature. The forwards whose query the signer spells otherwise are in
// the table every host runs (package sigv4test), checked against a model
// of the upstream's canonical request.
func TestSigV4SignedAsSent(t *testing.T) {
	when, e := fixedEngine(t, true)
	header := func(c clientReq, query string, extra ...Header) *Request {
		hr := c.http(t)
		hr.URL.RawQuery = query
		if c.contentSHA {
			hr.Header.Set("X-Amz-Content-Sha256", c.payloadHash())
		}
		if err := c.signer().SignHTTP(context.Background(), standInCreds, hr, c.payloadHash(), c.service, c.region, when); err != nil {
			t.Fatal(err)
		}
		hr.URL.RawQuery = query // the signer rewrote it; the agent sends its own
		r := filterRequest(hr)
		r.Headers = append(r.Headers, extra...)
		return r
	}
	presigned := func(c clientReq, hs map[string]string) *Request {
		hr := c.http(t)
		hr.URL.RawQuery = "X-Amz-Expires=604800"
		for k, v := range hs {
			hr.Header.Set(k, v)
		}
		uri, _, err := c.signer().PresignHTTP(context.Background(), standInCreds, hr, "UNSIGNED-PAYLOAD", "s3", "us-east-1", when)
		if err != nil {
			t.Fatal(err)
		}
		u, _ := url.Parse(uri)
		r := &Request{Method: c.method, Authority: c.host, Path: u.RequestURI()}
		for k, v := range hs {
			r.Headers = append(r.Headers, Header{Name: k, Value: v})
		}
		return r
	}
	apiKey := s3Get
	apiKey.headers = map[string]string{"X-Api-Key": "anything"}
	meta := s3Get
	meta.headers = map[string]string{"X-Amz-Meta-A": "1"}
	xfp, expect, envoy := s3Get, s3Get, s3Get
	xfp.headers = map[string]string{"X-Forwarded-Proto": "https"}
	expect.headers = map[string]string{"expect": "100-continue"}
	envoy.headers = map[string]string{"X-Envoy-Upstream-Rq-Timeout-Ms": "1"}
	for _, tc := range []struct {
		name string
		r    *Request
		text string
	}{
		{"a signed header the engine removes (another secret's)", header(apiKey, ""), SigV4RemovedText},
		{"a presigned URL that signs a header the engine removes", presigned(s3Get, map[string]string{"X-Api-Key": "anything"}), SigV4RemovedText},
		{"a signed header the Envoy routes remove", header(xfp, ""), SigV4RemovedText},
		{"a signed expect", header(expect, ""), SigV4RemovedText},
		{"a signed x-envoy-* header", header(envoy, ""), SigV4RemovedText},
		{"a query pair with a bad escape", header(s3Get, "list-type=2&x=%zz"), SigV4QueryText},
		{"a query pair with a ';'", header(s3Get, "list-type=2&a=1;b=2"), SigV4QueryText},
		{"x-amz-date twice", header(s3Get, "", Header{Name: "X-Amz-Date", Value: "20261207T085959Z"}), SigV4OnceText},
		{"x-amz-content-sha256 twice", header(s3Get, "", Header{Name: "X-Amz-Content-Sha256", Value: emptyPayload}), SigV4OnceText},
		{"a signed header twice", header(meta, "", Header{Name: "X-Amz-Meta-A", Value: "2"}), SigV4OnceText},
		{"host twice", header(s3Get, "", Header{Name: "Host", Value: s3Host}), SigV4OnceText},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := e.DecideRequest(s3Host+":443", tc.r)
			if d.Reply == nil || d.Reply.Status != 400 || d.Reply.Reason != ReasonSignature || d.Reply.Body != "jr2 custodian: "+tc.text {
				t.Fatalf("want 400 %s %q, got %+v (path %s)", ReasonSignature, tc.text, d.Reply, d.Path)
			}
		})
	}
	// The query goes upstream as the signer spelled it when it signed.
	r := header(s3Get, "prefix=a+b&list-type=2&&uploads")
	d := e.DecideRequest(s3Host+":443", r)
	if d.Reply != nil {
		t.Fatalf("refused: %+v", d.Reply)
	}
	if _, q, _ := strings.Cut(d.Path, "?"); q != "list-type=2&prefix=a%20b&uploads=" {
		t.Errorf("query upstream %q, want the signer's spelling", q)
	}
}

// TestSigV4EchoScrubbed: an S3 SignatureDoesNotMatch answer echoes the
// canonical request and the string to sign as text and as space-separated
// hex (<CanonicalRequestBytes>, <StringToSignBytes>); no part of the real
// key reaches the agent in either spelling, whatever case the hex is in.
func TestSigV4EchoScrubbed(t *testing.T) {
	e := awsEngine(t, true)
	canonical := "GET\n/bucket/k\n\nhost:" + s3Host + "\nx-amz-date:20261207T090000Z\nx-amz-security-token:" + awsTokenValue + "\n\nhost;x-amz-date;x-amz-security-token\nUNSIGNED-PAYLOAD"
	spaced := func(s, verb string) string { return fmt.Sprintf(verb, []byte(s)) }
	for _, verb := range []string{"% x", "% X"} {
		body := `<Error><Code>SignatureDoesNotMatch</Code><AWSAccessKeyId>` + awsKeyIDValue + `</AWSAccessKeyId>` +
			`<CanonicalRequest>` + canonical + `</CanonicalRequest><CanonicalRequestBytes>` + spaced(canonical, verb) + `</CanonicalRequestBytes>` +
			`<StringToSignBytes>` + spaced("AWS4-HMAC-SHA256\n20261207T090000Z\n"+awsKeyIDValue, verb) + `</StringToSignBytes></Error>`
		b := e.NewBody(false)
		out, _ := b.Write(nil, []byte(body))
		out, _ = b.Flush(out)
		for _, v := range []string{awsKeyIDValue, awsTokenValue} {
			for _, form := range []string{v, spaced(v, "% x"), spaced(v, "% X")} {
				if strings.Contains(string(out), form) {
					t.Errorf("%s: the answer still holds %q", verb, form)
				}
			}
		}
	}
}

// TestHold: the process's budget of held bodies is shared by every Hold,
// a Take past it takes nothing, and Release gives back all a Hold took,
// once.
func TestHold(t *testing.T) {
	base := HeldBytes()
	var a, b Hold
	if !a.Take(MaxHeldBodies-int(base)-10) || !b.Take(10) {
		t.Fatal("a Take within the budget was refused")
	}
	if b.Take(1) {
		t.Fatal("a Take past the budget was granted")
	}
	if HeldBytes() != MaxHeldBodies {
		t.Fatalf("held %d, want %d", HeldBytes(), MaxHeldBodies)
	}
	a.Release()
	a.Release()
	if !b.Take(1) || HeldBytes() != base+11 {
		t.Fatalf("after a release: held %d, want %d", HeldBytes(), base+11)
	}
	b.Release()
	if HeldBytes() != base {
		t.Fatalf("held %d after every release, want %d", HeldBytes(), base)
	}
	d := (&Engine{}).HeldBudgetSpent("x:443")
	if d.Reply == nil || d.Reply.Status != 503 || d.Reply.Reason != ReasonHeldBudget || len(d.Reply.Headers) != 1 || d.Reply.Headers[0] != (Header{Name: "retry-after", Value: "1"}) {
		t.Fatalf("%+v", d.Reply)
	}
}
