package httpkind

import (
	"bytes"
	"context"
	"io"
	"maps"
	"net/http"
	"slices"

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
		Decision string `json:"decision"`       // allow or refuse
		Rule     string `json:"rule,omitempty"` // a mode's refusal: its rule (mode:read-only)
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

// maxModeBody bounds a body a mode other than live reads whole: its hash
// is part of the effect's canonical form, so it is read before anything
// is decided.
const maxModeBody = 16 << 20

// DefaultBodyBudget is how many bytes of request bodies one Effector
// records in its receipts when Options.BodyBudget is 0. Past it, a body's
// further bytes are hashed but not recorded, and its closing record says
// "cut"; the body is still sent whole.
const DefaultBodyBudget = 64 << 20

// bodyChunkBytes is the most scrubbed bytes one http-request-body chunk
// record holds.
const bodyChunkBytes = 32 << 10

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
// is sent. Live streams the body, each read recorded before the transport
// gets its bytes; every other mode reads it whole first (at most 16 MiB),
// so that its hash is in the canonical form before the request goes.
func (k *Kind) sendRecorded(ctx context.Context, req *http.Request, b *built, max int64, sc *effect.Scrubber) wire.Outcome {
	id, _ := ctx.Value(effectID{}).(string)
	live := k.mode == nil || k.mode.Mode() == mode.Live
	hasBody := req.Body != nil && req.Body != http.NoBody
	var body []byte
	if hasBody && !live {
		whole, err := io.ReadAll(io.LimitReader(req.Body, maxModeBody+1))
		req.Body.Close()
		if err != nil {
			return wire.Outcome{Kind: wire.OutcomeRefused, Reason: "the body could not be read: " + sendtrace.Reason(err)}
		}
		if len(whole) > maxModeBody {
			return wire.Outcome{Kind: wire.OutcomeRefused, Reason: "mode " + k.mode.Mode() + " reads a body whole to match it before it is sent, and this one is over 16 MiB"}
		}
		body = whole
		req.Body = io.NopCloser(bytes.NewReader(whole))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(whole)), nil }
	}
	url := sc.String(b.shown)
	var headers [][2]string
	headers = append(headers, [2]string{"Host", req.URL.Host})
	for _, n := range slices.Sorted(maps.Keys(req.Header)) {
		for _, v := range req.Header[n] {
			headers = append(headers, [2]string{sc.Folded().String(n), sc.String(v)})
		}
	}
	reqSeq, ok := k.append(bundle.KindHTTPRequest, httpRequest{Effect: id, Method: req.Method, URL: url, Headers: headers, Length: req.ContentLength})
	if !ok {
		return wire.Outcome{Kind: wire.OutcomeRefused, Reason: "the request could not be recorded in the receipts, so it was not sent"}
	}
	var recorded []byte
	endBody := func() {}
	switch {
	case !hasBody || k.rec == nil:
		recorded = sc.Bytes(body)
	case live:
		// The transport may not rewind a recorded body: it would be sent,
		// and recorded, twice (keep-alive is off, so it never retries).
		rb := bundle.RecordedBody(req.Body, k.newBodyRecorder(reqSeq, sc), req.ContentLength)
		req.Body, req.GetBody = rb, nil
		// The transport may still hold the body when the answer has been
		// read: end it then, so its closing record comes before the
		// answer's, and is written before a seal.
		endBody = func() { rb.Close() }
	default:
		recorded = sc.Bytes(body)
		rec := k.newBodyRecorder(reqSeq, sc)
		if rec.Write(body) != nil || rec.End("") != nil {
			return wire.Outcome{Kind: wire.OutcomeRefused, Reason: "the request body could not be recorded in the receipts, so it was not sent"}
		}
	}
	v := mode.Verdict{}
	if !live {
		e, err := mode.Canon(req.Method, url, headers, recorded)
		if err != nil {
			return wire.Outcome{Kind: wire.OutcomeRefused, Reason: "the request has no canonical form: " + err.Error()}
		}
		// A fault that spoils the answer does so after this effect's
		// scrubber, so a spoiled byte cannot hide a value from it.
		plan := mode.Plan{Secrets: slices.Sorted(maps.Keys(b.forms)), Rule: "target " + hostPort(b.url.Scheme, hostKey(b.url), port(b.url)),
			Scrub: func() mode.Stream { return sc.NewStream() }}
		if v = k.mode.BeforeWith(e, reqSeq, plan); v.Action == mode.Refuse {
			k.append(bundle.KindEffectDecision, effectDecision{Effect: id, Decision: "refuse", Rule: v.Rule, Reason: v.Reason})
			return wire.Outcome{Kind: wire.OutcomeRefused, Reason: v.Reason}
		}
	}
	req, sent := sendtrace.Trace(req)
	resp, err := v.RoundTrip(k.client.Transport, req)
	if err != nil {
		endBody()
		k.append(bundle.KindHTTPResponse, bundle.ResponseRecord{Request: reqSeq, End: true, Error: "no answer"})
		return failed(ctx, sent(), err)
	}
	defer resp.Body.Close()
	out := readAnswer(ctx, resp, max, sc)
	endBody()
	k.recordAnswer(reqSeq, out, sc)
	return out
}

// newBodyRecorder records one request body (bundle.BodyRecorder): through
// the effect's streaming scrubber, in chunks of at most bodyChunkBytes,
// within the Effector's budget.
func (k *Kind) newBodyRecorder(req uint64, sc *effect.Scrubber) *bundle.BodyRecorder {
	return bundle.NewBodyRecorder(k.rec, req, sc.NewStream(), &k.budget, bodyChunkBytes)
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
	for _, n := range slices.Sorted(maps.Keys(out.Headers)) {
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
