package relay

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"jr2.dev/boundary/filter"
)

// TestForwardSteps: Forward's hooks run in the order its doc gives, and
// each answer it writes is the one named: a Prepare that answers sends
// nothing; a send that fails is the engine's 502 through Fail; a client
// gone is 499 and Gone, with nothing written; an answer streams scrubbed;
// Log is told each status once.
func TestForwardSteps(t *testing.T) {
	eng := fuzzEngine(t)
	errDown := errors.New("down")
	for _, tc := range []struct {
		name       string
		prepare    func(out *http.Request) (int, bool)
		send       func(out *http.Request) (*http.Response, bool, error)
		cancel     bool
		wantStatus int
		wantBody   string
		wantSent   bool
		wantFail   bool
		wantGone   bool
	}{
		{name: "answered", wantStatus: 200, wantBody: "echo [secret:KEY]", wantSent: true,
			send: func(*http.Request) (*http.Response, bool, error) { return answer("echo " + fuzzValue), true, nil }},
		{name: "prepare answers", prepare: func(*http.Request) (int, bool) { return 299, true }, wantStatus: 299,
			send: func(*http.Request) (*http.Response, bool, error) {
				t.Error("sent after Prepare answered")
				return nil, false, errDown
			}},
		{name: "no answer", wantStatus: 502, wantFail: true, wantSent: true, wantBody: "jr2 custodian: " + fuzzTarget + " did not answer",
			send: func(*http.Request) (*http.Response, bool, error) { return nil, true, errDown }},
		{name: "client gone", cancel: true, wantStatus: 499, wantGone: true, wantSent: true,
			send: func(*http.Request) (*http.Response, bool, error) { return nil, true, context.Canceled }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			r := httptest.NewRequest("GET", "https://"+fuzzTarget+"/v1/x", nil).WithContext(ctx)
			if tc.cancel {
				cancel()
			}
			d := &filter.Decision{Target: fuzzTarget, Path: "/v1/x", Set: []filter.Header{{Name: "x-api-key", Value: fuzzValue}}}
			w := httptest.NewRecorder()
			var logged []int
			var failed, gone, sent bool
			status := Forward(w, r, &Exchange{
				Engine: eng, Decision: d, Scheme: "https", Target: fuzzTarget, Host: "api.example.com",
				Prepare: tc.prepare,
				Send: func(out *http.Request) (*http.Response, bool, error) {
					if out.Header.Get("x-api-key") != fuzzValue || out.Host != "api.example.com" || out.URL.Path != "/v1/x" {
						t.Errorf("the outbound request is not the engine's: %v %q", out.Header, out.Host)
					}
					sent = true
					return tc.send(out)
				},
				Fail: func(w http.ResponseWriter, rep *filter.Reply, _ bool, _ error) { failed = true; WriteReply(w, rep) },
				Gone: func() { gone = true },
				Log:  func(s int) { logged = append(logged, s) },
			})
			if status != tc.wantStatus || len(logged) != 1 || logged[0] != tc.wantStatus {
				t.Errorf("status %d, logged %v, want %d once", status, logged, tc.wantStatus)
			}
			if failed != tc.wantFail || gone != tc.wantGone || sent != tc.wantSent && tc.prepare == nil {
				t.Errorf("failed %v gone %v sent %v", failed, gone, sent)
			}
			if body := w.Body.String(); !strings.HasPrefix(body, tc.wantBody) || tc.wantBody == "" && body != "" {
				t.Errorf("body %q, want %q…", body, tc.wantBody)
			}
			if strings.Contains(w.Body.String(), fuzzValue) {
				t.Error("the answer holds the value")
			}
		})
	}
}
