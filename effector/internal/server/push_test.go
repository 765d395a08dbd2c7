package server

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	"jr2.dev/boundary/effector/internal/effect"
	"jr2.dev/boundary/effector/internal/wire"
)

// unstoppable stands in for the push kind: a plan with no Stop, which
// settles when the test lets it.
type unstoppable struct{ done chan struct{} }

func (k unstoppable) Prepare(id string, s *wire.Start) (*effect.Plan, error) {
	return &effect.Plan{Method: "-", Host: "-", KeptStop: effect.DropStop,
		Run: func(ctx context.Context, _ *effect.Scrubber) wire.Outcome {
			<-k.done
			return wire.Outcome{Kind: wire.OutcomePushed, Commit: "0123456789abcdef0123456789abcdef01234567", Ref: "refs/heads/main"}
		}}, nil
}

// TestDeletePushWords: a DELETE on a running push answers 405 in the words
// of response.405-push.json ("a push effect…", not "an push effect…"),
// and an http's 405 keeps "an http effect…" (response.405-error.json).
func TestDeletePushWords(t *testing.T) {
	r := newRig(t, rigOptions{})
	k := unstoppable{done: make(chan struct{})}
	defer close(k.done)
	r.srv.o.Kinds[wire.KindPush] = k
	push := &wire.Start{Kind: wire.KindPush, Push: &wire.Push{
		Slot: wire.Slot{Name: "app", URL: "ssh://git@git.example.com/org/app.git", Credentials: "example"}, Ref: "refs/heads/main"}}
	if a, err := r.c.Start(context.Background(), "p1", push); err != nil || a.Status != 202 {
		t.Fatalf("start: %v %+v", err, a)
	}
	r.start(t, "h1", get(r.url("/")))
	r.settled(t, "h1")
	for _, c := range []struct{ id, fixture string }{{"p1", "response.405-push.json"}, {"h1", "response.405-error.json"}} {
		b, err := os.ReadFile("../../testdata/wire/" + c.fixture)
		if err != nil {
			t.Fatal(err)
		}
		var want wire.Error
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatal(err)
		}
		a, err := r.c.Stop(context.Background(), c.id, r.addr)
		if err != nil || a.Status != 405 || a.Error == nil {
			t.Fatalf("DELETE %s: %v %+v", c.id, err, a)
		}
		if a.Error.Error != want.Error {
			t.Errorf("DELETE %s answered %q, want %q (%s)", c.id, a.Error.Error, want.Error, c.fixture)
		}
	}
}
