package filter

import (
	"context"
	"net/url"
	"testing"
)

// TestSigV4CopySource: a key kept to some paths may not sign an S3 copy
// (CopyObject, UploadPartCopy) that reads an object outside them, named in
// x-amz-copy-source (a header, or a presigned query parameter), however the
// source is spelled; a key with no paths copies from anywhere its IAM
// policy allows.
func TestSigV4CopySource(t *testing.T) {
	when, open := fixedEngine(t, true)
	cfg := awsConfig(true)
	cfg.Secrets[0].Paths = []string{"/bucket-a/"}
	kept, err := New(cfg, awsValues(true))
	if err != nil {
		t.Fatal(err)
	}
	copyReq := func(path string, sources ...string) *Request {
		c := clientReq{method: "PUT", host: s3Host, path: path, contentSHA: true, payload: "UNSIGNED-PAYLOAD", service: "s3", region: "us-east-1"}
		hr := c.http(t)
		for _, s := range sources {
			hr.Header.Add("X-Amz-Copy-Source", s)
		}
		hr.Header.Set("X-Amz-Content-Sha256", c.payloadHash())
		if err := c.signer().SignHTTP(context.Background(), standInCreds, hr, c.payloadHash(), c.service, c.region, when); err != nil {
			t.Fatal(err)
		}
		return filterRequest(hr)
	}
	// presignedCopy presigns a copy whose source rides a signed header
	// (the SDKs' way: the signer never hoists it) or the query.
	presignedCopy := func(source string, inQuery bool) *Request {
		c := clientReq{method: "PUT", host: s3Host, path: "/bucket-a/copy", service: "s3", region: "us-east-1"}
		hr := c.http(t)
		hr.URL.RawQuery = "X-Amz-Expires=900"
		if inQuery {
			hr.URL.RawQuery += "&x-amz-copy-source=" + url.QueryEscape(source)
		} else {
			hr.Header.Set("X-Amz-Copy-Source", source)
		}
		uri, _, err := c.signer().PresignHTTP(context.Background(), standInCreds, hr, "UNSIGNED-PAYLOAD", "s3", "us-east-1", when)
		if err != nil {
			t.Fatal(err)
		}
		u, _ := url.Parse(uri)
		r := &Request{Method: "PUT", Authority: s3Host, Path: u.RequestURI()}
		if !inQuery {
			r.Headers = []Header{{Name: "X-Amz-Copy-Source", Value: source}}
		}
		return r
	}
	for _, tc := range []struct {
		name  string
		r     *Request
		allow bool
	}{
		{"from the key's bucket", copyReq("/bucket-a/copy", "/bucket-a/x.csv"), true},
		{"from the key's bucket, no leading slash", copyReq("/bucket-a/copy", "bucket-a/x.csv"), true},
		{"from the key's bucket, a version", copyReq("/bucket-a/copy", "/bucket-a/x.csv?versionId=3HL4kqtJlcpXroDTDmJ"), true},
		{"from the key's bucket, an encoded key", copyReq("/bucket-a/copy", "/bucket-a/some%20key%2Fx.csv"), true},
		{"from another bucket", copyReq("/bucket-a/copy", "/bucket-b/private/payroll.csv"), false},
		{"from another bucket, encoded slashes", copyReq("/bucket-a/copy", "%2Fbucket-b%2Fpayroll.csv"), false},
		{"from another bucket by a dot segment", copyReq("/bucket-a/copy", "/bucket-a/../bucket-b/payroll.csv"), false},
		{"from another bucket by an encoded dot segment", copyReq("/bucket-a/copy", "/bucket-a%2F..%2Fbucket-b/payroll.csv"), false},
		{"a bad escape", copyReq("/bucket-a/copy", "/bucket-a/%zz"), false},
		{"an access point's ARN", copyReq("/bucket-a/copy", "arn:aws:s3:us-east-1:123456789012:accesspoint/ap/object/bucket-a/x"), false},
		{"a query after the key that is not a version", copyReq("/bucket-a/copy", "/bucket-a/x?versionId=1?y"), false},
		{"sent twice", copyReq("/bucket-a/copy", "/bucket-a/x", "/bucket-b/y"), false},
		{"UploadPartCopy from another bucket", copyReq("/bucket-a/big?partNumber=1&uploadId=u1", "/bucket-b/big"), false},
		{"presigned, from the key's bucket", presignedCopy("/bucket-a/x.csv", false), true},
		{"presigned, from another bucket", presignedCopy("/bucket-b/payroll.csv", false), false},
		{"presigned, the source in the query, from the key's bucket", presignedCopy("/bucket-a/x.csv", true), true},
		{"presigned, the source in the query, from another bucket", presignedCopy("/bucket-b/payroll.csv", true), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := kept.DecideRequest(s3Host+":443", tc.r)
			if tc.allow {
				if d.Reply != nil {
					t.Fatalf("refused: %+v", d.Reply)
				}
			} else if d.Reply == nil || d.Reply.Status != 403 || d.Reply.Reason != ReasonCopySource {
				t.Fatalf("want 403 %s, got %+v", ReasonCopySource, d.Reply)
			}
			// A key with no paths is not kept to any.
			if d := open.DecideRequest(s3Host+":443", tc.r); d.Reply != nil && d.Reply.Reason == ReasonCopySource {
				t.Fatalf("a key with no paths refused: %+v", d.Reply)
			}
		})
	}
}
