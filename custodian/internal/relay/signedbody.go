package relay

import (
	"bytes"
	"context"
	"io"
	"net/http"

	"jr2.dev/boundary/filter"
)

// SignedBody decides again, with its body, a request whose decision asked
// for it (filter.Decision.NeedBody: a SigV4 signature covers the body's
// hash and names none). It reads r's body whole, at most
// filter.MaxSignedBody bytes (past them: the engine's 413), each piece
// taken from the process's budget of held bodies first (filter.Hold: past
// it, the engine's 503), puts it back on r so that it goes upstream as
// read, and returns the engine's decision
// (filter.Engine.DecideRequestBody). The hold is given back when the body
// put back was read whole or closed (the transport closes it,
// whatever comes of the request), or when the request's context ends (its
// handler returned), or at once when the request is refused.
// A body that does not arrive whole is the engine's 502 with nothing sent.
func SignedBody(eng *filter.Engine, target string, r *http.Request, req *filter.Request) filter.Decision {
	hold := new(filter.Hold)
	var body []byte
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Body.Read(buf)
		if n > 0 && !hold.Take(n) {
			hold.Release()
			return eng.HeldBudgetSpent(target)
		}
		body = append(body, buf[:n]...)
		if len(body) > filter.MaxSignedBody {
			hold.Release()
			return eng.BodyTooLarge(target)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			hold.Release()
			return filter.Decision{Target: target, Reply: eng.Unreachable(target, "the request body did not arrive whole")}
		}
	}
	d := eng.DecideRequestBody(target, req, body)
	if d.Reply != nil {
		hold.Release()
		return d
	}
	r.Body = &heldBody{Reader: bytes.NewReader(body), hold: hold}
	// A request that never goes upstream (its dial refused, its client
	// gone) gives the hold back when its handler returns.
	context.AfterFunc(r.Context(), hold.Release)
	return d
}

// heldBody is a held body on its way upstream: its hold goes back once
// all of it was read, or when it is closed.
type heldBody struct {
	*bytes.Reader
	hold *filter.Hold
}

func (b *heldBody) Read(p []byte) (int, error) {
	n, err := b.Reader.Read(p)
	if b.Len() == 0 { // all of it read: a transport that knows the length reads no further
		b.hold.Release()
	}
	return n, err
}

func (b *heldBody) Close() error {
	b.hold.Release()
	return nil
}
