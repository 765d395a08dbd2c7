package relay

import (
	"bytes"
	"io"
	"net/http"

	"jr2.dev/boundary/filter"
)

// SignedBody decides again, with its body, a request whose decision asked
// for it (filter.Decision.NeedBody: a SigV4 signature covers the body's
// hash and names none). It reads r's body whole, at most
// filter.MaxSignedBody bytes (past them: the engine's 413), puts it back on
// r so that it goes upstream as read, and returns the engine's decision
// (filter.Engine.DecideRequestBody). A body that does not arrive whole is
// the engine's 502 with nothing sent.
func SignedBody(eng *filter.Engine, target string, r *http.Request, req *filter.Request) filter.Decision {
	body, err := io.ReadAll(io.LimitReader(r.Body, filter.MaxSignedBody+1))
	switch {
	case err != nil:
		return filter.Decision{Target: target, Reply: eng.Unreachable(target, "the request body did not arrive whole")}
	case len(body) > filter.MaxSignedBody:
		return eng.BodyTooLarge(target)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return eng.DecideRequestBody(target, req, body)
}
