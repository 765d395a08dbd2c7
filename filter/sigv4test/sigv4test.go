// Package sigv4test is the one table of SigV4 requests every host of the
// engine runs toward a bound AWS key (filter/sigv4.go): each case a
// request an SDK signed with the stand-ins, and what must come of it — a
// forward the upstream verifies with the real key (Verify), or the
// engine's refusal, its status and reason. custodian serve runs it over
// real HTTP, both Envoy adapters through the stream machine's suite
// (filter/stream/streamtest), so the body a host must hold for the hash
// and the headers it must set are proven the same everywhere.
//
// Requests are signed with the AWS SDK for Go v2's signer at the time
// given (the hosts' clock: now), as a client holding the stand-ins signs.
//
// Invariant: test code only; nothing outside _test.go files and test
// helpers imports it.
package sigv4test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/internal/contract"
)

// The held key: its name, and sentinel parts that must reach no log, reply
// or answer.
const (
	Name        = "AWS"
	KeyIDValue  = "AKIASIGV4TESTKEYID7Q"
	SecretValue = "SENTINEL-sigv4test/secret+Kq7Zr2Vw9Ty4Hn6Xp3"
	TokenValue  = "SENTINEL-sigv4test-token-Fw0GZXIvYXdzE9Lm2Qx8"
)

// The bound hosts: two regional, and a global endpoint, which names no
// region and signs for us-east-1.
const (
	S3      = "s3.us-east-1.amazonaws.com"
	Bedrock = "bedrock-runtime.us-east-1.amazonaws.com"
	STS     = "sts.amazonaws.com"
)

// Hosts are the bound hosts, which a host's test binds the key to
// (Targets) and serves.
var Hosts = []string{S3, Bedrock, STS}

// Targets are Hosts on port.
func Targets(port string) []string {
	var out []string
	for _, h := range Hosts {
		out = append(out, h+":"+port)
	}
	return out
}

// Sentinels are the parts a host must never show the agent or log (the
// key id is scrubbed from answers too).
var Sentinels = []string{KeyIDValue, SecretValue, TokenValue}

// StandIns are the credentials the agent signs with (harness.env's
// AWS_*); Real the key the Custodian holds.
var (
	StandIns = aws.Credentials{
		AccessKeyID:     contract.StandIn(contract.AWSKeyID.Of(Name)),
		SecretAccessKey: contract.StandIn(contract.AWSSecret.Of(Name)),
		SessionToken:    contract.StandIn(contract.AWSToken.Of(Name)),
	}
	Real = aws.Credentials{AccessKeyID: KeyIDValue, SecretAccessKey: SecretValue, SessionToken: TokenValue}
)

// Secret is the held secret bound to targets (host:port each), with a
// session token.
func Secret(targets ...string) filter.SecretConfig {
	return filter.SecretConfig{Name: Name, StandIn: contract.StandIn(Name), Targets: targets, Headers: filter.AWSHeaders, AWS: &filter.AWSConfig{SessionToken: true}}
}

// WriteValues writes the key's value files into dir.
func WriteValues(dir string) error {
	for n, v := range map[string]string{contract.AWSKeyID.Of(Name): KeyIDValue, contract.AWSSecret.Of(Name): SecretValue, contract.AWSToken.Of(Name): TokenValue} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(v+"\n"), 0o600); err != nil {
			return err
		}
	}
	return nil
}

// Case is one signed request and its outcome.
type Case struct {
	Name   string
	Method string
	Host   string // the Host it was signed for: a bound host, and the port unless 443
	// Path is the request target (a presigned one holds its signature).
	Path string
	// Headers are the request's, names as Go's client writes them,
	// content-length aside.
	Headers []filter.Header
	// Body is what is sent (a case may sign another).
	Body string
	// Status is the refusal's, 0 for a forward, -1 for a forward whose
	// body the Custodian cuts (a signed chunk that does not verify); Reason
	// its word.
	Status int
	Reason string
}

