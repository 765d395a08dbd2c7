package mode

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"jr2.dev/boundary/filter/scrub"
	"jr2.dev/boundary/internal/bundle"
)

var names = Names{Mode: "--mode", From: "--from", Seed: "--seed", Faults: "--faults", Timing: "--timing"}

func TestCanon(t *testing.T) {
	for _, tc := range []struct {
		name        string
		method, url string
		header      [][2]string
		body        []byte
		want        Effect
		wantErr     bool
	}{
		{"default port and lowercase host", "GET", "https://API.Example.com/v1/x?q=1", nil, nil,
			Effect{Method: "GET", Scheme: "https", Host: "api.example.com", Port: 443, Path: "/v1/x", Query: "q=1"}, false},
		{"http default port", "GET", "http://h.example", nil, nil, Effect{Method: "GET", Scheme: "http", Host: "h.example", Port: 80, Path: "/"}, false},
		{"explicit port", "PUT", "https://h.example:8443/a%2Fb", nil, []byte("x"),
			Effect{Method: "PUT", Scheme: "https", Host: "h.example", Port: 8443, Path: "/a%2Fb",
				Body: "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881", Length: 1}, false},
		{"volatile headers left out, names lowercased and sorted", "GET", "https://h.example/", [][2]string{
			{"Host", "h.example"}, {"X-B", "2"}, {"Date", "now"}, {"Authorization", "Bearer jr2-held-T"}, {"Traceparent", "00-1"}, {"x-a", "1"}, {"Content-Length", "0"}}, nil,
			Effect{Method: "GET", Scheme: "https", Host: "h.example", Port: 443, Path: "/",
				Header: [][2]string{{"authorization", "Bearer jr2-held-T"}, {"x-a", "1"}, {"x-b", "2"}}}, false},
		{"empty body is none", "POST", "https://h.example/", nil, []byte{}, Effect{Method: "POST", Scheme: "https", Host: "h.example", Port: 443, Path: "/"}, false},
		{"not absolute", "GET", "/v1", nil, nil, Effect{}, true},
		{"another scheme", "GET", "ftp://h.example/", nil, nil, Effect{}, true},
		{"bad port", "GET", "https://h.example:99999/", nil, nil, Effect{}, true},
	} {
		got, err := Canon(tc.method, tc.url, tc.header, tc.body)
		if (err != nil) != tc.wantErr || fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: %+v, %v; want %+v (error %v)", tc.name, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestClassAndDiffers(t *testing.T) {
	get, _ := Canon("GET", "https://h.example/a", [][2]string{{"X-A", "1"}}, nil)
	getBody, _ := Canon("GET", "https://h.example/a", nil, []byte("b"))
	post, _ := Canon("POST", "https://h.example/a", nil, nil)
	if get.Class() != "read" || getBody.Class() != "write" || post.Class() != "write" {
		t.Errorf("classes: %s %s %s", get.Class(), getBody.Class(), post.Class())
	}
	for _, tc := range []struct {
		a, b string
		want string
	}{
		{"GET https://h.example/a", "POST https://h.example/a", "method"},
		{"GET https://h.example/a", "GET https://g.example/a", "host"},
		{"GET https://h.example/a", "GET https://h.example:444/a", "port"},
		{"GET https://h.example/a", "GET https://h.example/b", "path"},
		{"GET https://h.example/a?x", "GET https://h.example/a?y", "query"},
	} {
		am, au, _ := strings.Cut(tc.a, " ")
		bm, bu, _ := strings.Cut(tc.b, " ")
		a, _ := Canon(am, au, nil, nil)
		b, _ := Canon(bm, bu, nil, nil)
		if got := a.differs(b); got != tc.want {
			t.Errorf("%s vs %s: %q, want %q", tc.a, tc.b, got, tc.want)
		}
	}
	g2, _ := Canon("GET", "https://h.example/a", [][2]string{{"X-A", "2"}}, nil)
	if got := get.differs(g2); got != "headers.x-a" {
		t.Errorf("header: %q", got)
	}
	b2, _ := Canon("GET", "https://h.example/a", nil, []byte("c"))
	if got := getBody.differs(b2); got != "body" {
		t.Errorf("body: %q", got)
	}
	if get.Key() == g2.Key() || get.Key() != get.Key() {
		t.Error("keys do not tell forms apart")
	}
}

// One file per refusal of a mode's settings would be overkill for one
// line each; the table holds the message each names.
func TestNewRefusals(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Mode: "rerun"}, `--mode "rerun": the modes are live, read-only, replay, faults and preflight`},
		{Config{Mode: Replay}, "--from: name the recorded bundle to answer from"},
		{Config{Mode: Replay, From: "/nonexistent/run.jsonl"}, "--from:"},
		{Config{Mode: Live, From: "x"}, "--from: only replay and preflight answer from a recording"},
		{Config{Mode: ReadOnly, Seed: 1}, "--seed and --faults: only faults draws"},
		{Config{Mode: Faults}, "--faults: give the fault rates"},
		{Config{Mode: Faults, Faults: "read=2"}, "--faults: item 1: the rate is not a number from 0 to 1"},
		{Config{Mode: Faults, Faults: "read=0.1:boom"}, "--faults: item 1: the fault kinds are error, rate-limit, timeout, truncate, corrupt, reset"},
		{Config{Mode: Faults, Faults: "read=0.1,read=0.2"}, "--faults: item 2: read is given twice"},
		{Config{Mode: Faults, Faults: "a b=0.1"}, "--faults: item 1: the selector is not read, write, * or a host name"},
		{Config{Mode: Replay, From: "x", Timing: "slow"}, `--timing "slow": the paces are fast and recorded`},
		{Config{Mode: Faults, Faults: "*=0.1", Timing: "recorded"}, "--timing: only replay has a pace"},
	} {
		_, err := New(tc.cfg, names, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v; want %q", tc.cfg, err, tc.want)
		}
	}
}

