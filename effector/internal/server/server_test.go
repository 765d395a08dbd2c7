package server

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"jr2.dev/boundary/effector/client"
	"jr2.dev/boundary/effector/internal/commandkind"
	"jr2.dev/boundary/effector/internal/effect"
	"jr2.dev/boundary/effector/internal/efftest"
	"jr2.dev/boundary/effector/internal/httpkind"
	"jr2.dev/boundary/effector/internal/wire"
	"jr2.dev/boundary/filter/scrub"
)

// sentinel is the secret no log line, reason or answer may carry in any
// form. It holds characters every encoding spells differently.
const sentinel = `S3nt/in+el=&?<>"\ é-value~`

var secrets = map[string]string{"SENTINEL": sentinel, "OTHER": "other-held-value-42"}

var testKey = bytes.Repeat([]byte{0x5a}, 32)

type rig struct {
	srv    *Server
	http   *httptest.Server
	addr   string
	log    *efftest.Buffer
	up     *efftest.Upstream
	c      *client.Client
	pki    *efftest.PKI
	upHits func() int64
}

type rigOptions struct {
	hold, expire time.Duration
	upstream     http.HandlerFunc
	started      time.Time
}

func newRig(t *testing.T, o rigOptions) *rig {
	t.Helper()
	if o.hold == 0 {
		o.hold = 10 * time.Second
	}
	if o.expire == 0 {
		o.expire = time.Minute
	}
	if o.started.IsZero() {
		o.started = time.Now()
	}
	pki := efftest.NewPKI(t, "127.0.0.1")
	if o.upstream == nil {
		o.upstream = func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"ok":true}`)
		}
	}
	r := &rig{log: &efftest.Buffer{}, pki: pki}
	r.up = efftest.StartTLS(t, pki, o.upstream)
	r.upHits = r.up.Hits
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.addr = ln.Addr().String()
	values := func(n string) ([]byte, bool) { v, ok := secrets[n]; return []byte(v), ok }
	held := []scrub.Secret{
		{Name: "OTHER", Value: []byte(secrets["OTHER"])},
		{Name: "SENTINEL", Value: []byte(sentinel)},
		{Name: "effector-key", Value: testKey},
		{Name: "effector-key", Value: []byte(hex.EncodeToString(testKey))},
	}
	r.srv, err = New(Options{
		Replica: wire.Replica{Name: "effector-a", Address: r.addr},
		Key:     testKey,
		Started: o.started,
		Kinds: map[string]effect.Kind{
			wire.KindHTTP: httpkind.New(httpkind.Options{
				Targets: []httpkind.Target{{Scheme: "https", Host: "127.0.0.1", Port: r.up.Port, Secrets: []string{"SENTINEL"}}},
				Values:  values, Roots: pki.Pool,
			}),
			wire.KindCommand: commandkind.New(commandkind.Options{Node: "node-a"}),
		},
		Held: held, Log: r.log, Hold: o.hold, Expire: o.expire,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.srv.Close)
	r.http = httptest.NewUnstartedServer(r.srv)
	r.http.Listener.Close()
	r.http.Listener = ln
	r.http.Start()
	t.Cleanup(r.http.Close)
	r.c = &client.Client{Key: testKey, Addresses: func(context.Context) ([]string, error) { return []string{r.addr}, nil }}
	return r
}

func (r *rig) url(path string) string { return "https://127.0.0.1:" + strconv.Itoa(r.up.Port) + path }

func (r *rig) start(t *testing.T, id string, h *wire.HTTP) *client.Answer {
	t.Helper()
	a, err := r.c.Start(context.Background(), id, &wire.Start{Kind: wire.KindHTTP, TimeoutMs: 5000, HTTP: h})
	if err != nil {
		t.Fatalf("start %s: %v", id, err)
	}
	return a
}

// settled polls until the effect settles.
func (r *rig) settled(t *testing.T, id string) *wire.Outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		a, err := r.c.Poll(ctx, id, r.addr)
		if err != nil {
			t.Fatalf("poll %s: %v", id, err)
		}
		if a.State.State == wire.StateSettled {
			return a.State.Outcome
		}
	}
}

func get(u string) *wire.HTTP { return &wire.HTTP{Method: "GET", URL: wire.Value{wire.Text(u)}} }

// raw sends a request signed (or not) by hand.
type raw struct {
	method, target, addr, nonce string
	body                        []byte
	t                           time.Time
	key                         []byte
	unsigned                    bool
}

func (r *rig) send(t *testing.T, q raw) *http.Response {
	t.Helper()
	if q.method == "" {
		q.method = "POST"
	}
	if q.target == "" {
		q.target = "/effects/e1"
	}
	if q.addr == "" {
		q.addr = r.addr
	}
	if q.nonce == "" {
		q.nonce = client.NewNonce()
	}
	if q.t.IsZero() {
		q.t = time.Now()
	}
	if q.key == nil {
		q.key = testKey
	}
	req, _ := http.NewRequest(q.method, "http://"+r.addr+q.target, bytes.NewReader(q.body))
	if !q.unsigned {
		client.Sign(req, q.key, q.addr, q.body, q.t, q.nonce)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func startBody(t *testing.T, h *wire.HTTP) []byte {
	b, err := wire.Marshal(&wire.Start{Kind: wire.KindHTTP, HTTP: h})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestUnsigned401: every refusal the spec lists is 401, an empty body, no
// signature, decided before the route — and starts nothing.
func TestUnsigned401(t *testing.T) {
	r := newRig(t, rigOptions{})
	body := startBody(t, get(r.url("/")))
	replayed := raw{body: body, nonce: "replayed-nonce"}
	if resp := r.send(t, replayed); resp.StatusCode != 202 {
		t.Fatalf("the first send got %d", resp.StatusCode)
	}
	r.settled(t, "e1")
	hits := r.upHits()
	cases := []struct {
		name string
		q    raw
	}{
		{"no signature", raw{body: body, target: "/effects/n1", unsigned: true}},
		{"a wrong key", raw{body: body, target: "/effects/n2", key: bytes.Repeat([]byte{1}, 32)}},
		{"signed for another replica", raw{body: body, target: "/effects/n3", addr: "10.9.9.9:8082"}},
		{"signed before the process started", raw{body: body, target: "/effects/n4", t: time.Now().Add(-2 * time.Minute)}},
		{"more than 5 minutes ahead", raw{body: body, target: "/effects/n5", t: time.Now().Add(6 * time.Minute)}},
		{"a replayed nonce", replayed},
		{"a body over 4 MiB", raw{body: bytes.Repeat([]byte(" "), wire.MaxBody+1), target: "/effects/n6"}},
		{"an unsigned request to no route", raw{target: "/nowhere", unsigned: true}},
		{"an unsigned poll", raw{method: "GET", target: "/effects/e1", unsigned: true}},
		{"an unsigned stop", raw{method: "DELETE", target: "/effects/n7", unsigned: true}},
		{"an unsigned health check by POST", raw{target: "/healthz", unsigned: true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp := r.send(t, c.q)
			got, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 401 || len(got) != 0 || resp.Header.Get(wire.HeaderSignature) != "" {
				t.Fatalf("got %d %q signature %q", resp.StatusCode, got, resp.Header.Get(wire.HeaderSignature))
			}
		})
	}
	if r.upHits() != hits || r.log.Count("action=start") != 1 || r.log.Count("stop-kept") != 0 {
		t.Errorf("a refused request acted: hits %d→%d, log:\n%s", hits, r.upHits(), r.log)
	}
}

func TestHealthz(t *testing.T) {
	r := newRig(t, rigOptions{})
	check := func(code int, text string) {
		t.Helper()
		resp, err := http.Get("http://" + r.addr + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != code || string(b) != text || resp.Header.Get(wire.HeaderSignature) != "" {
			t.Fatalf("healthz %d %q, want %d %q", resp.StatusCode, b, code, text)
		}
	}
	check(200, "ok")
	r.srv.Drain()
	check(503, "stopping")
}

func TestStartPollAttach(t *testing.T) {
	r := newRig(t, rigOptions{})
	a := r.start(t, "e-1", get(r.url("/v1")))
	if a.Status != 202 || a.State.State != wire.StateRunning || a.State.Replica != (wire.Replica{Name: "effector-a", Address: r.addr}) {
		t.Fatalf("start answered %d %+v", a.Status, a.State)
	}
	out := r.settled(t, "e-1")
	if out.Kind != wire.OutcomeResponse || out.Status != 200 || *out.Body != `{"ok":true}` || out.Size != 11 {
		t.Fatalf("outcome %+v", out)
	}
	// Attach: the same id answers the same effect and starts nothing.
	again := r.start(t, "e-1", get(r.url("/other")))
	if again.Status != 200 || again.State.State != wire.StateSettled || *again.State.Outcome.Body != *out.Body {
		t.Fatalf("attach answered %d %+v", again.Status, again.State)
	}
	if r.upHits() != 1 || r.log.Count("action=start effect=e-1 kind=http method=GET host=127.0.0.1") != 1 ||
		r.log.Count("action=settle effect=e-1 outcome=response status=200") != 1 {
		t.Fatalf("hits %d, log:\n%s", r.upHits(), r.log)
	}
}

// TestMalformedStartsNothing: each 400 names its reason, and nothing
// starts or is sent.
func TestMalformedStartsNothing(t *testing.T) {
	r := newRig(t, rigOptions{})
	cases := []struct {
		name string
		body string
		want string
	}{
		{"a secret not held", string(startBody(t, &wire.HTTP{Method: "GET", URL: wire.Value{wire.Text(r.url("/")), wire.Secret("NOT_HELD")}})), `secret "NOT_HELD": this Effector holds no secret`},
		{"an unknown field", `{"kind":"http","http":{"method":"GET","url":[{"text":"` + r.url("/") + `"}],"follow":true}}`, "http.follow: unknown field"},
		{"a framing header", `{"kind":"http","http":{"method":"GET","url":[{"text":"` + r.url("/") + `"}],"headers":{"transfer-encoding":[{"text":"chunked"}]}}}`, "frames or routes"},
		{"a secret after ?", `{"kind":"http","http":{"method":"GET","url":[{"text":"` + r.url("/?t=") + `"},{"secret":"SENTINEL"}]}}`, "after '?' or '#'"},
		{"a secret after #", `{"kind":"http","http":{"method":"GET","url":[{"text":"` + r.url("/#") + `"},{"secret":"SENTINEL"}]}}`, "after '?' or '#'"},
		{"a file body here", `{"kind":"http","http":{"method":"POST","url":[{"text":"` + r.url("/") + `"}],"body":{"file":"a"}}}`, "only a Sandbox Effector"},
		{"a command", `{"kind":"command","command":{"argv":["true"]}}`, "commands false"},
		{"not JSON", `{`, "not one JSON value"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			id := "bad-" + strconv.Itoa(i)
			a, err := r.c.Do(context.Background(), r.addr, "POST", id, []byte(c.body))
			if err != nil {
				t.Fatal(err)
			}
			if a.Status != 400 || !strings.Contains(a.Error.Error, c.want) || a.Error.Replica.Name != "effector-a" {
				t.Fatalf("answered %d %+v, want 400 saying %q", a.Status, a.Error, c.want)
			}
			if strings.Contains(a.Error.Error, sentinel) {
				t.Errorf("the reason carries the value")
			}
			p, err := r.c.Do(context.Background(), r.addr, "GET", id, nil)
			if err != nil || p.Status != 404 {
				t.Fatalf("after a 400 the id exists: %v %+v", err, p)
			}
		})
	}
	if r.upHits() != 0 || r.log.Count("action=start") != 0 {
		t.Errorf("hits %d, log:\n%s", r.upHits(), r.log)
	}
}

func TestRefusedSettlesAndSendsNothing(t *testing.T) {
	r := newRig(t, rigOptions{})
	r.start(t, "r1", &wire.HTTP{Method: "GET", URL: wire.Value{wire.Text(r.url("/v/"))}, Path: []string{".."}})
	r.start(t, "r2", get("https://127.0.0.1:1/"))
	for _, id := range []string{"r1", "r2"} {
		if out := r.settled(t, id); out.Kind != wire.OutcomeRefused {
			t.Errorf("%s settled %+v", id, out)
		}
		if r.log.Count("action=settle effect="+id+" outcome=refused\n") != 1 {
			t.Errorf("no settle line for %s:\n%s", id, r.log)
		}
	}
	if r.upHits() != 0 {
		t.Errorf("hits %d", r.upHits())
	}
}

func TestRoutesAndMethods(t *testing.T) {
	r := newRig(t, rigOptions{})
	r.start(t, "h1", get(r.url("/")))
	r.settled(t, "h1")
	cases := []struct {
		method, id string
		status     int
		state      string
		reason     string
	}{
		{"GET", "nobody", 404, wire.StateUnknown, ""},
		{"PUT", "h1", 405, "", "method not allowed"},
		{"PATCH", "nobody", 405, "", "method not allowed"},
		{"DELETE", "h1", 405, "", "cannot be stopped"},
	}
	for _, c := range cases {
		a, err := r.c.Do(context.Background(), r.addr, c.method, c.id, nil)
		if err != nil {
			t.Fatalf("%s %s: %v", c.method, c.id, err)
		}
		if a.Status != c.status {
			t.Fatalf("%s %s: %d", c.method, c.id, a.Status)
		}
		if c.state != "" && (a.State.State != c.state || a.State.Replica.Name != "effector-a") {
			t.Errorf("%s %s: %+v", c.method, c.id, a.State)
		}
		if c.reason != "" && (!strings.Contains(a.Error.Error, c.reason) || a.Error.Replica.Name != "effector-a") {
			t.Errorf("%s %s: %+v", c.method, c.id, a.Error)
		}
	}
	// A signed request to another route is answered, signed, 404.
	resp := r.send(t, raw{method: "GET", target: "/other"})
	if resp.StatusCode != 404 || resp.Header.Get(wire.HeaderSignature) == "" {
		t.Errorf("another route: %d", resp.StatusCode)
	}
}

// TestKeptStop: a DELETE of an id the replica does not hold is 404 and
// kept; an http start of that id drops the kept stop and runs.
func TestKeptStop(t *testing.T) {
	r := newRig(t, rigOptions{})
	a, err := r.c.Stop(context.Background(), "early", r.addr)
	if err != nil || a.Status != 404 || a.State.State != wire.StateUnknown {
		t.Fatalf("stop: %v %+v", err, a)
	}
	if r.log.Count("action=stop-kept effect=early\n") != 1 {
		t.Fatalf("log:\n%s", r.log)
	}
	if s := r.start(t, "early", get(r.url("/"))); s.Status != 202 {
		t.Fatalf("start after a kept stop: %d", s.Status)
	}
	if out := r.settled(t, "early"); out.Kind != wire.OutcomeResponse {
		t.Fatalf("outcome %+v", out)
	}
	r.srv.mu.Lock()
	_, kept := r.srv.kept["early"]
	r.srv.mu.Unlock()
	if kept {
		t.Error("the kept stop was not dropped")
	}
}

// stoppable is a kind whose effects run until stopped, for the state
// machine's stop and kept-stop paths a command will use.
type stoppable struct{ rule effect.KeptStop }

func (k stoppable) Prepare(id string, s *wire.Start) (*effect.Plan, error) {
	stop := make(chan struct{})
	var once sync.Once
	return &effect.Plan{Method: "-", Host: "-", KeptStop: k.rule,
		Run: func(ctx context.Context, _ *effect.Scrubber) wire.Outcome {
			<-stop
			code := 143
			return wire.Outcome{Kind: wire.OutcomeExited, Code: &code, Signal: "SIGTERM"}
		},
		Stop: func() { once.Do(func() { close(stop) }) },
	}, nil
}

func TestStopHookAndDidNotRun(t *testing.T) {
	r := newRig(t, rigOptions{})
	r.srv.o.Kinds = map[string]effect.Kind{wire.KindCommand: stoppable{rule: effect.DidNotRun}}
	cmd := &wire.Start{Kind: wire.KindCommand, Command: &wire.Command{Argv: []string{"sleep", "60"}}}
	if a, err := r.c.Start(context.Background(), "c1", cmd); err != nil || a.Status != 202 {
		t.Fatalf("start: %v %+v", err, a)
	}
	a, err := r.c.Stop(context.Background(), "c1", r.addr)
	if err != nil || a.Status != 200 || a.State.State != wire.StateSettled || a.State.Outcome.Signal != "SIGTERM" {
		t.Fatalf("stop answered %v %+v", err, a)
	}
	if r.log.Count("action=stop effect=c1\n") != 1 {
		t.Errorf("log:\n%s", r.log)
	}
	// A stop kept before a command's start: it does not run.
	r.c.Stop(context.Background(), "c2", r.addr)
	a, err = r.c.Start(context.Background(), "c2", cmd)
	if err != nil || a.Status != 200 || a.State.Outcome == nil || a.State.Outcome.Kind != wire.OutcomeUnknown ||
		!strings.HasPrefix(a.State.Outcome.Reason, "did not run") {
		t.Fatalf("start after a kept stop: %v %+v", err, a.State)
	}
}

// TestPollWakesOnSettle: with a hold far longer than the test's deadline,
// a poll can only return because the effect settled.
func TestPollWakesOnSettle(t *testing.T) {
	release := make(chan struct{})
	r := newRig(t, rigOptions{hold: time.Hour, upstream: func(w http.ResponseWriter, req *http.Request) {
		<-release
		io.WriteString(w, "late")
	}})
	r.start(t, "slow", get(r.url("/")))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan *client.Answer, 1)
	go func() {
		a, err := r.c.Do(ctx, r.addr, "GET", "slow", nil)
		if err != nil {
			t.Error(err)
		}
		done <- a
	}()
	close(release)
	a := <-done
	if a == nil || a.State.State != wire.StateSettled || *a.State.Outcome.Body != "late" {
		t.Fatalf("poll answered %+v", a)
	}
}

// TestPollHoldsThenRunning: a poll on a running effect answers running
// when the hold ends.
func TestPollHoldsThenRunning(t *testing.T) {
	release := make(chan struct{})
	r := newRig(t, rigOptions{hold: 50 * time.Millisecond, upstream: func(w http.ResponseWriter, req *http.Request) {
		<-release
	}})
	defer close(release)
	r.start(t, "held", get(r.url("/")))
	a, err := r.c.Do(context.Background(), r.addr, "GET", "held", nil)
	if err != nil || a.Status != 200 || a.State.State != wire.StateRunning {
		t.Fatalf("poll: %v %+v", err, a)
	}
}

func TestOutcomeExpires(t *testing.T) {
	r := newRig(t, rigOptions{expire: 100 * time.Millisecond})
	r.start(t, "read", get(r.url("/")))
	r.start(t, "unread", get(r.url("/")))
	r.settled(t, "read")
	deadline := time.Now().Add(10 * time.Second)
	for r.srv.lookup("unread") != nil || r.srv.lookup("read") != nil {
		if time.Now().After(deadline) {
			t.Fatal("the outcomes never expired")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, id := range []string{"read", "unread"} {
		a, err := r.c.Do(context.Background(), r.addr, "GET", id, nil)
		if err != nil || a.Status != 404 || a.State.State != wire.StateUnknown {
			t.Fatalf("%s after expiry: %v %+v", id, err, a)
		}
	}
	if r.log.Count("action=drop effect=unread reason=unread\n") != 1 || r.log.Count("action=drop effect=read ") != 0 {
		t.Errorf("log:\n%s", r.log)
	}
}

func TestDrain(t *testing.T) {
	release := make(chan struct{})
	r := newRig(t, rigOptions{upstream: func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/slow" {
			<-release
		}
		io.WriteString(w, "done")
	}})
	r.start(t, "before", get(r.url("/fast")))
	r.settled(t, "before")
	r.start(t, "inflight", get(r.url("/slow")))
	r.srv.Drain()
	if a, err := r.c.Do(context.Background(), r.addr, "POST", "new", startBody(t, get(r.url("/")))); err != nil ||
		a.Status != 503 || a.Error.Error != "stopping" {
		t.Fatalf("a start while draining: %v %+v", err, a)
	}
	// An attach still answers.
	if a := r.start(t, "inflight", get(r.url("/slow"))); a.Status != 200 {
		t.Fatalf("attach while draining: %d", a.Status)
	}
	ended := make(chan int, 1)
	go func() { ended <- r.srv.WaitDrained(context.Background()) }()
	close(release)
	r.settled(t, "inflight")
	if n := <-ended; n != 0 {
		t.Errorf("drain ended waiting for %d", n)
	}
	if r.log.Count("action=drain\n") != 1 || r.log.Count("action=drain-ended waiting=0\n") != 1 || r.log.Count("action=start effect=new") != 0 {
		t.Errorf("log:\n%s", r.log)
	}
}

func TestDrainTimeSpent(t *testing.T) {
	r := newRig(t, rigOptions{})
	r.start(t, "u1", get(r.url("/")))
	// Settle without reading: wait on the entry, not the wire.
	r.srv.mu.Lock()
	e := r.srv.effects["u1"]
	r.srv.mu.Unlock()
	<-e.done
	r.srv.Drain()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if n := r.srv.WaitDrained(ctx); n != 1 {
		t.Errorf("waiting %d", n)
	}
	if r.log.Count("action=drain-ended waiting=1\n") != 1 || r.log.Count("action=drop effect=u1 reason=unread\n") != 1 {
		t.Errorf("log:\n%s", r.log)
	}
}

// TestAnswersAreSigned: every answer but a 401 verifies over the pinned
// lines, and a changed byte does not.
func TestAnswersAreSigned(t *testing.T) {
	r := newRig(t, rigOptions{})
	for _, q := range []raw{
		{body: startBody(t, get(r.url("/"))), target: "/effects/s1"},
		{method: "GET", target: "/effects/s1"},
		{method: "GET", target: "/effects/none"},
		{method: "PUT", target: "/effects/s1"},
		{body: []byte("{"), target: "/effects/s2"},
		{method: "GET", target: "/effects/s1?x=1"},
	} {
		nonce := client.NewNonce()
		q.nonce = nonce
		resp := r.send(t, q)
		body, _ := io.ReadAll(resp.Body)
		method := q.method
		if method == "" {
			method = "POST"
		}
		sig := resp.Header.Get(wire.HeaderSignature)
		if err := client.VerifyAnswer(testKey, method, q.target, nonce, resp.StatusCode, body, sig); err != nil {
			t.Errorf("%s %s: %d not verified: %v", method, q.target, resp.StatusCode, err)
		}
		if !bytes.Contains(body, []byte(`"replica":{"name":"effector-a"`)) {
			t.Errorf("%s %s: the answer does not name the replica: %s", method, q.target, body)
		}
		tampered := append(bytes.Clone(body), ' ')
		if client.VerifyAnswer(testKey, method, q.target, nonce, resp.StatusCode, tampered, sig) == nil {
			t.Errorf("a changed body verified")
		}
		if client.VerifyAnswer(testKey, method, q.target, nonce, resp.StatusCode+1, body, sig) == nil {
			t.Errorf("another status verified")
		}
	}
}

// TestEchoLeaksNoForm: an upstream that reflects the secret and what the
// Effector built from it, in every form of scrub.md, at every offset and
// split, gets an answer that holds no form of any of them; nor does any
// log line. The placement key, echoed raw and as hex, is scrubbed too.
func TestEchoLeaksNoForm(t *testing.T) {
	echo := efftest.EchoHandler()
	r := newRig(t, rigOptions{upstream: func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/key" {
			w.Header().Set("X-Key", hex.EncodeToString(testKey))
			w.Write(append([]byte("key "+hex.EncodeToString(testKey)+" raw "), testKey...))
			return
		}
		echo.ServeHTTP(w, req)
	}})
	auths := []*wire.Auth{
		{Type: wire.AuthBearer, Secret: "SENTINEL"},
		{Type: wire.AuthBasic, Secret: "SENTINEL", User: "deploy"},
		{Type: wire.AuthText, Secret: "SENTINEL"},
	}
	for i, auth := range auths {
		id := "echo-" + auth.Type
		r.start(t, id, &wire.HTTP{Method: "POST",
			URL:              wire.Value{wire.Text(r.url("/v1/items/")), wire.Secret("SENTINEL"), wire.Text("/x?q=1")},
			Path:             []string{"seg " + strconv.Itoa(i)},
			Headers:          map[string]wire.Value{"x-api-key": {wire.Text("key "), wire.Secret("SENTINEL")}},
			Auth:             auth,
			Body:             &wire.Body{Text: strPtr("plain body")},
			MaxResponseBytes: 4 << 20,
		})
		a, err := r.c.Poll(context.Background(), id, r.addr)
		for err == nil && a.State.State != wire.StateSettled {
			a, err = r.c.Poll(context.Background(), id, r.addr)
		}
		if err != nil {
			t.Fatal(err)
		}
		out := a.State.Outcome
		if out.Kind != wire.OutcomeResponse || out.Body == nil || !strings.Contains(*out.Body, "[secret:SENTINEL]") {
			t.Fatalf("%s: outcome %+v", id, out.Kind)
		}
		enc := efftest.EscapeSegment(sentinel)
		seenURL := r.url("/v1/items/" + enc + "/x/seg%20" + strconv.Itoa(i) + "?q=1")
		built := []string{sentinel, "key " + sentinel, seenURL, strings.TrimPrefix(seenURL, r.url("")),
			"/v1/items/" + enc + "/x/seg%20" + strconv.Itoa(i)}
		switch auth.Type {
		case wire.AuthBearer:
			built = append(built, "Bearer "+sentinel)
		case wire.AuthBasic:
			built = append(built, "deploy:"+sentinel, "Basic "+efftest.Base64("deploy:"+sentinel))
		}
		whole, _ := wire.Marshal(a.State)
		for _, text := range []string{string(whole), *out.Body, headerText(out)} {
			if leaks := efftest.Leaks(text, built...); len(leaks) > 0 {
				t.Errorf("%s: the answer holds %d forms: %s", id, len(leaks), strings.Join(leaks, "; "))
			}
		}
	}
	r.start(t, "key", get(r.url("/key")))
	out := r.settled(t, "key")
	if out.Body == nil || *out.Body != "key [secret:effector-key] raw [secret:effector-key]" || out.Headers["x-key"][0] != "[secret:effector-key]" {
		t.Errorf("the key was not scrubbed: %q %q", *out.Body, out.Headers["x-key"])
	}
	if leaks := efftest.Leaks(r.log.String(), sentinel, string(testKey), hex.EncodeToString(testKey)); len(leaks) > 0 {
		t.Errorf("the log holds %s", strings.Join(leaks, "; "))
	}
}