// ContentLength is c's content-length as a client sends it, "" when none.
func (c Case) ContentLength() string {
	if c.Body == "" {
		return ""
	}
	return strconv.Itoa(len(c.Body))
}

// unsigned is a request before signing.
type unsigned struct {
	method, host, path string
	headers            map[string]string
	body               string
	sha                string // x-amz-content-sha256 sent, "" for none
	service, region    string
}

func (u unsigned) signer() *v4.Signer {
	return v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = u.service == "s3" })
}

func (u unsigned) request() *http.Request {
	url_, err := url.Parse("https://" + u.host + u.path)
	if err != nil {
		panic(err)
	}
	r := &http.Request{Method: u.method, URL: url_, Host: u.host, Header: http.Header{}, ContentLength: int64(len(u.body))}
	for k, v := range u.headers {
		r.Header.Set(k, v)
	}
	if u.sha != "" {
		r.Header.Set("X-Amz-Content-Sha256", u.sha)
	}
	return r
}

func hashOf(b string) string {
	s := sha256.Sum256([]byte(b))
	return hex.EncodeToString(s[:])
}

// sign signs u with creds at when, as an SDK client does.
func (u unsigned) sign(creds aws.Credentials, when time.Time) Case {
	r := u.request()
	payload := u.sha
	if payload == "" {
		payload = hashOf(u.body)
	}
	if err := u.signer().SignHTTP(context.Background(), creds, r, payload, u.service, u.region, when); err != nil {
		panic(err)
	}
	c := Case{Method: u.method, Host: u.host, Path: r.URL.RequestURI(), Body: u.body}
	for k, vs := range r.Header {
		for _, v := range vs {
			c.Headers = append(c.Headers, filter.Header{Name: k, Value: v})
		}
	}
	return c
}

// presign presigns u with creds at when.
func (u unsigned) presign(creds aws.Credentials, when time.Time, expires int) Case {
	u.sha = "" // a presigned URL carries no header of its own
	r := u.request()
	r.URL.RawQuery = "X-Amz-Expires=" + strconv.Itoa(expires)
	uri, _, err := u.signer().PresignHTTP(context.Background(), creds, r, "UNSIGNED-PAYLOAD", u.service, u.region, when)
	if err != nil {
		panic(err)
	}
	pu, err := url.Parse(uri)
	if err != nil {
		panic(err)
	}
	return Case{Method: u.method, Host: u.host, Path: pu.RequestURI()}
}