func TestReplayNeedsAVerifiedSource(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "run.jsonl")
	w, err := bundle.Create(p, bundle.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w.Append(bundle.KindRunStart, map[string]string{"run": "x"})
	w.Close() // not sealed: TRUNCATED
	if _, err := New(Config{Mode: Replay, From: p}, names, nil); err == nil || !strings.Contains(err.Error(), "does not verify (TRUNCATED") {
		t.Errorf("an unsealed source: %v", err)
	}
}

// counting is a real upstream that counts what reaches it.
func counting(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		io.WriteString(w, strings.Repeat("0123456789", 100))
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func send(t *testing.T, l *Layer, srv *httptest.Server, method, path string) (int, string, error) {
	t.Helper()
	e, err := Canon(method, srv.URL+path, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	v := l.Before(e, 1)
	if v.Action == Refuse {
		return 0, v.Reason, nil
	}
	req, _ := http.NewRequest(method, srv.URL+path, nil)
	resp, err := v.RoundTrip(srv.Client().Transport, req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// A record a recording, then a replay of it with nothing sent; preflight
// and read-only send nothing they must not; the layer's own records
// verify and hold only what they were given.
func TestModesAgainstARealUpstream(t *testing.T) {
	srv, n := counting(t)
	var buf bytes.Buffer
	w := bundle.New(&buf, bundle.Options{})
	ro, _ := New(Config{Mode: ReadOnly}, names, w)
	if st, _, _ := send(t, ro, srv, "GET", "/a"); st != 200 || n.Load() != 1 {
		t.Errorf("read-only GET: %d, upstream %d", st, n.Load())
	}
	if _, why, _ := send(t, ro, srv, "DELETE", "/a"); !strings.Contains(why, "mode read-only: DELETE is not a read") || n.Load() != 1 {
		t.Errorf("read-only DELETE: %q, upstream %d", why, n.Load())
	}
	pf, _ := New(Config{Mode: Preflight}, names, w)
	if st, body, _ := send(t, pf, srv, "POST", "/b"); st != 200 || body != "" || n.Load() != 1 {
		t.Errorf("preflight: %d %q, upstream %d", st, body, n.Load())
	}
	if !bytes.Contains(buf.Bytes(), []byte(`"kind":"effect-planned"`)) {
		t.Error("no effect-planned record")
	}
	res, err := bundle.VerifyReader(bytes.NewReader(buf.Bytes()))
	if err != nil || res.Status != bundle.Truncated {
		t.Errorf("the layer's records: %v %v", res, err)
	}
}

// The draw: deterministic per seed and form and index, and its rate holds
// within a stated tolerance over a thousand effects.
func TestFaultDraws(t *testing.T) {
	l, err := New(Config{Mode: Faults, Seed: 42, Faults: "write=0.1,read=0.3:error"}, names, nil)
	if err != nil {
		t.Fatal(err)
	}
	count := func(l *Layer, method string) (faults int, kinds string) {
		for i := 0; i < 1000; i++ {
			e, _ := Canon(method, fmt.Sprintf("https://h.example/%d", i%50), nil, nil)
			v := l.Before(e, 0)
			if v.local != nil || v.fault != "" {
				faults++
				kinds += v.fault + fmt.Sprint(v.local != nil)
			}
		}
		return
	}
	reads, rk := count(l, "GET")
	writes, _ := count(l, "POST")
	if math.Abs(float64(reads)-300) > 45 || math.Abs(float64(writes)-100) > 30 {
		t.Errorf("faults: %d of 1000 reads (rate 0.3), %d of 1000 writes (rate 0.1); want within ±15%% and ±30%%", reads, writes)
	}
	if strings.Contains(rk, "false") {
		t.Error("read=0.3:error drew a kind other than error")
	}
	l2, _ := New(Config{Mode: Faults, Seed: 42, Faults: "write=0.1,read=0.3:error"}, names, nil)
	l3, _ := New(Config{Mode: Faults, Seed: 43, Faults: "write=0.1,read=0.3:error"}, names, nil)
	r2, k2 := count(l2, "GET")
	_, k3 := count(l3, "GET")
	if r2 != reads || k2 != rk {
		t.Error("the same seed drew differently")
	}
	if k3 == rk {
		t.Error("another seed drew the same")
	}
}

func TestSpoiledBodies(t *testing.T) {
	body := []byte(strings.Repeat("abcdefghij", 30)) // 300 bytes
	read := func(fault string, offset int, chunk int) ([]byte, error) {
		src := io.NopCloser(&chunky{b: body, n: chunk})
		s := &spoiled{rc: src, src: src, fault: fault, offset: offset}
		return io.ReadAll(s)
	}
	for _, chunk := range []int{1, 7, 300, 4096} {
		got, err := read(FaultTruncate, 100, chunk)
		if !bytes.Equal(got, body[:100]) || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("truncate at 100, chunks of %d: %d bytes, %v", chunk, len(got), err)
		}
		got, err = read(FaultTruncate, 1000, chunk)
		if !bytes.Equal(got, body) || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("truncate past the end, chunks of %d: %d bytes, %v", chunk, len(got), err)
		}
		for _, off := range []int{0, 5, 299, 1000} {
			got, err = read(FaultCorrupt, off, chunk)
			at := min(off, len(body)-1)
			want := bytes.Clone(body)
			want[at] ^= 0xff
			if !bytes.Equal(got, want) || err != nil {
				t.Errorf("corrupt at %d, chunks of %d: %q, %v", off, chunk, got, err)
			}
		}
		if _, err := read(FaultReset, 0, chunk); !errors.Is(err, errReset) {
			t.Errorf("reset: %v", err)
		}
	}
}

// chunky reads b n bytes at a time.
type chunky struct {
	b []byte
	n int
}

func (c *chunky) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	k := min(len(p), c.n, len(c.b))
	copy(p, c.b[:k])
	c.b = c.b[k:]
	return k, nil
}

func FuzzParseSpec(f *testing.F) {
	for _, s := range []string{"write=0.1,read=0.02", "api.example.com=0.5:error+timeout", "*=1", "", "read=", "=0.1", "read=0.1:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		rules, err := parseSpec(spec, "--faults")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "--faults: ") {
				t.Fatalf("an error that does not name the flag: %v", err)
			}
			return
		}
		for _, r := range rules {
			if r.rate < 0 || r.rate > 1 || math.IsNaN(r.rate) || len(r.kinds) == 0 || !validSelector(r.sel) {
				t.Fatalf("accepted a bad rule %+v from %q", r, spec)
			}
		}
	})
}

