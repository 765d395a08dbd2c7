package client

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"jr2.dev/boundary/effector/internal/wire"
	"jr2.dev/boundary/internal/effectorkey"
)

// vector is a signature fixture of effector/testdata/wire.
type vector struct {
	Kind       string `json:"kind"`
	SigningKey string `json:"signingKey"`
	Placement  string `json:"placement"`
	Key        string `json:"key"`
	Status     int    `json:"status"`
	Method     string `json:"method"`
	Address    string `json:"address"`
	Target     string `json:"target"`
	Time       string `json:"time"`
	Nonce      string `json:"nonce"`
	Body       string `json:"body"`
	Signature  string `json:"signature"`
}

func readVector(t *testing.T, name string) vector {
	t.Helper()
	b, err := os.ReadFile("../testdata/wire/" + name)
	if err != nil {
		t.Fatal(err)
	}
	var v vector
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestFixtureVectors: the Orchestrator's side reproduces the golden
// vectors another language implements against.
func TestFixtureVectors(t *testing.T) {
	k := readVector(t, "signature.key.json")
	if got := hex.EncodeToString(DeriveKey(effectorkey.TrimNewline([]byte(k.SigningKey)), k.Placement)); got != k.Key {
		t.Errorf("DeriveKey = %s, want %s", got, k.Key)
	}
	for _, name := range []string{"signature.request.json", "signature.request-empty-body.json"} {
		v := readVector(t, name)
		key, _ := hex.DecodeString(v.Key)
		req, _ := http.NewRequest(v.Method, "http://"+v.Address+v.Target, strings.NewReader(v.Body))
		ms, _ := strconv.ParseInt(v.Time, 10, 64)
		Sign(req, key, v.Address, []byte(v.Body), time.UnixMilli(ms), v.Nonce)
		if got := req.Header.Get(wire.HeaderSignature); got != v.Signature {
			t.Errorf("%s: Sign = %s, want %s", name, got, v.Signature)
		}
		if req.Header.Get(wire.HeaderTime) != v.Time || req.Header.Get(wire.HeaderNonce) != v.Nonce {
			t.Errorf("%s: headers %v", name, req.Header)
		}
	}
	r := readVector(t, "signature.response.json")
	key, _ := hex.DecodeString(r.Key)
	if err := VerifyAnswer(key, r.Method, r.Target, r.Nonce, r.Status, []byte(r.Body), r.Signature); err != nil {
		t.Errorf("the response vector does not verify: %v", err)
	}
	if VerifyAnswer(key, r.Method, r.Target, r.Nonce, r.Status, []byte(r.Body+" "), r.Signature) == nil {
		t.Error("a changed answer verified")
	}
}

func TestNewNonce(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 1000; i++ {
		n := NewNonce()
		if !wire.ValidNonce(n) || seen[n] {
			t.Fatalf("nonce %q (valid %v, repeated %v)", n, wire.ValidNonce(n), seen[n])
		}
		seen[n] = true
	}
}

var key = []byte("0123456789abcdef0123456789abcdef")

// replica is a fake Effector replica that signs what it answers.
type replica struct {
	addr  string
	posts atomic.Int64
	gets  atomic.Int64
}

// fakeReplica answers a POST with post and a GET with get (status, body);
// sign=false answers unsigned.
func fakeReplica(t *testing.T, post, get func() (int, string), sign bool) *replica {
	t.Helper()
	r := &replica{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		io.Copy(io.Discard, req.Body)
		f := get
		if req.Method == http.MethodPost {
			r.posts.Add(1)
			f = post
		} else {
			r.gets.Add(1)
		}
		status, body := f()
		if sign {
			w.Header().Set(wire.HeaderSignature, wire.Sign(key, wire.ResponseLines(status, req.Method, req.RequestURI, req.Header.Get(wire.HeaderNonce), []byte(body))))
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	r.addr = strings.TrimPrefix(srv.URL, "http://")
	return r
}

func state(s, name string) func() (int, string) {
	return func() (int, string) {
		code := 200
		switch s {
		case wire.StateUnknown:
			code = 404
		case "started":
			code, s = 202, wire.StateRunning
		}
		return code, `{"state":"` + s + `","replica":{"name":"` + name + `","address":"a"}}`
	}
}

func stopping() (int, string) {
	return 503, `{"error":"stopping","replica":{"name":"old","address":"a"}}`
}

func deadAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func newClient(addrs ...string) *Client {
	return &Client{Key: key, Addresses: func(context.Context) ([]string, error) { return addrs, nil }}
}

var httpStart = &wire.Start{Kind: wire.KindHTTP, HTTP: &wire.HTTP{Method: "GET", URL: wire.Value{wire.Text("https://a.example/")}}}

func TestStartGoesOnOnlyWhereNothingStarted(t *testing.T) {
	dead := deadAddr(t)
	old := fakeReplica(t, stopping, state(wire.StateUnknown, "old"), true)
	fresh := fakeReplica(t, state("started", "fresh"), state(wire.StateUnknown, "fresh"), true)
	a, err := newClient(dead, old.addr, fresh.addr).Start(context.Background(), "e1", httpStart)
	if err != nil || a.Status != 202 || a.State.Replica.Name != "fresh" || a.Address != fresh.addr {
		t.Fatalf("start: %v %+v", err, a)
	}
	if old.posts.Load() != 1 || fresh.posts.Load() != 1 {
		t.Errorf("posts: old %d, fresh %d", old.posts.Load(), fresh.posts.Load())
	}
}

// TestStartLostAsksEveryone: an unsigned answer to a start is an answer
// lost: the start is not sent again, every replica is asked for the id.
func TestStartLostAsksEveryone(t *testing.T) {
	impostor := fakeReplica(t, state("started", "impostor"), state(wire.StateUnknown, "impostor"), false)
	holder := fakeReplica(t, state("started", "holder"), state(wire.StateRunning, "holder"), true)
	a, err := newClient(impostor.addr, holder.addr).Start(context.Background(), "e1", httpStart)
	if err != nil || a.State.Replica.Name != "holder" || a.State.State != wire.StateRunning {
		t.Fatalf("start: %v %+v", err, a)
	}
	if holder.posts.Load() != 0 || holder.gets.Load() != 1 {
		t.Errorf("the holder got %d posts and %d gets", holder.posts.Load(), holder.gets.Load())
	}
	// When nobody holds it, the effect is unknown and nothing is resent.
	nobody := fakeReplica(t, state("started", "n"), state(wire.StateUnknown, "n"), true)
	_, err = newClient(impostor.addr, nobody.addr).Start(context.Background(), "e2", httpStart)
	if !errors.Is(err, ErrUnknownEffect) || nobody.posts.Load() != 0 {
		t.Fatalf("err %v, posts %d", err, nobody.posts.Load())
	}
}

func TestStartNoReplica(t *testing.T) {
	old := fakeReplica(t, stopping, state(wire.StateUnknown, "old"), true)
	if _, err := newClient(deadAddr(t), old.addr).Start(context.Background(), "e1", httpStart); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("err %v", err)
	}
	big := &wire.Start{Kind: wire.KindHTTP, HTTP: &wire.HTTP{Method: "POST", URL: wire.Value{wire.Text("https://a.example/")},
		Body: &wire.Body{Text: func() *string { s := strings.Repeat("x", wire.MaxBody); return &s }()}}}
	if _, err := newClient(old.addr).Start(context.Background(), "e2", big); !errors.Is(err, ErrTooLarge) || old.posts.Load() != 1 {
		t.Fatalf("a start over 4 MiB: %v, posts %d", err, old.posts.Load())
	}
}

func TestPollFindsTheHolder(t *testing.T) {
	gone := deadAddr(t)
	other := fakeReplica(t, stopping, state(wire.StateUnknown, "other"), true)
	holder := fakeReplica(t, stopping, state(wire.StateSettled+"-bad", "holder"), true)
	// A holder whose signed answer is not the wire's shape is a defect.
	if _, err := newClient(gone, other.addr, holder.addr).Poll(context.Background(), "e1", holder.addr); !errors.Is(err, ErrDefect) {
		t.Fatalf("a malformed signed answer: %v", err)
	}
	good := fakeReplica(t, stopping, state(wire.StateRunning, "good"), true)
	a, err := newClient(gone, other.addr, good.addr).Poll(context.Background(), "e1", gone)
	if err != nil || a.State.Replica.Name != "good" {
		t.Fatalf("poll: %v %+v", err, a)
	}
	if _, err := newClient(gone, other.addr).Poll(context.Background(), "e1", other.addr); !errors.Is(err, ErrUnknownEffect) {
		t.Fatalf("poll with no holder: %v", err)
	}
}