// Cases are the table, signed at now toward the bound hosts on port (""
// for 443).
func Cases(now time.Time, port string) []Case {
	at := func(h string) string {
		if port == "" {
			return h
		}
		return h + ":" + port
	}
	get := unsigned{method: "GET", host: at(S3), path: "/bucket/some%20key.txt", sha: "UNSIGNED-PAYLOAD", service: "s3", region: "us-east-1"}
	put := unsigned{method: "PUT", host: at(S3), path: "/bucket/k", body: "object body", service: "s3", region: "us-east-1", headers: map[string]string{"Content-Type": "text/plain"}}
	put.sha = hashOf(put.body)
	invoke := unsigned{method: "POST", host: at(Bedrock), path: "/model/anthropic.claude-v2/invoke", body: `{"prompt":"hi"}`, service: "bedrock", region: "us-east-1",
		headers: map[string]string{"Content-Type": "application/json", "Accept": "application/json"}}
	eu := get
	eu.region = "eu-west-1"
	caller := unsigned{method: "POST", host: at(STS), path: "/", body: "Action=GetCallerIdentity&Version=2011-06-15", service: "sts", region: "us-east-1",
		headers: map[string]string{"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"}}
	regional := caller
	regional.region = "us-west-2"
	chunked := put
	chunked.sha = "STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD"
	proto := get
	proto.headers = map[string]string{"X-Forwarded-Proto": "https"}
	named := func(n string, c Case) Case { c.Name = n; return c }
	tampered := invoke.sign(StandIns, now)
	tampered.Body = `{"prompt":"bye"}`
	wrong := named("signed with another secret key: 403", get.sign(aws.Credentials{AccessKeyID: StandIns.AccessKeyID, SecretAccessKey: "not the stand-in"}, now))
	wrong.Status, wrong.Reason = 403, filter.ReasonSignature
	refuse := func(c Case, status int, reason string) Case { c.Status, c.Reason = status, reason; return c }
	query := func(q string) Case { return QueryCase(now, port, q) }
	twice := func(c Case, h filter.Header) Case { c.Headers = append(c.Headers, h); return c }
	return []Case{
		named("s3 get, UNSIGNED-PAYLOAD", get.sign(StandIns, now)),
		named("s3 put, x-amz-content-sha256", put.sign(StandIns, now)),
		named("bedrock invoke, the body hashed by the host", invoke.sign(StandIns, now)),
		named("s3 presigned get", get.presign(StandIns, now, 900)),
		refuse(named("another region: 403", eu.sign(StandIns, now)), 403, filter.ReasonScope),
		named("sts GetCallerIdentity at the global endpoint, signed for us-east-1", caller.sign(StandIns, now)),
		refuse(named("the global endpoint signed for us-west-2: 403", regional.sign(StandIns, now)), 403, filter.ReasonScope),
		refuse(named("the body changed after signing: 403", tampered), 403, filter.ReasonSignature),
		refuse(named("dated 20 minutes ago: 403", get.sign(StandIns, now.Add(-20*time.Minute))), 403, filter.ReasonSignedDate),
		refuse(named("ECDSA-signed chunks: 400", chunked.sign(StandIns, now)), 400, filter.ReasonAWSChunked),
		refuse(named("SigV4a: 400", sigV4a(get, now)), 400, filter.ReasonSignature),
		named("s3 put, signed aws-chunked", signedChunks(put, now, false)),
		refuse(named("s3 put, signed aws-chunked, a chunk changed: cut", signedChunks(put, now, true)), -1, ""),
		named("s3 put, signed aws-chunked with a checksum trailer", trailerChunks(put, now, filter.StreamingSignedTrailer, "")),
		refuse(named("s3 put, signed aws-chunked with a trailer, the checksum changed: cut", trailerChunks(put, now, filter.StreamingSignedTrailer, "checksum")), -1, ""),
		named("s3 put, unsigned aws-chunked with a checksum trailer (the SDKs' default)", trailerChunks(put, now, filter.StreamingUnsignedTrailer, "")),
		refuse(named("s3 put, unsigned aws-chunked, a size spelled 0x…: cut", trailerChunks(put, now, filter.StreamingUnsignedTrailer, "size")), -1, ""),
		named("s3 list, a query out of order with a '+', an empty pair and a bare name", query("prefix=a+b&list-type=2&&uploads")),
		refuse(named("a query pair with a bad escape: 400", query("list-type=2&x=%zz")), 400, filter.ReasonSignature),
		refuse(named("a query pair with a ';': 400", query("list-type=2&a=1;b=2")), 400, filter.ReasonSignature),
		refuse(named("s3 put, signed aws-chunked, a first chunk under 8 KiB: cut", signedChunksOf(put, now, smallChunks, false)), -1, ""),
		refuse(named("x-forwarded-proto signed (the Envoy routes remove it): 400", proto.sign(StandIns, now)), 400, filter.ReasonSignature),
		refuse(named("x-amz-date twice: 400", twice(get.sign(StandIns, now), filter.Header{Name: "X-Amz-Date", Value: now.Add(-time.Second).UTC().Format("20060102T150405Z")})), 400, filter.ReasonSignature),
		wrong,
	}
}

// QueryCase is an S3 GET of /bucket with the raw query q, signed with the
// stand-ins at now toward S3 on port ("" for 443) as the SDK's signer
// reads q (url.URL.Query, which drops a pair it cannot parse), and sent
// with q as the agent spelled it.
func QueryCase(now time.Time, port, q string) Case {
	host := S3
	if port != "" {
		host += ":" + port
	}
	u := unsigned{method: "GET", host: host, path: "/bucket", sha: "UNSIGNED-PAYLOAD", service: "s3", region: "us-east-1"}
	r := u.request()
	r.URL.RawQuery = q
	if err := u.signer().SignHTTP(context.Background(), StandIns, r, u.sha, u.service, u.region, now); err != nil {
		panic(err)
	}
	c := Case{Method: u.method, Host: u.host, Path: "/bucket?" + q}
	for k, vs := range r.Header {
		for _, v := range vs {
			c.Headers = append(c.Headers, filter.Header{Name: k, Value: v})
		}
	}
	return c
}

