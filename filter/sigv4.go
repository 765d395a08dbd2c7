package filter

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"jr2.dev/boundary/internal/contract"
	"jr2.dev/boundary/internal/valuedir"
)

// An AWS key held by the engine: the agent signs with the stand-ins of its
// parts (the key id, the secret key and the session token have one each),
// and toward a host the key is bound to the engine checks that signature
// and signs the same request again with the real key.
//
// Why check a signature made with a public secret: the check proves
// nothing of who signed, but it pins what was signed — the method, the
// path, the query, the signed headers and the payload's hash — so the
// signature the engine makes covers exactly what the agent's did, and a
// request the agent's SDK did not sign as a whole is never signed with
// the real key. The signer is the AWS SDK for Go v2's own
// (aws/signer/v4), for the check (the signature recomputed with the
// stand-in secret, compared in constant time) as for the new signature:
// canonicalisation is where a SigV4 signer goes wrong, and one signer for
// both sides keeps the check and the signature in step with the one AWS
// keeps correct.
//
// The invariant: the real key signs exactly the bytes that go upstream,
// and those are exactly what the agent signed. An upstream that reads the
// request otherwise answers SignatureDoesNotMatch, and S3's answer echoes
// its canonical request (the real session token in it) and the real key's
// signature; so a request whose signed and sent forms could differ is
// refused (signedAsSent), and the query goes upstream as the signer
// spelled it when it signed (sign).
//
// An aws-chunked upload is read as its body streams (sigv4chunk.go,
// Decision.Chunks): its signed forms (STREAMING-AWS4-HMAC-SHA256-PAYLOAD
// and its -TRAILER form) are checked and signed again chunk by chunk and
// trailer, its unsigned trailer form goes on as sent. Not covered: the
// ECDSA streaming forms are refused (ReasonAWSChunked), and so is SigV4a
// itself (SigV4aText): its scope is a region set, not the bound host's
// region, and the AWS SDK for Go v2 exports no signer for it (its v4a
// signer is internal), so checking it would mean a second signer of the
// engine's own. Also not covered: a presigned chunked upload, and a
// request signed with the Date header instead of X-Amz-Date.

// awsKey is an AWS key's parts and their stand-ins. The parts never leave
// the engine except in a Decision's Set (the Authorization the engine
// signed, the session token) and Path (a presigned query it signed).
type awsKey struct {
	keyID, secret, token    string // the real parts; token "" when none
	sKeyID, sSecret, sToken string // their stand-ins

	// signers are the SDK's signers of this key, made once: [0] checks
	// with the stand-in secret, [1] signs with the real one, each in the
	// options of a service ([s3] or [other], signerOptions). A signer keeps
	// the signing key it derived (four HMAC-SHA256) for a region and
	// service and reuses it while the key id and the day are the same; one
	// secret per signer makes that cache one of (secret, day, region,
	// service), so a key derived with one secret never signs for another.
	signers [2][2]*v4.Signer
}

// The signers of an awsKey: by secret, then by service's options.
const (
	signStandIn, signReal = 0, 1
	signS3, signOther     = 0, 1
)

// newSigners makes k's signers.
func (k *awsKey) newSigners() {
	for i := range k.signers {
		for j := range k.signers[i] {
			s3 := j == signS3
			k.signers[i][j] = v4.NewSigner(func(o *v4.SignerOptions) {
				// S3 signs its path as sent, every other service escapes
				// it once more.
				o.DisableURIPathEscaping = s3
				o.DisableHeaderHoisting = true
			})
		}
	}
}

// awsPart is one part's name (its value file) and value.
type awsPart struct {
	Name  string
	Value []byte
}

