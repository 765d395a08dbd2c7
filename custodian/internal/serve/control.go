package serve

import (
	"bytes"
	"io"
	"net/http"
	"time"

	"jr2.dev/boundary/custodian/internal/relay"
	"jr2.dev/boundary/filter"
)

// controlBodyMax is the largest request body the control listener keeps to
// send again; a longer one is sent once, never retried.
const controlBodyMax = 1 << 20

func (s *Server) newControl() *http.Server {
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         s.dialer.DialContext,
		DisableCompression:  true,
		MaxIdleConnsPerHost: 8,
		IdleConnTimeout:     90 * time.Second,
	}
	return s.newServer("control", &controlHandler{s: s, tr: tr})
}

type controlHandler struct {
	s  *Server
	tr *http.Transport
}

// ServeHTTP forwards the four routes to the Orchestrator with the token
// swapped. A read (the surface, a delivery) is sent again on any failure,
// up to three tries; a pick or the ask only when nothing of it was sent, so
// one the Orchestrator may have read is never sent twice.
func (h *controlHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s := h.s
	eng := s.eng.Latest() // this request, and its answer, are decided with one set of values
	req := relay.RequestOf(r)
	d := eng.DecideControl(&req)
	if relay.UpgradeOf(r).Asked() {
		d = eng.DecideControlUpgrade()
	}
	if d.Reply != nil {
		s.log.Log(d.LogFields(0)...)
		relay.WriteReply(w, d.Reply)
		return
	}
	orch := eng.Config().Orchestrator
	var body []byte
	replayable := r.ContentLength == 0
	if r.ContentLength > 0 && r.ContentLength <= controlBodyMax || r.ContentLength < 0 {
		b, err := io.ReadAll(io.LimitReader(r.Body, controlBodyMax+1))
		if err != nil {
			s.log.Log(d.LogFields(400)...)
			relay.WriteReply(w, &filter.Reply{Status: 400, Body: "jr2 custodian: the request body could not be read"})
			return
		}
		if len(b) <= controlBodyMax {
			body, replayable = b, true
		} else {
			r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(b), r.Body))
		}
	}
	if replayable {
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
	}
	relay.Forward(w, r, &relay.Exchange{
		Engine: eng, Decision: &d, Scheme: "http", Target: orch, Host: orch,
		// A read, or a request nothing of which was sent, is sent again,
		// twice at most, its body replayed (the rule ServeHTTP's doc gives).
		Send: func(out *http.Request) (*http.Response, bool, error) {
			for attempt := 1; ; attempt++ {
				resp, sent, err := relay.RoundTrip(h.tr, out)
				if err == nil || r.Context().Err() != nil || attempt >= 3 || !replayable || !d.Read && sent {
					return resp, sent, err
				}
				select {
				case <-time.After(time.Duration(attempt) * 100 * time.Millisecond):
				case <-r.Context().Done():
					return nil, sent, r.Context().Err()
				}
				out.Body = io.NopCloser(bytes.NewReader(body))
				out.ContentLength = int64(len(body))
			}
		},
		Fail: func(w http.ResponseWriter, rep *filter.Reply, sent bool, _ error) { writeControlFailure(w, rep, sent) },
		Log:  func(status int) { s.log.Log(d.LogFields(status)...) },
	})
}

// writeControlFailure answers a forward that got no answer. The Harness
// reads x-jr2-custodian and the flags to decide whether a pick may be sent
// again: UF (nothing was sent) or UC (it may have been).
func writeControlFailure(w http.ResponseWriter, rep *filter.Reply, sent bool) {
	flags := "UF"
	if sent {
		flags = "UC"
	}
	w.Header().Set("X-Jr2-Custodian", "unreachable")
	w.Header().Set("X-Jr2-Custodian-Flags", flags)
	relay.WriteReplyKeep(w, rep)
}