// The data of the signed aws-chunked case, in two chunks and the empty
// last one: the first at least 8 KiB, as AWS requires of every signed
// chunk but the last with data.
var chunkData = [][]byte{[]byte(strings.Repeat("chunk one ", 820)), []byte("chunk two"), {}}

// smallChunks are signed chunks whose first, not the last with data, is
// under AWS's 8 KiB minimum: a chain that verifies, in a framing AWS
// refuses, so the Custodian cuts it.
var smallChunks = [][]byte{[]byte("a chunk under 8 KiB"), []byte("chunk two"), {}}

// signedChunks is u (a PUT) as an aws-chunked upload of chunkData whose
// header signature seeds the stand-ins' chunk chain; corrupt changes a
// byte of the first chunk after signing.
func signedChunks(u unsigned, now time.Time, corrupt bool) Case {
	return signedChunksOf(u, now, chunkData, corrupt)
}

// signedChunksOf is signedChunks of data.
func signedChunksOf(u unsigned, now time.Time, chunkData [][]byte, corrupt bool) Case {
	u.sha = filter.StreamingSignedPayload
	decoded := 0
	for _, d := range chunkData {
		decoded += len(d)
	}
	u.headers = map[string]string{"Content-Encoding": "aws-chunked", "X-Amz-Decoded-Content-Length": strconv.Itoa(decoded)}
	u.body = string(frame(chunkData, make([]string, len(chunkData)))) // the length, whatever the signatures
	c := u.sign(StandIns, now)
	var seed string
	for _, h := range c.Headers {
		if h.Name == "Authorization" {
			seed = h.Value[strings.LastIndex(h.Value, "Signature=")+len("Signature="):]
		}
	}
	c.Body = string(frame(chunkData, chain(StandIns.SecretAccessKey, now.UTC().Format("20060102T150405Z"), "us-east-1", "s3", seed, chunkData)))
	if corrupt {
		c.Body = strings.Replace(c.Body, "chunk one", "chunk 0ne", 1)
	}
	return c
}

// sigV4a is u signed as SigV4a (AWS4-ECDSA-P256-SHA256) would sign it
// with the stand-in key id: its Authorization's shape, a region set, and a
// DER-looking signature (the engine refuses it before any check).
func sigV4a(u unsigned, now time.Time) Case {
	amzDate := now.UTC().Format("20060102T150405Z")
	return Case{Method: u.method, Host: u.host, Path: u.path, Headers: []filter.Header{
		{Name: "Authorization", Value: "AWS4-ECDSA-P256-SHA256 Credential=" + StandIns.AccessKeyID + "/" + amzDate[:8] + "/s3/aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-region-set, Signature=3045022100" + strings.Repeat("5a", 32) + "02200" + strings.Repeat("a5", 31)},
		{Name: "X-Amz-Content-Sha256", Value: "UNSIGNED-PAYLOAD"}, {Name: "X-Amz-Date", Value: amzDate}, {Name: "X-Amz-Region-Set", Value: "*"}}}
}