// newAWSHeld builds the held secret of s, an AWS key, from its parts'
// values, each held to the rules of every value (valuedir.Check).
func newAWSHeld(s *SecretConfig, values map[string][]byte) (*held, []awsPart, error) {
	var parts []awsPart
	for _, n := range s.ValueNames() {
		v, ok := values[n]
		if !ok {
			return nil, nil, valuedir.NewValueError(n, valuedir.RuleMissing, errString("held secret "+s.Name+": no value was loaded for "+n))
		}
		if err := valuedir.Check(n, v, valuedir.Header); err != nil {
			return nil, nil, err
		}
		parts = append(parts, awsPart{Name: n, Value: append([]byte(nil), v...)})
	}
	k := &awsKey{
		keyID:   string(parts[0].Value),
		secret:  string(parts[1].Value),
		sKeyID:  contract.StandIn(contract.AWSKeyID.Of(s.Name)),
		sSecret: contract.StandIn(contract.AWSSecret.Of(s.Name)),
		sToken:  contract.StandIn(contract.AWSToken.Of(s.Name)),
	}
	if len(parts) > 2 {
		k.token = string(parts[2].Value)
	}
	k.newSigners()
	h := &held{
		name:    s.Name,
		standIn: s.StandIn,
		headers: append([]string(nil), s.Headers...),
		paths:   append([]string(nil), s.Paths...),
		aws:     k,
		names1:  []string{s.Name},
	}
	return h, parts, nil
}

type errString string

func (e errString) Error() string { return string(e) }

// SigV4 refusal reasons: the words of `action=refuse reason=…`.
const (
	ReasonSignature  = "signature"       // the SigV4 signature is malformed or does not verify
	ReasonScope      = "signature-scope" // its scope is not the bound host's region and service
	ReasonSignedDate = "signature-date"  // its X-Amz-Date is too far from now, or a presigned URL expired
	ReasonBodySize   = "body-size"       // the body whose hash it signed is over MaxSignedBody
	ReasonAWSChunked = "aws-chunked"     // a signed aws-chunked upload, not re-signed
	ReasonCopySource = "copy-source"     // an S3 copy reads an object outside the key's paths
)

// MaxSignedBody is the largest request body a host holds to hash for a
// SigV4 request that names no x-amz-content-sha256 (Decision.NeedBody):
// 16 MiB, above a model request with images, far below a host's memory.
const MaxSignedBody = 16 << 20

// MaxSkew is how far a SigV4 request's X-Amz-Date may be from the
// Custodian's clock: AWS's own limit.
const MaxSkew = 15 * time.Minute

// now is the engine's clock for SigV4 dates (a test sets it).
var now = time.Now

// Texts of the SigV4 refusals: fixed, naming no value, stand-in or
// signature.
const (
	SigV4MalformedText = "the SigV4 Authorization must be AWS4-HMAC-SHA256 Credential=<key id>/<date>/<region>/<service>/aws4_request, SignedHeaders=<names>, Signature=<hex>, with X-Amz-Date"
	SigV4VerifyText    = "the SigV4 signature does not verify with the stand-in secret key; sign with the AWS_SECRET_ACCESS_KEY of harness.env and send the request as signed"
	SigV4BodyText      = "this host cannot read the body whose hash the SigV4 signature covers; send x-amz-content-sha256"
	SigV4ChunkedText   = "of the aws-chunked uploads STREAMING-AWS4-HMAC-SHA256-PAYLOAD, its -TRAILER form and STREAMING-UNSIGNED-PAYLOAD-TRAILER go upstream; use one of them, or sign the payload whole"
	SigV4aText         = "SigV4a (AWS4-ECDSA-P256-SHA256) is not re-signed; sign with SigV4 (AWS4-HMAC-SHA256) for the bound host's region"
	SigV4TwiceText     = "the request is signed twice (an Authorization and a presigned query); send one signature"
	SigV4RangeText     = "range (or if-range) is a signed header; ranges never go upstream, so sign the request without them"
	SigV4RemovedText   = "a header the Custodian removes or replaces (a credential header, a hop-by-hop header, expect, x-forwarded-proto, x-envoy-*) is signed, so what goes upstream would not be what was signed; sign the request without it"
	SigV4OnceText      = "a signed header, or host, x-amz-date or x-amz-content-sha256, was sent more than once; send each once"
	SigV4QueryText     = "the query holds a pair that readers read differently (a bad %-escape, or a ';'); percent-encode it as the SDKs do"
)