func FuzzCanon(f *testing.F) {
	f.Add("GET", "https://h.example/a?b", "X-A", "1", []byte("x"))
	f.Fuzz(func(t *testing.T, method, u, hn, hv string, body []byte) {
		e, err := Canon(method, u, [][2]string{{hn, hv}}, body)
		if err != nil {
			return
		}
		if e.Port < 1 || e.Port > 65535 || e.Host != strings.ToLower(e.Host) || e.differs(e) != "" {
			t.Fatalf("%+v", e)
		}
		e2, _ := Canon(method, u, [][2]string{{hn, hv}}, body)
		if e.Key() != e2.Key() {
			t.Fatal("Canon is not deterministic")
		}
	})
}

// replay --timing recorded waits the recorded gaps: the request's record
// to its status, then between the chunks' records, each bounded.
func TestRecordedTiming(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	clock := []time.Duration{0, 0, 200 * time.Millisecond, 300 * time.Millisecond, time.Hour, time.Hour}
	i := 0
	now := func() time.Time { d := clock[min(i, len(clock)-1)]; i++; return t0.Add(d) }
	p := filepath.Join(t.TempDir(), "run.jsonl")
	w, err := bundle.Create(p, bundle.Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	w.Append(bundle.KindRunStart, map[string]string{"run": "x"})
	seq, _ := w.Append(bundle.KindHTTPRequest, map[string]any{"method": "GET", "url": "https://h.example/a", "headers": [][2]string{}})
	w.Append(bundle.KindHTTPResponse, map[string]any{"request": seq, "status": 200})
	w.Append(bundle.KindHTTPResponse, map[string]any{"request": seq, "chunk": 0, "body": "one"})
	w.Append(bundle.KindHTTPResponse, map[string]any{"request": seq, "chunk": 1, "body": "two"})
	w.Append(bundle.KindHTTPResponse, map[string]any{"request": seq, "end": true})
	if err := w.Seal(); err != nil {
		t.Fatal(err)
	}
	l, err := New(Config{Mode: Replay, From: p, Timing: "recorded", Bound: time.Minute}, names, nil)
	if err != nil {
		t.Fatal(err)
	}
	e, _ := Canon("GET", "https://h.example/a", nil, nil)
	v := l.Before(e, 0)
	if v.replay == nil || !v.paced {
		t.Fatalf("no paced recorded answer: %+v", v)
	}
	if got := v.replay.at.Sub(v.replay.asked); got != 200*time.Millisecond {
		t.Errorf("request to status: %v, want 200ms", got)
	}
	req, _ := http.NewRequest("GET", "https://h.example/a", nil)
	resp := v.replay.response(req, true, time.Minute)
	gaps := resp.Body.(*replayBody).gaps
	if fmt.Sprint(gaps) != "[100ms 1m0s]" {
		t.Errorf("gaps %v, want [100ms 1m0s] (the second bounded)", gaps)
	}
	fast := v.replay.response(req, false, time.Minute).Body.(*replayBody).gaps
	if len(fast) != 0 {
		t.Errorf("fast replay waits: %v", fast)
	}
}

// A truncate or corrupt fault spoils the answer only after the host's
// scrubber: a flip or a cut inside a held value cannot hide the value
// from the scrub that follows. Without a scrubber the fault is a reset.
func TestSpoiledAfterTheScrub(t *testing.T) {
	const value = "sk-live-0123456789abcdefghijklmnop"
	sc, err := scrub.New([]scrub.Secret{{Name: "T", Value: []byte(value)}})
	if err != nil {
		t.Fatal(err)
	}
	body := "before " + value + " after"
	for _, fault := range []string{FaultTruncate, FaultCorrupt} {
		for off := 0; off < len(body); off++ {
			for _, chunk := range []int{1, 5, 4096} {
				v := Verdict{fault: fault, offset: off, scrub: func() Stream { return sc.NewStream() }}
				next := roundTripper(func(*http.Request) (*http.Response, error) {
					return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(&chunky{b: []byte(body), n: chunk})}, nil
				})
				req, _ := http.NewRequest("GET", "https://h.example/", nil)
				resp, err := v.RoundTrip(next, req)
				if err != nil {
					t.Fatal(err)
				}
				got, _ := io.ReadAll(resp.Body)
				for i := 0; i+8 <= len(value); i++ {
					if bytes.Contains(got, []byte(value[i:i+8])) {
						t.Fatalf("%s at %d, chunks of %d: %q holds 8 bytes of the value", fault, off, chunk, got)
					}
				}
			}
		}
	}
	v := Verdict{fault: FaultCorrupt, offset: 10}
	next := roundTripper(func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(body))}, nil
	})
	req, _ := http.NewRequest("GET", "https://h.example/", nil)
	resp, _ := v.RoundTrip(next, req)
	if b, err := io.ReadAll(resp.Body); len(b) != 0 || !errors.Is(err, errReset) {
		t.Errorf("corrupt without a scrubber: %q, %v; want a reset", b, err)
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