// trailerChunks is u (a PUT) as an aws-chunked upload of form (a -TRAILER
// one) whose last chunk is followed by a CRC32 checksum trailer, as the
// SDKs' flexible checksums send it; signed, its chunks and trailer chain
// from the header signature with the stand-ins. bad spoils it after
// signing: "checksum" changes the trailer's value, "size" spells the
// first size with a 0x prefix.
func trailerChunks(u unsigned, now time.Time, form, bad string) Case {
	u.sha = form
	decoded := 0
	for _, d := range chunkData {
		decoded += len(d)
	}
	u.headers = map[string]string{"Content-Encoding": "aws-chunked", "X-Amz-Decoded-Content-Length": strconv.Itoa(decoded),
		"X-Amz-Trailer": "x-amz-checksum-crc32", "X-Amz-Sdk-Checksum-Algorithm": "CRC32"}
	signed := form == filter.StreamingSignedTrailer
	u.body = string(trailerFrame(chunkData, signed, make([]string, len(chunkData)), "")) // the length, whatever the signatures
	c := u.sign(StandIns, now)
	var sigs []string
	var trailerSig string
	if signed {
		seed := ""
		for _, h := range c.Headers {
			if h.Name == "Authorization" {
				seed = h.Value[strings.LastIndex(h.Value, "Signature=")+len("Signature="):]
			}
		}
		amzDate := now.UTC().Format("20060102T150405Z")
		sigs = chain(StandIns.SecretAccessKey, amzDate, "us-east-1", "s3", seed, chunkData)
		trailerSig = trailerChain(StandIns.SecretAccessKey, amzDate, "us-east-1", "s3", sigs[len(sigs)-1], checksumTrailer(chunkData))
	}
	c.Body = string(trailerFrame(chunkData, signed, sigs, trailerSig))
	switch bad {
	case "checksum":
		c.Body = strings.Replace(c.Body, checksumTrailer(chunkData), "x-amz-checksum-crc32:AAAAAA==", 1)
	case "size":
		c.Body = "0x" + c.Body[2:] // the first size, 2008, as 0x08: a length kept, another parser's number
	}
	return c
}

// checksumTrailer is the CRC32 trailer of data, as the SDKs write it.
func checksumTrailer(data [][]byte) string {
	h := crc32.NewIEEE()
	for _, d := range data {
		h.Write(d)
	}
	return "x-amz-checksum-crc32:" + base64.StdEncoding.EncodeToString(h.Sum(nil))
}

// trailerFrame is the -TRAILER aws-chunked body of data: each chunk with
// its signature (signed; 64 zeros where one is "") or none, the last
// (empty) chunk's line followed by the checksum trailer, the trailer
// signature (signed) and the empty line.
func trailerFrame(data [][]byte, signed bool, sigs []string, trailerSig string) []byte {
	var b []byte
	for i, d := range data {
		b = append(b, strconv.FormatInt(int64(len(d)), 16)...)
		if signed {
			sig := sigs[i]
			if sig == "" {
				sig = strings.Repeat("0", 64)
			}
			b = append(b, ";chunk-signature="+sig...)
		}
		b = append(b, "\r\n"...)
		if len(d) > 0 {
			b = append(append(b, d...), "\r\n"...)
		}
	}
	b = append(b, checksumTrailer(data)+"\r\n"...)
	if signed {
		if trailerSig == "" {
			trailerSig = strings.Repeat("0", 64)
		}
		b = append(b, "x-amz-trailer-signature:"+trailerSig+"\r\n"...)
	}
	return append(b, "\r\n"...)
}

// trailerChain is the trailer signature of one trailer line with secret,
// chained to prev, as AWS's "Signature calculations for trailing headers"
// computes it.
func trailerChain(secret, amzDate, region, service, prev, line string) string {
	key := signingKey(secret, amzDate, region, service)
	return hex.EncodeToString(mac(key, strings.Join([]string{"AWS4-HMAC-SHA256-TRAILER", amzDate, amzDate[:8] + "/" + region + "/" + service + "/aws4_request", prev, hashOf(line + "\n")}, "\n")))
}

// frame is the aws-chunked body of data signed with sigs (64 zeros where
// a signature is "").
func frame(data [][]byte, sigs []string) []byte {
	var b []byte
	for i, d := range data {
		sig := sigs[i]
		if sig == "" {
			sig = strings.Repeat("0", 64)
		}
		b = append(b, strconv.FormatInt(int64(len(d)), 16)+";chunk-signature="+sig+"\r\n"...)
		b = append(append(b, d...), "\r\n"...)
	}
	return b
}