// BodyTooLarge is the answer of a host to a request whose body, held for
// DecideRequestBody, grew past MaxSignedBody.
func (e *Engine) BodyTooLarge(target string) Decision {
	return Decision{Target: target, Reply: reply(413, ReasonBodySize, "the body of a SigV4 request that names no x-amz-content-sha256 is hashed here, and may be at most "+strconv.Itoa(MaxSignedBody)+" bytes; send x-amz-content-sha256 (UNSIGNED-PAYLOAD where the service takes it)")}
}

// DecideRequestBody is DecideRequest for a request whose decision asked
// for its body (Decision.NeedBody): the same rules, with body's SHA-256 as
// the payload hash a SigV4 signature covers. A host calls it once it holds
// the whole body (at most MaxSignedBody bytes) and sends that body on.
func (e *Engine) DecideRequestBody(target string, r *Request, body []byte) Decision {
	sum := sha256.Sum256(body)
	d := Decision{Target: target}
	e.decideRequestPayload(&d, r, hex.EncodeToString(sum[:]))
	d.Reply = e.scrubReply(d.Reply)
	return d
}

// emptyPayload is the SHA-256 of no body.
const emptyPayload = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// sigv4Params are the parts of a SigV4 signature, from the Authorization
// header or a presigned query.
type sigv4Params struct {
	keyID, date, region, service string // Credential's
	signed                       string // SignedHeaders, as sent
	signature                    string
	amzDate                      string // X-Amz-Date
	expires                      string // X-Amz-Expires (presigned only)
	token                        string // X-Amz-Security-Token as sent
	hasToken                     bool
}

// sigV4aAlgorithm is SigV4a's name, in an Authorization or a presigned
// X-Amz-Algorithm: a signature the engine refuses (SigV4aText).
const sigV4aAlgorithm = "AWS4-ECDSA-P256-SHA256"

// isChunkForm reports whether an x-amz-content-sha256 names an aws-chunked
// form that goes upstream (Chunks reads it).
func isChunkForm(contentSHA string) bool {
	_, ok := chunkFormOf(contentSHA)
	return ok
}

// isSigV4Auth reports whether an Authorization value is a SigV4 one.
func isSigV4Auth(v string) bool { return strings.HasPrefix(v, "AWS4-HMAC-SHA256 ") }

// parseSigV4Auth reads "AWS4-HMAC-SHA256 Credential=…, SignedHeaders=…,
// Signature=…": each once, nothing else.
func parseSigV4Auth(v string) (p sigv4Params, ok bool) {
	rest := strings.TrimPrefix(v, "AWS4-HMAC-SHA256 ")
	var cred string
	seen := 0
	for _, f := range strings.Split(rest, ",") {
		k, val, found := strings.Cut(strings.TrimSpace(f), "=")
		if !found {
			return p, false
		}
		switch k {
		case "Credential":
			cred, seen = val, seen|1
		case "SignedHeaders":
			p.signed, seen = val, seen|2
		case "Signature":
			p.signature, seen = val, seen|4
		default:
			return p, false
		}
	}
	if seen != 7 {
		return p, false
	}
	return p, p.credential(cred)
}

// credential reads Credential's <key id>/<date>/<region>/<service>/aws4_request.
func (p *sigv4Params) credential(c string) bool {
	parts := strings.Split(c, "/")
	if len(parts) != 5 || parts[4] != "aws4_request" {
		return false
	}
	p.keyID, p.date, p.region, p.service = parts[0], parts[1], parts[2], parts[3]
	return p.keyID != "" && len(p.signature) == 64 && isLowerHex(p.signature) && p.signed != ""
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if !('0' <= s[i] && s[i] <= '9' || 'a' <= s[i] && s[i] <= 'f') {
			return false
		}
	}
	return true
}

// presignedKeys are the query parameters of a presigned SigV4 request
// that the signer writes; the signature is left out of the query it signs.
var presignedKeys = []string{"X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-SignedHeaders", "X-Amz-Signature", "X-Amz-Security-Token"}

// isPresigned reports whether a query holds a SigV4 presigned signature.
func isPresigned(query string) bool {
	return strings.Contains(query, "X-Amz-Signature=") || strings.Contains(query, "X-Amz-Credential=")
}

