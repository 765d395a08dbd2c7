package httpkind

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"sort"

	"jr2.dev/boundary/effector/internal/effect"
	"jr2.dev/boundary/effector/internal/sendtrace"
	"jr2.dev/boundary/effector/internal/wire"
	"jr2.dev/boundary/internal/bundle"
	"jr2.dev/boundary/internal/mode"
)

// The receipts' records of an http effect. Their shapes are the contained
// run's (custodian/internal/mediator's records), so one reader (a replay,
// custodian inspect) reads both; every string in them is scrubbed: a held
// value is its label.
type (
	effectDecision struct {
		Effect   string `json:"effect"`
		Decision string `json:"decision"` // allow or refuse
		Reason   string `json:"reason,omitempty"`
	}
	httpRequest struct {
		Effect  string      `json:"effect"`
		Method  string      `json:"method"`
		URL     string      `json:"url"`
		Headers [][2]string `json:"headers"`
		Length  int64       `json:"content_length,omitempty"`
	}
)

// maxModeBody bounds a body a mode other than live reads whole.
const maxModeBody = 16 << 20

// decided records the fence's decision; false when it could not be.
func (k *Kind) decided(id, refused string, sc *effect.Scrubber) bool {
	if k.rec == nil {
		return true
	}
	d := effectDecision{Effect: id, Decision: "allow"}
	if refused != "" {
		d.Decision, d.Reason = "refuse", sc.String(refused)
	}
	_, err := k.rec.Append(bundle.KindEffectDecision, d)
	return err == nil
}

// sendRecorded is send with receipts or a mode: the request, its body and
// its answer are recorded (scrubbed), and the mode decides before anything
// is sent. The body is read whole (at most 16 MiB) so that its hash is in
// the record before the request goes.
func (k *Kind) sendRecorded(ctx context.Context, req *http.Request, shown string, max int64, sc *effect.Scrubber) wire.Outcome {
	id, _ := ctx.Value(effectID{}).(string)
	var body []byte
	if req.Body != nil && req.Body != http.NoBody {
		b, err := io.ReadAll(io.LimitReader(req.Body, maxModeBody+1))
		req.Body.Close()
		if err != nil {
			return wire.Outcome{Kind: wire.OutcomeRefused, Reason: "the body could not be read: " + sendtrace.Reason(err)}
		}
		if len(b) > maxModeBody {
			return wire.Outcome{Kind: wire.OutcomeRefused, Reason: "with receipts or a mode, a body is read whole before it is sent, and this one is over 16 MiB"}
		}
		body = b
		req.Body = io.NopCloser(bytes.NewReader(b))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	}
	url := sc.String(shown)
	var headers [][2]string
	names := make([]string, 0, len(req.Header))
	for n := range req.Header {
		names = append(names, n)
	}
	sort.Strings(names)
	headers = append(headers, [2]string{"Host", req.URL.Host})
	for _, n := range names {
		for _, v := range req.Header[n] {
			headers = append(headers, [2]string{sc.Folded().String(n), sc.String(v)})
		}
	}
	recorded := sc.Bytes(body)
	reqSeq, ok := k.append(bundle.KindHTTPRequest, httpRequest{Effect: id, Method: req.Method, URL: url, Headers: headers, Length: int64(len(body))})
	if ok && len(body) > 0 {
		_, ok = k.append(bundle.KindRequestBody, bundle.RequestBodyRecord{Request: reqSeq, BodyChunk: bundle.ChunkOf(0, recorded)})
		sum := sha256.Sum256(recorded)
		if ok {
			_, ok = k.append(bundle.KindRequestBody, bundle.RequestBodyRecord{Request: reqSeq, End: true, Chunks: 1, Bytes: int64(len(recorded)), SHA256: hex.EncodeToString(sum[:])})
		}
	}
	if !ok {
		return wire.Outcome{Kind: wire.OutcomeRefused, Reason: "the request could not be recorded in the receipts, so it was not sent"}
	}
	v := mode.Verdict{}
	if k.mode != nil && k.mode.Mode() != mode.Live {
		e, err := mode.Canon(req.Method, url, headers, recorded)
		if err != nil {
			return wire.Outcome{Kind: wire.OutcomeRefused, Reason: "the request has no canonical form: " + err.Error()}
		}
		// A fault that spoils the answer does so after this effect's
		// scrubber, so a spoiled byte cannot hide a value from it.
		plan := mode.Plan{Scrub: func() mode.Stream { return sc.NewStream() }}
		if v = k.mode.BeforeWith(e, reqSeq, plan); v.Action == mode.Refuse {
			return wire.Outcome{Kind: wire.OutcomeRefused, Reason: v.Reason}
		}
	}
	req, sent := sendtrace.Trace(req)
	resp, err := v.RoundTrip(k.client.Transport, req)
	if err != nil {
		k.append(bundle.KindHTTPResponse, bundle.ResponseRecord{Request: reqSeq, End: true, Error: "no answer"})
		return failed(ctx, sent(), err)
	}
	defer resp.Body.Close()
	out := readAnswer(ctx, resp, max, sc)
	k.recordAnswer(reqSeq, out, sc)
	return out
}

// recordAnswer records an outcome as the http-response records of its
// request: the status and headers, the body the outcome holds as one
// chunk, and the end ("cut" when the answer did not arrive whole).
func (k *Kind) recordAnswer(req uint64, out wire.Outcome, sc *effect.Scrubber) {
	if out.Kind != wire.OutcomeResponse {
		k.append(bundle.KindHTTPResponse, bundle.ResponseRecord{Request: req, End: true, Error: "cut"})
		return
	}
	var h [][2]string
	names := make([]string, 0, len(out.Headers))
	for n := range out.Headers {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		for _, v := range out.Headers[n] {
			h = append(h, [2]string{sc.Folded().String(n), sc.String(v)})
		}
	}
	k.append(bundle.KindHTTPResponse, bundle.ResponseRecord{Request: req, Status: out.Status, Headers: h})
	n := 0
	if out.Body != nil && *out.Body != "" {
		k.append(bundle.KindHTTPResponse, bundle.ResponseRecord{Request: req, BodyChunk: bundle.ChunkOf(0, []byte(sc.String(*out.Body)))})
		n = 1
	}
	k.append(bundle.KindHTTPResponse, bundle.ResponseRecord{Request: req, End: true, Chunks: n, Bytes: out.Size})
}

func (k *Kind) append(kind string, fields any) (uint64, bool) {
	if k.rec == nil {
		return 0, true
	}
	seq, err := k.rec.Append(kind, fields)
	return seq, err == nil
}

// effectID carries an effect's id to send through its context.
type effectID struct{}