// chain is the chunk signatures of data with secret, seeded by seed, as
// AWS's "Transferring Payload in Multiple Chunks" computes them.
func chain(secret, amzDate, region, service, seed string, data [][]byte) []string {
	h := mac
	key := signingKey(secret, amzDate, region, service)
	scope := amzDate[:8] + "/" + region + "/" + service + "/aws4_request"
	var sigs []string
	prev := seed
	for _, d := range data {
		prev = hex.EncodeToString(h(key, strings.Join([]string{"AWS4-HMAC-SHA256-PAYLOAD", amzDate, scope, prev, hashOf(""), hashOf(string(d))}, "\n")))
		sigs = append(sigs, prev)
	}
	return sigs
}

// Sign signs r (its body b) with creds for service in us-east-1 at when,
// as an SDK client that names no x-amz-content-sha256 does.
func Sign(r *http.Request, creds aws.Credentials, service string, b []byte, when time.Time) error {
	return v4.NewSigner().SignHTTP(context.Background(), creds, r, hashOf(string(b)), service, "us-east-1", when)
}

// Verify checks, as AWS would, that a request the Custodian forwarded is
// signed with the real key (and carries its session token): the SigV4
// signature recomputed with Real over the headers it names, header-signed
// or presigned, from the bytes the upstream got — its canonical request
// modelled here apart from the SDK's signer, which the engine uses, so a
// request the engine signed otherwise than it sent fails. host is the
// Host the upstream got.
func Verify(method, host, path string, hs []filter.Header, contentLength string, body []byte) error {
	get := func(n string) string {
		for _, h := range hs {
			if strings.EqualFold(h.Name, n) {
				return h.Value
			}
		}
		return ""
	}
	rawPath, rawQuery, _ := strings.Cut(path, "?")
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return err
	}
	presigned := q.Get("X-Amz-Signature") != ""
	var cred, signed, sig, date string
	if presigned {
		cred, signed, sig, date = q.Get("X-Amz-Credential"), q.Get("X-Amz-SignedHeaders"), q.Get("X-Amz-Signature"), q.Get("X-Amz-Date")
		if q.Get("X-Amz-Security-Token") != TokenValue {
			return errors.New("the presigned query does not carry the real session token")
		}
	} else {
		auth := get("Authorization")
		for _, f := range strings.Split(strings.TrimPrefix(auth, "AWS4-HMAC-SHA256 "), ",") {
			k, v, _ := strings.Cut(strings.TrimSpace(f), "=")
			switch k {
			case "Credential":
				cred = v
			case "SignedHeaders":
				signed = v
			case "Signature":
				sig = v
			}
		}
		date = get("X-Amz-Date")
		if get("X-Amz-Security-Token") != TokenValue {
			return errors.New("the request does not carry the real session token")
		}
	}
	parts := strings.Split(cred, "/")
	if len(parts) != 5 || parts[0] != KeyIDValue {
		return errors.New("the credential is not the real key id's")
	}
	if _, err := time.Parse("20060102T150405Z", date); err != nil {
		return errors.New("no X-Amz-Date")
	}
	payload := "UNSIGNED-PAYLOAD"
	if !presigned {
		payload = get("X-Amz-Content-Sha256")
		if payload == "" {
			payload = hashOf(string(body))
		}
	}
	got := upstreamSignature(date, parts[2], parts[3], upstreamCanonical(method, host, rawPath, rawQuery, parts[3], hs, signed, contentLength, payload, presigned))
	if subtle.ConstantTimeCompare([]byte(got), []byte(sig)) != 1 {
		return errors.New("the signature does not verify with the real key")
	}
	switch get("X-Amz-Content-Sha256") {
	case filter.StreamingSignedPayload:
		want := string(frame(chunkData, chain(SecretValue, date, parts[2], parts[3], sig, chunkData)))
		if string(body) != want {
			return errors.New("the chunk signatures are not the real key's chain")
		}
	case filter.StreamingSignedTrailer:
		sigs := chain(SecretValue, date, parts[2], parts[3], sig, chunkData)
		want := string(trailerFrame(chunkData, true, sigs, trailerChain(SecretValue, date, parts[2], parts[3], sigs[len(sigs)-1], checksumTrailer(chunkData))))
		if string(body) != want {
			return errors.New("the chunk and trailer signatures are not the real key's chain")
		}
	case filter.StreamingUnsignedTrailer:
		// What S3 checks of it: the framing, and the checksum of the data.
		if string(body) != string(trailerFrame(chunkData, false, nil, "")) {
			return errors.New("the unsigned aws-chunked body is not the one sent, or its checksum is not its data's")
		}
	}
	return nil
}