// parsePresigned reads the presigned parameters of q, each once.
func parsePresigned(q url.Values) (p sigv4Params, ok bool) {
	one := func(k string) (string, bool) {
		v := q[k]
		if len(v) != 1 {
			return "", false
		}
		return v[0], true
	}
	alg, ok1 := one("X-Amz-Algorithm")
	cred, ok2 := one("X-Amz-Credential")
	var ok3, ok4, ok5 bool
	p.amzDate, ok3 = one("X-Amz-Date")
	p.signed, ok4 = one("X-Amz-SignedHeaders")
	p.signature, ok5 = one("X-Amz-Signature")
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || alg != "AWS4-HMAC-SHA256" {
		return p, false
	}
	if v, has := q["X-Amz-Expires"]; has {
		if len(v) != 1 {
			return p, false
		}
		p.expires = v[0]
	}
	if v, has := q["X-Amz-Security-Token"]; has {
		if len(v) != 1 {
			return p, false
		}
		p.token, p.hasToken = v[0], true
	}
	return p, p.credential(cred)
}

// sigv4Request is what decideSigV4 read of a request signed with SigV4.
type sigv4Request struct {
	presigned bool
	p         sigv4Params
	query     url.Values // presigned: the query less the signature
	payload   string     // the payload hash; "" when the body is needed
}

