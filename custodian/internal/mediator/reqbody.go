package mediator

import (
	"io"

	"jr2.dev/boundary/internal/bundle"
)

// DefaultBodyBudget is how many bytes of request bodies one run records
// when Options.BodyBudget is 0. Past it, a body's further bytes are hashed
// but not recorded, and its closing record says "cut".
const DefaultBodyBudget = 64 << 20

// modeBodyMax bounds a request body a mode other than live reads whole
// before anything is decided (its hash is part of the canonical form).
const modeBodyMax = 16 << 20

// newBodyRecorder records one request body as it is read
// (bundle.BodyRecorder, shared with the Effector's receipts): each read
// through the engine's streaming scrubber, one chunk record per read,
// within the run's budget.
func (m *Mediator) newBodyRecorder(req uint64) *bundle.BodyRecorder {
	return bundle.NewBodyRecorder(m.o.Record, req, m.o.Broker.Engine().Scrubber().NewStream(), &m.bodyBudget, 0)
}

// readWhole reads a body whole for a mode that decides on its hash,
// recording it as it goes. It returns nil for no body, and ok false when
// the body is over modeBodyMax or could not be read or recorded.
func readWhole(rc io.Reader, rec *bundle.BodyRecorder) (body []byte, ok bool, err error) {
	body, err = io.ReadAll(io.LimitReader(rc, modeBodyMax+1))
	if err != nil {
		return nil, false, err
	}
	if len(body) > modeBodyMax {
		return nil, false, nil
	}
	if err := rec.Write(body); err != nil {
		return nil, false, err
	}
	if err := rec.End(""); err != nil {
		return nil, false, err
	}
	return body, true, nil
}