// uriEncode is RFC 3986 encoding as AWS canonicalises a path or query
// component: every byte but the unreserved ones (and '/' when slash) as %XX.
func uriEncode(s string, slash bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~' || slash && c == '/' {
			b.WriteByte(c)
		} else {
			b.WriteString("%" + strings.ToUpper(hex.EncodeToString([]byte{c})))
		}
	}
	return b.String()
}

// upstreamCanonical is the canonical request an AWS service computes of
// what it received: S3's path as sent, another service's encoded once
// more; the query's pairs split at '&' alone, every pair counted (a bad
// escape kept as sent), '+' a plus, sorted; each signed header's every
// line, trimmed and joined.
func upstreamCanonical(method, host, rawPath, rawQuery, service string, hs []filter.Header, signed, contentLength, payload string, presigned bool) string {
	path := rawPath
	if service != "s3" {
		path = uriEncode(rawPath, true)
	}
	var pairs [][2]string
	if rawQuery != "" {
		for _, p := range strings.Split(rawQuery, "&") {
			k, v, _ := strings.Cut(p, "=")
			if dk, err := url.PathUnescape(k); err == nil {
				k = dk
			}
			if dv, err := url.PathUnescape(v); err == nil {
				v = dv
			}
			if presigned && k == "X-Amz-Signature" {
				continue
			}
			pairs = append(pairs, [2]string{uriEncode(k, false), uriEncode(v, false)})
		}
	}
	// By name, then by value: not by "name=value" ('=' sorts after digits).
	sort.Slice(pairs, func(i, j int) bool {
		if pairs[i][0] != pairs[j][0] {
			return pairs[i][0] < pairs[j][0]
		}
		return pairs[i][1] < pairs[j][1]
	})
	var q []string
	for _, p := range pairs {
		q = append(q, p[0]+"="+p[1])
	}
	var ch strings.Builder
	for _, n := range strings.Split(signed, ";") {
		var vals []string
		switch n {
		case "host":
			vals = []string{host}
		case "content-length": // the framing's, not a header line
			ch.WriteString(n + ":" + contentLength + "\n")
			continue
		}
		for _, h := range hs {
			if strings.EqualFold(h.Name, n) {
				vals = append(vals, strings.Join(strings.Fields(h.Value), " "))
			}
		}
		ch.WriteString(n + ":" + strings.Join(vals, ",") + "\n")
	}
	return method + "\n" + path + "\n" + strings.Join(q, "&") + "\n" + ch.String() + "\n" + signed + "\n" + payload
}

// mac is HMAC-SHA256 of s with key.
func mac(key []byte, s string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(s))
	return m.Sum(nil)
}

// signingKey is SigV4's signing key of secret for amzDate's day, region
// and service.
func signingKey(secret, amzDate, region, service string) []byte {
	key := []byte("AWS4" + secret)
	for _, part := range []string{amzDate[:8], region, service, "aws4_request"} {
		key = mac(key, part)
	}
	return key
}

// upstreamSignature is the signature of canonical with Real's secret.
func upstreamSignature(amzDate, region, service, canonical string) string {
	key := signingKey(SecretValue, amzDate, region, service)
	sts := strings.Join([]string{"AWS4-HMAC-SHA256", amzDate, amzDate[:8] + "/" + region + "/" + service + "/aws4_request", hashOf(canonical)}, "\n")
	return hex.EncodeToString(mac(key, sts))
}