// decideSigV4 is the SigV4 swap toward a target an AWS key is bound to
// (bt.aws), after rules 1–5 and before the others, which it runs itself
// where they apply. It reports false for a request that is not signed
// with the key's stand-in key id — which today's rules then decide (its
// Authorization removed, and 403 without another swap). payload is the
// body's hash, when DecideRequestBody passed one.
func (e *Engine) decideSigV4(d *Decision, r *Request, bt *boundTarget, info []hinfo, path, query, norm, payload string) bool {
	k := bt.aws.aws
	authIdx, tokIdx := e.credIdx["authorization"], e.credIdx["x-amz-security-token"]
	var auth, amzDate, contentSHA, token string
	var hasAuth, hasToken, hasDate, hasSHA bool
	for i, h := range r.Headers {
		switch {
		case info[i].cred == int32(authIdx) && !hasAuth:
			auth, hasAuth = h.Value, true
		case info[i].cred == int32(tokIdx) && !hasToken:
			token, hasToken = h.Value, true
		case strings.EqualFold(h.Name, "x-amz-date") && !hasDate:
			amzDate, hasDate = h.Value, true
		case strings.EqualFold(h.Name, "x-amz-content-sha256") && !hasSHA:
			contentSHA, hasSHA = h.Value, true
		}
	}
	var sr sigv4Request
	switch {
	case hasAuth && strings.HasPrefix(auth, sigV4aAlgorithm+" ") && strings.Contains(auth, k.sKeyID),
		!hasAuth && isPresigned(query) && strings.Contains(query, "X-Amz-Algorithm="+sigV4aAlgorithm) && strings.Contains(percentDecode(query), k.sKeyID):
		d.Reply = reply(400, ReasonSignature, SigV4aText)
		return true
	case hasAuth && isSigV4Auth(auth):
		if isPresigned(query) {
			d.Reply = reply(400, ReasonSignature, SigV4TwiceText)
			return true
		}
		p, ok := parseSigV4Auth(auth)
		if !ok {
			if !strings.Contains(auth, k.sKeyID) {
				return false
			}
			d.Reply = reply(400, ReasonSignature, SigV4MalformedText)
			return true
		}
		p.amzDate, p.token, p.hasToken = amzDate, token, hasToken
		if !hasDate {
			d.Reply = reply(400, ReasonSignature, SigV4MalformedText)
			return true
		}
		sr.p = p
	case isPresigned(query):
		q, err := url.ParseQuery(query)
		if err != nil {
			d.Reply = reply(400, ReasonSignature, SigV4MalformedText)
			return true
		}
		p, ok := parsePresigned(q)
		if !ok {
			if !strings.Contains(percentDecode(query), k.sKeyID) {
				return false
			}
			d.Reply = reply(400, ReasonSignature, SigV4MalformedText)
			return true
		}
		sr.presigned, sr.p = true, p
		q.Del("X-Amz-Signature")
		sr.query = q
	default:
		return false
	}
	p := &sr.p
	if p.keyID != k.sKeyID {
		return false // another key's signature: today's rules
	}
	// 5: the key's own paths, and the object an S3 copy reads
	if !pathAllowed(norm, bt.aws.paths) {
		d.Reply = reply(403, ReasonPath, bt.aws.name+" may not be sent to this path; its paths are "+strings.Join(bt.aws.paths, ", "))
		return true
	}
	if len(bt.aws.paths) > 0 && !copySourcesAllowed(r.Headers, query, bt.aws.paths) {
		d.Reply = reply(403, ReasonCopySource, bt.aws.name+" may not copy from this source; a copy source (x-amz-copy-source) is sent once, /<bucket>/<key> under its paths ("+strings.Join(bt.aws.paths, ", ")+"), percent-encoded, at most ?versionId= after it")
		return true
	}
	// 6
	for i, in := range info {
		if in.cred >= 0 && (credAmong(info[:i], in.cred) || in.cred != int32(authIdx) && strings.IndexByte(r.Headers[i].Value, ',') >= 0) {
			d.Reply = reply(400, ReasonDuplicate, "header "+e.credList[in.cred]+" was sent more than once; send it once")
			return true
		}
	}
	// The scope: the bound host's region and service, the date X-Amz-Date's.
	region, service, _ := AWSScope(bt.host)
	if p.region != region || p.service != service {
		d.Reply = reply(403, ReasonScope, "the SigV4 scope must be region "+region+" and service "+service+", the bound host's; sign for them")
		return true
	}
	t, err := time.Parse("20060102T150405Z", p.amzDate)
	if err != nil || p.date != p.amzDate[:8] || t.Format("20060102T150405Z") != p.amzDate {
		d.Reply = reply(400, ReasonSignature, SigV4MalformedText)
		return true
	}
	if msg := signedDate(t, sr.presigned, p.expires); msg != "" {
		d.Reply = reply(403, ReasonSignedDate, msg)
		return true
	}
	// 10: a stand-in anywhere but the signature's own places
	searchQuery := query
	if sr.presigned {
		rest := url.Values{}
		for key, vs := range sr.query {
			if key != "X-Amz-Credential" && key != "X-Amz-Security-Token" {
				rest[key] = vs
			}
		}
		searchQuery = rest.Encode()
	}
	if name, place := e.standInElsewhere(path, searchQuery, r.Headers, info, nil); name != "" {
		d.Reply = standInReply(name, place)
		return true
	}
	signed := strings.Split(p.signed, ";")
	for _, n := range signed {
		if n == "range" || n == "if-range" {
			d.Reply = reply(400, ReasonSignature, SigV4RangeText)
			return true
		}
	}
	if msg := e.signedAsSent(r, signed, sr.presigned, query); msg != "" {
		d.Reply = reply(400, ReasonSignature, msg)
		return true
	}
	// The payload hash the signature covers.
	switch {
	case hasSHA && strings.HasPrefix(contentSHA, "STREAMING-") && !isChunkForm(contentSHA):
		d.Reply = reply(400, ReasonAWSChunked, SigV4ChunkedText)
		return true
	case hasSHA:
		sr.payload = contentSHA
	case sr.presigned:
		sr.payload = "UNSIGNED-PAYLOAD"
	case payload != "":
		sr.payload = payload
	default:
		// Fail closed: a host that does not read NeedBody answers this.
		d.Reply = reply(400, ReasonBodySize, SigV4BodyText)
		d.NeedBody = true
		return true
	}
	rawPath, _, _ := splitRequestTarget(r.Path)
	newPath, _, _ := splitRequestTarget(d.Path)
	in := sigv4Input{method: r.Method, host: r.Authority, upstreamHost: contract.UpstreamHost(d.Target), service: service, region: region, when: t, payload: sr.payload, signed: signed, headers: r.Headers, rawQuery: query, contentLength: r.ContentLength}
	if !in.verify(&sr, rawPath, k) {
		d.Reply = reply(403, ReasonSignature, SigV4VerifyText)
		return true
	}
	out, upQuery, ok := in.sign(&sr, newPath, k)
	if !ok {
		d.Reply = reply(403, ReasonSignature, SigV4VerifyText)
		return true
	}
	// 7, 8, 11
	var set []Header
	swaps := make([]swap, 0, 2)
	switch {
	case sr.presigned:
		d.Path = newPath + "?" + out
	case upQuery != "":
		d.Path = newPath + "?" + upQuery
	default:
		d.Path = newPath
	}
	if !sr.presigned {
		set = append(set, Header{Name: "authorization", Value: out})
		swaps = append(swaps, swap{secret: bt.aws, header: "authorization"})
	}
	if k.token != "" && !sr.presigned {
		set = append(set, Header{Name: "x-amz-security-token", Value: k.token})
		swaps = append(swaps, swap{secret: bt.aws, header: "x-amz-security-token"})
	}
	if !containsStr(signed, "accept-encoding") {
		set = append(set, identityEncoding)
	}
	if form, ok := chunkFormOf(contentSHA); ok && hasSHA {
		// A signed form's chain is seeded by the header signatures; the
		// unsigned form has none to chain.
		var seedOut string
		if form != formUnsignedTrailer {
			o, ok := parseSigV4Auth(out)
			if !ok {
				d.Reply = reply(403, ReasonSignature, SigV4VerifyText)
				return true
			}
			seedOut = o.signature
		}
		d.Chunks = newChunks(form, k.sSecret, k.secret, p.amzDate, region, service, p.signature, seedOut)
	}
	d.Set = set
	d.Secrets = bt.aws.names1
	d.Remove = e.removeList(info, swaps)
	return true
}