func headerText(o *wire.Outcome) string {
	var b strings.Builder
	for n, vs := range o.Headers {
		b.WriteString(n + ": " + strings.Join(vs, ", ") + "\n")
	}
	return b.String()
}

func strPtr(s string) *string { return &s }

// TestUnsignedAnswerIsNoOutcome: the client refuses an answer a process
// without the key made.
func TestUnsignedAnswerIsNoOutcome(t *testing.T) {
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(wire.HeaderSignature, "AAAA")
		w.WriteHeader(200)
		io.WriteString(w, `{"state":"settled","replica":{"name":"x","address":"y"},"outcome":{"kind":"refused","reason":"forged"}}`)
	}))
	defer fake.Close()
	addr := strings.TrimPrefix(fake.URL, "http://")
	c := &client.Client{Key: testKey, Addresses: func(context.Context) ([]string, error) { return []string{addr}, nil }}
	_, err := c.Do(context.Background(), addr, "GET", "e1", nil)
	if !errors.Is(err, client.ErrLost) || !errors.Is(err, client.ErrUnsigned) {
		t.Fatalf("err %v", err)
	}
	if _, err := c.Poll(context.Background(), "e1", addr); !errors.Is(err, client.ErrUnknownEffect) {
		t.Fatalf("poll err %v", err)
	}
}

// TestHeaderNameCaseFolded: a held value in a response header's name is
// replaced whatever case the name arrived in.
func TestHeaderNameCaseFolded(t *testing.T) {
	r := newRig(t, rigOptions{upstream: func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("X-"+strings.ToUpper(secrets["OTHER"])+"-Echo", "1")
		w.Header().Set("X-Plain", "2")
	}})
	r.start(t, "names", get(r.url("/")))
	out := r.settled(t, "names")
	if _, ok := out.Headers["x-[secret:OTHER]-echo"]; !ok || out.Headers["x-plain"][0] != "2" {
		t.Fatalf("headers %v", out.Headers)
	}
	for n := range out.Headers {
		if strings.Contains(strings.ToLower(n), secrets["OTHER"]) {
			t.Errorf("a name holds the value: %q", n)
		}
	}
}
