package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"jr2.dev/boundary/effector/internal/wire"
	"jr2.dev/boundary/internal/valuedir/valuedirtest"
)

// rotated is SENTINEL's value after TestRotation's rotation.
const rotated = `R0tated/v4lue+Xq9&Lm2Zp7-sec~ond`

// TestRotation: the Effector follows a kubelet-style rotation
// of JR2_EFFECTOR_SECRETS with no restart. An effect started before the
// rotation completes with the value it started with; the next sends the
// new one; the old value, echoed after the rotation, is still scrubbed;
// a rotation to a guessable value is refused with its line and changes
// nothing.
func TestRotation(t *testing.T) {
	var mu sync.Mutex
	var got []string // the x-token each request carried, in order
	release := make(chan struct{})
	arrived := make(chan struct{}, 1)
	r := newRig(t, func(w http.ResponseWriter, req *http.Request) {
		tok := req.Header.Get("X-Token")
		mu.Lock()
		got = append(got, tok)
		mu.Unlock()
		switch req.URL.Path {
		case "/slow":
			arrived <- struct{}{}
			<-release
		case "/old":
			io.WriteString(w, "old "+sentinel+" ")
		}
		io.WriteString(w, "got "+tok)
	})
	secrets := filepath.Join(r.site.dir, "secrets")
	layout := func(v string) {
		t.Helper()
		valuedirtest.Write(t, secrets, map[string]string{"SENTINEL": v + "\n", "OTHER": "other-value-1234"})
	}
	os.Remove(filepath.Join(secrets, "SENTINEL"))
	os.Remove(filepath.Join(secrets, "OTHER"))
	layout(sentinel)
	p := r.site.run(t, nil)
	c := p.client()
	start := func(id, path string) {
		t.Helper()
		s := &wire.Start{Kind: wire.KindHTTP, TimeoutMs: 20000, HTTP: &wire.HTTP{Method: "GET",
			URL:     wire.Value{wire.Text(r.url(path))},
			Headers: map[string]wire.Value{"x-token": {wire.Secret("SENTINEL")}}}}
		if a, err := c.Start(context.Background(), id, s); err != nil || a.Status != 202 {
			t.Fatalf("start %s: %v", id, err)
		}
	}
	body := func(id string) string {
		t.Helper()
		out := settle(t, c, id, p.addr)
		if out.Body == nil {
			t.Fatalf("%s: no body: %+v", id, out)
		}
		return *out.Body
	}
	last := func() string {
		mu.Lock()
		defer mu.Unlock()
		return got[len(got)-1]
	}

	start("before", "/slow")
	<-arrived
	layout(rotated)
	waitFor(t, func() bool { return p.logCount("jr2.effector action=reload result=ok secrets=2\n") == 1 })
	close(release)
	if b := body("before"); b != "got [secret:SENTINEL]" {
		t.Fatalf("the effect started before the rotation: %q", b)
	}
	mu.Lock()
	if got[0] != sentinel {
		t.Fatal("the effect started before the rotation did not send the value it started with")
	}
	mu.Unlock()

	start("after", "/fast")
	if b := body("after"); b != "got [secret:SENTINEL]" || last() != rotated {
		t.Fatalf("the effect started after the rotation: %q, and it did not send the new value", b)
	}
	start("old", "/old")
	if b := body("old"); b != "old [secret:SENTINEL] got [secret:SENTINEL]" {
		t.Fatalf("the old value echoed after the rotation: %q", b)
	}

	layout("password1234")
	waitFor(t, func() bool {
		return p.logCount("jr2.effector action=reload result=refused secret=SENTINEL reason=guessable\n") == 1
	})
	start("refused", "/fast")
	if body("refused"); last() != rotated {
		t.Fatal("a refused rotation changed the value sent")
	}
	for _, l := range strings.Split(p.stdout.String()+p.stderr.String(), "\n") {
		for _, v := range []string{sentinel, rotated, "password1234", secrets} {
			if strings.Contains(l, v) {
				t.Fatalf("a line holds a value or a path: %q", l)
			}
		}
	}
}