// copySourceName is the S3 header (also a presigned query parameter,
// which the SDKs hoist it to) that names the object a CopyObject or an
// UploadPartCopy reads: a path of its own, beside the request's.
const copySourceName = "x-amz-copy-source"

// copySourcesAllowed reports whether every copy source of a request, in
// its headers and its query, is under paths: a key whose paths keep it to
// some buckets would else copy from any bucket its IAM policy allows
// (which remains the real limit) into one it may write. A source is read
// as S3 reads it: [/]<bucket>/<key>, percent-decoded once, an optional
// ?versionId= after it; one sent twice, not decoded, not normal (a dot
// segment), or an access point's ARN in the bucket's place is refused.
func copySourcesAllowed(hs []Header, query string, paths []string) bool {
	var sources []string
	for _, h := range hs {
		if strings.EqualFold(h.Name, copySourceName) {
			sources = append(sources, h.Value)
		}
	}
	if strings.Contains(strings.ToLower(percentDecode(query)), copySourceName) {
		q, err := url.ParseQuery(query)
		if err != nil {
			return false
		}
		for k, vs := range q {
			if strings.EqualFold(k, copySourceName) {
				sources = append(sources, vs...)
			}
		}
	}
	if len(sources) > 1 {
		return false
	}
	for _, v := range sources {
		if !copySourceAllowed(v, paths) {
			return false
		}
	}
	return true
}

// copySourceAllowed is copySourcesAllowed for one value.
func copySourceAllowed(v string, paths []string) bool {
	raw, version, hasVersion := strings.Cut(v, "?")
	if hasVersion && (!strings.HasPrefix(version, "versionId=") || strings.ContainsAny(version, "?/%")) {
		return false
	}
	p, err := url.PathUnescape(raw)
	if err != nil || p == "" {
		return false
	}
	if p[0] != '/' {
		p = "/" + p
	}
	if strings.HasPrefix(p, "/arn:") || !isNormal(p) {
		return false
	}
	return pathAllowed(p, paths)
}

// signedDate is the refusal of a signature's date t, "" when it may go
// on: within MaxSkew of now, and for a presigned URL not past its
// X-Amz-Expires.
func signedDate(t time.Time, presigned bool, expires string) string {
	n := now()
	if presigned {
		secs, err := strconv.Atoi(expires)
		if expires == "" || err != nil || secs < 1 || secs > 7*24*3600 {
			return "a presigned URL names X-Amz-Expires, 1 to 604800 seconds; presign it again"
		}
		if t.After(n.Add(MaxSkew)) || n.After(t.Add(time.Duration(secs)*time.Second)) {
			return "the presigned URL has expired (or is dated ahead of this clock); presign it again"
		}
		return ""
	}
	if d := n.Sub(t); d > MaxSkew || d < -MaxSkew {
		return "the SigV4 X-Amz-Date is more than 15 minutes from this clock; sign the request again with the current time"
	}
	return ""
}

// sigv4Input is a request as the SDK's signer reads it: the signed
// headers alone, so that the signer signs exactly those.
type sigv4Input struct {
	method, host    string
	upstreamHost    string // the Host the upstream gets (contract.UpstreamHost): the new signature's
	service, region string
	when            time.Time
	payload         string
	signed          []string
	headers         []Header
	rawQuery        string // a header-signed request's query, as sent
	contentLength   string // Request.ContentLength
}

// request builds the signer's request for rawPath and rawQuery: every
// header the agent signed, under its lowercase name (the signer leaves out
// a few canonical names, such as User-Agent, that an agent may sign),
// except host (the signer's own), x-amz-date (set from when) and the
// session token (the credentials').
func (in *sigv4Input) request(rawPath, rawQuery string) *http.Request {
	u := &url.URL{Scheme: "https", Host: in.host, Opaque: "//" + in.host + rawPath, RawQuery: rawQuery}
	req := &http.Request{Method: in.method, URL: u, Host: in.host, Header: http.Header{}}
	for _, n := range in.signed {
		switch n {
		case "host", "x-amz-date", "x-amz-security-token":
			continue
		case "content-length":
			if l, err := strconv.ParseInt(in.contentLength, 10, 64); err == nil {
				req.ContentLength = l
			}
			continue
		}
		for _, h := range in.headers {
			if strings.EqualFold(h.Name, n) {
				req.Header[n] = append(req.Header[n], h.Value)
			}
		}
	}
	return req
}

// signer is k's signer with the secret of role (signStandIn, signReal)
// and the options of in's service.
func (in *sigv4Input) signer(k *awsKey, role int) *v4.Signer {
	if in.service == "s3" {
		return k.signers[role][signS3]
	}
	return k.signers[role][signOther]
}

// verify recomputes the agent's signature with the stand-in secret and
// compares it in constant time, with the signed header list.
func (in *sigv4Input) verify(sr *sigv4Request, rawPath string, k *awsKey) bool {
	cred := aws.Credentials{AccessKeyID: k.sKeyID, SecretAccessKey: k.sSecret}
	if sr.presigned {
		q := cloneValues(sr.query)
		if sr.p.hasToken {
			cred.SessionToken = sr.p.token
			q.Del("X-Amz-Security-Token")
		}
		sig, signedList, ok := in.presign(in.signer(k, signStandIn), cred, rawPath, q)
		return ok && signedList == sr.p.signed && subtle.ConstantTimeCompare([]byte(sig), []byte(sr.p.signature)) == 1
	}
	if sr.p.hasToken && containsStr(in.signed, "x-amz-security-token") {
		cred.SessionToken = sr.p.token
	}
	req := in.request(rawPath, in.rawQuery)
	if err := in.signer(k, signStandIn).SignHTTP(context.Background(), cred, req, in.payload, in.service, in.region, in.when); err != nil {
		return false
	}
	got, ok := parseSigV4Auth(req.Header.Get("Authorization"))
	return ok && got.signed == sr.p.signed && subtle.ConstantTimeCompare([]byte(got.signature), []byte(sr.p.signature)) == 1
}

// sign signs the request again with the real key, for newPath (the path
// that goes upstream): the Authorization value and the query it signed,
// in the spelling that goes upstream (the signer's canonical one), or a
// presigned query (query "").
func (in *sigv4Input) sign(sr *sigv4Request, newPath string, k *awsKey) (out, query string, ok bool) {
	cred := aws.Credentials{AccessKeyID: k.keyID, SecretAccessKey: k.secret, SessionToken: k.token}
	if sr.presigned {
		q := cloneValues(sr.query)
		q.Del("X-Amz-Security-Token")
		up := *in
		up.host = in.upstreamHost
		rawQuery, _, ok := up.presignQuery(in.signer(k, signReal), cred, newPath, q)
		return rawQuery, "", ok
	}
	up := *in
	up.host = in.upstreamHost
	req := up.request(newPath, in.rawQuery)
	if err := in.signer(k, signReal).SignHTTP(context.Background(), cred, req, in.payload, in.service, in.region, in.when); err != nil {
		return "", "", false
	}
	// The signer leaves its canonical query in the request: the query it
	// signed, spelled so that every reader reads the same pairs of it.
	return req.Header.Get("Authorization"), req.URL.RawQuery, true
}

// hostAltered reports whether a host may drop or rewrite header n on its
// way upstream, after the engine decided: the hop-by-hop names (each host
// frames the upstream connection anew), expect (a proxy answers 100
// itself), x-forwarded-proto (the Envoy routes remove it) and x-envoy-*
// (Envoy's own). No SDK signs any of them.
func hostAltered(n string) bool {
	switch n {
	case "connection", "proxy-connection", "keep-alive", "te", "trailer", "transfer-encoding", "upgrade", "expect", "x-forwarded-proto":
		return true
	}
	return strings.HasPrefix(n, "x-envoy-")
}

// signedAsSent is the refusal of a signature whose request cannot go
// upstream as signed, "" when it can: the real key signs exactly the
// bytes that go upstream, and those are exactly what the agent signed.
// An upstream that computes another canonical request answers
// SignatureDoesNotMatch, and S3's answer echoes its canonical request (the
// real session token in it) and the real key's signature, from which a
// presigned URL can be rebuilt. So the agent may not sign a credential
// header, which rule 8 removes or the engine replaces (but for the
// session token of a header signature, which the new signature covers as
// the engine sets it), or a header a host drops or rewrites (hostAltered),
// nor send a signed header twice, or host, x-amz-date
// or x-amz-content-sha256 twice (one value signed, two sent), nor a query
// that Go's parser and another read differently: the signer reads the
// query with url.ParseQuery, which drops a pair with a bad escape or a ';'
// that an upstream would count; the rest of the query goes upstream in
// the signer's own spelling (sign).
func (e *Engine) signedAsSent(r *Request, signed []string, presigned bool, query string) string {
	for _, n := range signed {
		if _, cred := e.credIdx[n]; cred && (presigned || n != "x-amz-security-token") || hostAltered(n) {
			return SigV4RemovedText
		}
	}
	for i, h := range r.Headers {
		if strings.EqualFold(h.Name, "host") {
			return SigV4OnceText // the Authority is the request's Host
		}
		if !strings.EqualFold(h.Name, "x-amz-date") && !strings.EqualFold(h.Name, "x-amz-content-sha256") && !containsStr(signed, contract.Lower(h.Name)) {
			continue
		}
		for _, o := range r.Headers[:i] {
			if strings.EqualFold(o.Name, h.Name) {
				return SigV4OnceText
			}
		}
	}
	if !presigned {
		if _, err := url.ParseQuery(query); err != nil {
			return SigV4QueryText
		}
	}
	return ""
}

// presign presigns with cred and returns the signature and the signed
// header list the signer wrote.
func (in *sigv4Input) presign(s *v4.Signer, cred aws.Credentials, rawPath string, q url.Values) (sig, signed string, ok bool) {
	_, out, ok := in.presignQuery(s, cred, rawPath, q)
	if !ok {
		return "", "", false
	}
	return out.Get("X-Amz-Signature"), out.Get("X-Amz-SignedHeaders"), true
}

// presignQuery presigns with s and cred and returns the signed raw query
// and its values.
func (in *sigv4Input) presignQuery(s *v4.Signer, cred aws.Credentials, rawPath string, q url.Values) (string, url.Values, bool) {
	req := in.request(rawPath, q.Encode())
	uri, _, err := s.PresignHTTP(context.Background(), cred, req, in.payload, in.service, in.region, in.when)
	if err != nil {
		return "", nil, false
	}
	_, rawQuery, found := strings.Cut(uri, "?")
	if !found {
		return "", nil, false
	}
	vals, err := url.ParseQuery(rawQuery)
	if err != nil {
		return "", nil, false
	}
	return rawQuery, vals, true
}

func cloneValues(q url.Values) url.Values {
	out := make(url.Values, len(q))
	for k, v := range q {
		out[k] = append([]string(nil), v...)
	}
	return out
}
