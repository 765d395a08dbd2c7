package mode

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"jr2.dev/boundary/filter/scrub"
	"jr2.dev/boundary/internal/bundle"
)

// sentinel stands for a held value: the request that reaches the upstream
// carries it (the host injected it), the canonical form only its label.
const sentinel = "jr2-sentinel-7f3a9c1e5b"

// fixedClock is a bundle clock that moves 1 ms per record, so two runs of
// the same effects write the same bytes.
func fixedClock() func() time.Time {
	var mu sync.Mutex
	t := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		t = t.Add(time.Millisecond)
		return t
	}
}

// source is a bundle written by hand: a recording as the hosts write it
// (request, answer, seal), or the bundle a layer records into (check).
type source struct {
	t *testing.T
	w *bundle.Writer
	p string
}

func newBundle(t *testing.T, run string) *source {
	p := filepath.Join(t.TempDir(), run+".jsonl")
	w, err := bundle.Create(p, bundle.Options{Now: fixedClock()})
	if err != nil {
		t.Fatal(err)
	}
	s := &source{t: t, w: w, p: p}
	s.add(bundle.KindRunStart, map[string]string{"run": run})
	return s
}

func newSource(t *testing.T) *source { return newBundle(t, "recorded") }

func newOut(t *testing.T) *source { return newBundle(t, "run") }

func (s *source) add(kind string, fields any) uint64 {
	s.t.Helper()
	seq, err := s.w.Append(kind, fields)
	if err != nil {
		s.t.Fatal(err)
	}
	return seq
}

// request records a request and its body (one chunk and the closing record).
func (s *source) request(method, url string, header [][2]string, body string) uint64 {
	if header == nil {
		header = [][2]string{}
	}
	seq := s.add(bundle.KindHTTPRequest, map[string]any{"attempt": 1, "method": method, "url": url, "headers": header, "content_length": len(body)})
	if body != "" {
		e, _ := Canon(method, url, nil, []byte(body))
		s.add(bundle.KindRequestBody, bundle.RequestBodyRecord{Request: seq, BodyChunk: bundle.ChunkOf(0, []byte(body))})
		s.add(bundle.KindRequestBody, bundle.RequestBodyRecord{Request: seq, End: true, Chunks: 1, Bytes: int64(len(body)), SHA256: e.Body})
	}
	return seq
}

// answer records an answer: status and headers, each chunk, the end (with
// cut, the end's error).
func (s *source) answer(req uint64, status int, header [][2]string, cut string, chunks ...string) {
	s.add(bundle.KindHTTPResponse, bundle.ResponseRecord{Request: req, Status: status, Headers: header})
	var n int64
	for i, c := range chunks {
		s.add(bundle.KindHTTPResponse, bundle.ResponseRecord{Request: req, BodyChunk: bundle.ChunkOf(i, []byte(c))})
		n += int64(len(c))
	}
	s.add(bundle.KindHTTPResponse, bundle.ResponseRecord{Request: req, End: true, Chunks: len(chunks), Bytes: n, Error: cut})
}

func (s *source) seal() string {
	s.t.Helper()
	if err := s.w.Seal(); err != nil {
		s.t.Fatal(err)
	}
	return s.p
}

// check seals the bundle, requires VERIFIED and no form of the sentinel,
// and returns the file's bytes.
func (o *source) check() []byte {
	o.t.Helper()
	if err := o.w.Seal(); err != nil {
		o.t.Fatal(err)
	}
	res, err := bundle.Verify(o.p)
	if err != nil || res.Status != bundle.Verified {
		o.t.Fatalf("the layer's bundle: %v %v", res, err)
	}
	b, err := os.ReadFile(o.p)
	if err != nil {
		o.t.Fatal(err)
	}
	for _, form := range []string{sentinel, base64.StdEncoding.EncodeToString([]byte(sentinel)), hex.EncodeToString([]byte(sentinel))} {
		if bytes.Contains(b, []byte(form)) {
			o.t.Fatalf("a form of the sentinel is on the record:\n%s", b)
		}
	}
	return b
}

// parseLines decodes a bundle's lines.
func parseLines(b []byte) []map[string]any {
	var out []map[string]any
	for _, text := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(text, &m); err == nil {
			out = append(out, m)
		}
	}
	return out
}

// kinds lists the kinds of a bundle's records, run-start and seal left out.
func kinds(b []byte) []string {
	var out []string
	for _, l := range parseLines(b) {
		if k := l["kind"]; k != bundle.KindRunStart && k != bundle.KindSeal {
			out = append(out, k.(string))
		}
	}
	return out
}

// upstream is a real TLS server that counts what reaches it and echoes the
// sentinel it was given, so a leak through an answer would be seen too.
func upstream(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, strings.Repeat("0123456789", 100))
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// exchange is one effect through a layer as a host drives it: the form
// holds the label, the request sent holds the sentinel.
type exchange struct {
	method, path string
	body         string // the scrubbed body the form hashes; the request sends it with the sentinel
}

type outcome struct {
	refused string // the Reason of a Refuse
	status  int
	body    string
	err     error // RoundTrip's or the body's
	header  http.Header
}

func do(t *testing.T, l *Layer, srv *httptest.Server, x exchange, at uint64) outcome {
	t.Helper()
	label := [][2]string{{"Authorization", "Bearer [secret:T]"}, {"X-Trace", "1"}}
	var body []byte
	if x.body != "" {
		body = []byte(x.body)
	}
	e, err := Canon(x.method, srv.URL+x.path, label, body)
	if err != nil {
		t.Fatal(err)
	}
	v := l.Before(e, at)
	if v.Action == Refuse {
		return outcome{refused: v.Reason}
	}
	var rb io.Reader
	if x.body != "" {
		rb = strings.NewReader(x.body + sentinel)
	}
	req, _ := http.NewRequest(x.method, srv.URL+x.path, rb)
	req.Header.Set("Authorization", "Bearer "+sentinel)
	resp, err := v.RoundTrip(srv.Client().Transport, req)
	if err != nil {
		return outcome{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return outcome{status: resp.StatusCode, body: string(b), err: err, header: resp.Header}
}

// Each mode against a real upstream: what reaches it (its count is the
// witness), what the agent gets, what the layer records; every bundle
// verifies and holds no form of the sentinel.
func TestLayerAgainstARealUpstream(t *testing.T) {
	srv, n := upstream(t)
	host := strings.TrimPrefix(srv.URL, "https://")
	src := newSource(t)
	hdr := [][2]string{{"Authorization", "Bearer [secret:T]"}, {"X-Trace", "1"}}
	get := src.request("GET", srv.URL+"/a", hdr, "")
	src.answer(get, 201, [][2]string{{"Content-Type", "text/plain"}}, "", "rec", "orded")
	post := src.request("POST", srv.URL+"/b", hdr, `{"n":1}`)
	src.answer(post, 202, nil, "", "posted")
	from := src.seal()

	thousand := strings.Repeat("0123456789", 100)
	for _, tc := range []struct {
		name  string
		cfg   Config
		x     exchange
		sent  int64
		want  outcome
		kinds []string
	}{
		{"live GET", Config{}, exchange{method: "GET", path: "/a"}, 1, outcome{status: 200, body: thousand}, nil},
		{"live POST", Config{Mode: Live}, exchange{method: "POST", path: "/b", body: "x"}, 1, outcome{status: 200, body: thousand}, nil},
		{"read-only GET", Config{Mode: ReadOnly}, exchange{method: "GET", path: "/a"}, 1, outcome{status: 200, body: thousand}, nil},
		{"read-only HEAD", Config{Mode: ReadOnly}, exchange{method: "HEAD", path: "/a"}, 1, outcome{status: 200}, nil},
		{"read-only POST", Config{Mode: ReadOnly}, exchange{method: "POST", path: "/b"}, 0,
			outcome{refused: "mode read-only: POST is not a read; only GET, HEAD and OPTIONS without a body pass"}, nil},
		{"read-only GET with a body", Config{Mode: ReadOnly}, exchange{method: "GET", path: "/a", body: "q"}, 0,
			outcome{refused: "mode read-only: a request with a body is not a read; only GET, HEAD and OPTIONS without a body pass"}, nil},
		{"replay GET", Config{Mode: Replay, From: from}, exchange{method: "GET", path: "/a"}, 0, outcome{status: 201, body: "recorded"}, nil},
		{"replay POST", Config{Mode: Replay, From: from}, exchange{method: "POST", path: "/b", body: `{"n":1}`}, 0, outcome{status: 202, body: "posted"}, nil},
		{"replay a changed body", Config{Mode: Replay, From: from}, exchange{method: "POST", path: "/b", body: `{"n":2}`}, 0,
			outcome{status: 502, body: "jr2 replay: no recorded answer for POST " + host + "/b\n"}, []string{bundle.KindReplayDiverged}},
		{"preflight", Config{Mode: Preflight}, exchange{method: "POST", path: "/b", body: "x"}, 0, outcome{status: 200}, []string{bundle.KindEffectPlanned}},
		{"preflight from a recording", Config{Mode: Preflight, From: from}, exchange{method: "GET", path: "/a"}, 0,
			outcome{status: 201, body: "recorded"}, []string{bundle.KindEffectPlanned}},
		{"preflight from a recording, a miss", Config{Mode: Preflight, From: from}, exchange{method: "GET", path: "/zzz"}, 0,
			outcome{status: 200}, []string{bundle.KindEffectPlanned}},
		{"faults, rate 0", Config{Mode: Faults, Faults: "*=0"}, exchange{method: "GET", path: "/a"}, 1, outcome{status: 200, body: thousand}, nil},
		{"faults error", Config{Mode: Faults, Faults: "*=1:error"}, exchange{method: "GET", path: "/a"}, 0,
			outcome{status: 502, body: "jr2 faults: an injected error\n"}, []string{bundle.KindFaultInjected}},
		{"faults rate-limit", Config{Mode: Faults, Faults: "*=1:rate-limit"}, exchange{method: "POST", path: "/b", body: "x"}, 0,
			outcome{status: 429, body: "jr2 faults: an injected rate limit\n"}, []string{bundle.KindFaultInjected}},
		{"faults timeout", Config{Mode: Faults, Faults: "*=1:timeout", Bound: time.Millisecond}, exchange{method: "GET", path: "/a"}, 0,
			outcome{err: ErrTimeout}, []string{bundle.KindFaultInjected}},
		{"faults reset", Config{Mode: Faults, Faults: "*=1:reset"}, exchange{method: "GET", path: "/a"}, 1,
			outcome{status: 200, err: errReset}, []string{bundle.KindFaultInjected}},
		{"faults by host before class", Config{Mode: Faults, Faults: "read=0," + strings.Split(host, ":")[0] + "=1:error"},
			exchange{method: "GET", path: "/a"}, 0, outcome{status: 502, body: "jr2 faults: an injected error\n"}, []string{bundle.KindFaultInjected}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := n.Load()
			o := newOut(t)
			l, err := New(tc.cfg, names, o.w)
			if err != nil {
				t.Fatal(err)
			}
			got := do(t, l, srv, tc.x, 7)
			if got.refused != tc.want.refused || got.status != tc.want.status || got.body != tc.want.body || !errors.Is(got.err, tc.want.err) {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
			if sent := n.Load() - before; sent != tc.sent {
				t.Errorf("the upstream got %d requests, want %d", sent, tc.sent)
			}
			b := o.check()
			if fmt.Sprint(kinds(b)) != fmt.Sprint(tc.kinds) {
				t.Errorf("records %v, want %v", kinds(b), tc.kinds)
			}
			if len(tc.kinds) > 0 && !bytes.Contains(b, []byte(`"request":7`)) {
				t.Errorf("the layer's record does not point at the host's request record:\n%s", b)
			}
			if tc.cfg.Mode == Preflight && !bytes.Contains(b, []byte(`[secret:T]`)) {
				t.Errorf("the plan does not hold the effect's form (so the sentinel check proves nothing):\n%s", b)
			}
		})
	}
}

// never is a next that must not be called.
type never struct{ t *testing.T }

func (n never) RoundTrip(*http.Request) (*http.Response, error) {
	n.t.Error("a replay sent a request")
	return nil, errors.New("sent")
}

// reads is a body's reads, each one Read with a large buffer, and the error
// that ended them.
func reads(r io.Reader) ([]string, error) {
	var out []string
	buf := make([]byte, 64<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			out = append(out, string(buf[:n]))
		}
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

// Replay answers as recorded: duplicates in recorded order, each chunk one
// Read, a cut answer cut, an answer the host made itself, a request that
// got no answer as no answer; a miss is a 502 and a divergence naming the
// first field that differs from the nearest recorded request; what was
// never asked is listed.
func TestReplayAnswers(t *testing.T) {
	src := newSource(t)
	u := "https://h.example"
	dup1 := src.request("GET", u+"/dup", nil, "")
	src.answer(dup1, 200, nil, "", "one")
	src.answer(src.request("GET", u+"/dup", nil, ""), 200, nil, "", "two")
	src.answer(src.request("GET", u+"/chunks", nil, ""), 200, [][2]string{{"Content-Length", "6"}, {"X-Up", "a"}}, "", "ab", "cde", "f")
	src.answer(src.request("GET", u+"/cut", nil, ""), 200, [][2]string{{"Content-Length", "9"}}, "cut", "par")
	src.answer(src.request("GET", u+"/short", nil, ""), 200, [][2]string{{"Content-Length", "10"}}, "", "abc")
	src.answer(src.request("HEAD", u+"/chunks", nil, ""), 200, [][2]string{{"Content-Length", "6"}}, "")
	gone := src.request("POST", u+"/gone", nil, "b")
	src.add(bundle.KindHTTPResponse, bundle.ResponseRecord{Request: gone, End: true, Error: "the client went away"})
	local := src.request("GET", u+"/local", nil, "")
	refusal := "jr2 custodian: refused\n"
	src.add(bundle.KindHTTPResponse, bundle.ResponseRecord{Request: local, Status: 403, Local: true, BodyChunk: bundle.BodyChunk{Body: &refusal}})
	never1 := src.request("GET", u+"/never", nil, "")
	src.answer(never1, 200, nil, "")
	h := src.request("GET", u+"/h?q=0", [][2]string{{"X-A", "1"}}, "")
	src.answer(h, 200, nil, "", "h")
	from := src.seal()

	o := newOut(t)
	l, err := New(Config{Mode: Replay, From: from}, names, o.w)
	if err != nil {
		t.Fatal(err)
	}
	type ask struct {
		method, url string
		header      [][2]string
		body        string
	}
	send := func(a ask) (*http.Response, error) {
		var body []byte
		if a.body != "" {
			body = []byte(a.body)
		}
		e, err := Canon(a.method, a.url, a.header, body)
		if err != nil {
			t.Fatal(err)
		}
		v := l.Before(e, 99)
		if v.Action != Send || v.Sends() {
			t.Fatalf("%s %s: a replay verdict that refuses or sends: %+v", a.method, a.url, v)
		}
		req, _ := http.NewRequest(a.method, a.url, nil)
		return v.RoundTrip(never{t}, req)
	}
	for _, tc := range []struct {
		ask
		status int
		reads  []string
		err    error
		header string // a header the answer carries, name=value
		length int64
	}{
		{ask: ask{"GET", u + "/dup", nil, ""}, status: 200, reads: []string{"one"}, length: -1},
		{ask: ask{"GET", u + "/dup", nil, ""}, status: 200, reads: []string{"two"}, length: -1},
		{ask: ask{"GET", u + "/chunks", nil, ""}, status: 200, reads: []string{"ab", "cde", "f"}, header: "X-Up=a", length: 6},
		{ask: ask{"GET", u + "/cut", nil, ""}, status: 200, reads: []string{"par"}, err: io.ErrUnexpectedEOF, length: -1},
		{ask: ask{"GET", u + "/short", nil, ""}, status: 200, reads: []string{"abc"}, header: "Content-Length=", length: -1},
		{ask: ask{"HEAD", u + "/chunks", nil, ""}, status: 200, header: "Content-Length=6", length: 6},
		{ask: ask{"POST", u + "/gone", nil, "b"}, err: ErrNoRecordedAnswer},
		{ask: ask{"GET", u + "/local", nil, ""}, status: 403, reads: []string{refusal}, length: -1},
		{ask: ask{"GET", u + "/dup", nil, ""}, status: 502, reads: []string{"jr2 replay: no recorded answer for GET h.example/dup\n"}},
		{ask: ask{"GET", u + "/h?q=0", [][2]string{{"X-A", "2"}}, ""}, status: 502, reads: []string{"jr2 replay: no recorded answer for GET h.example/h?q=0\n"}},
		{ask: ask{"PUT", u + "/h?q=0", [][2]string{{"X-A", "1"}}, ""}, status: 502, reads: []string{"jr2 replay: no recorded answer for PUT h.example/h?q=0\n"}},
		{ask: ask{"GET", "https://g.example/h?q=0", [][2]string{{"X-A", "1"}}, ""}, status: 502, reads: []string{"jr2 replay: no recorded answer for GET g.example/h?q=0\n"}},
		{ask: ask{"GET", "https://h.example:444/h?q=0", [][2]string{{"X-A", "1"}}, ""}, status: 502, reads: []string{"jr2 replay: no recorded answer for GET h.example:444/h?q=0\n"}},
		{ask: ask{"GET", u + "/h?q=1", [][2]string{{"X-A", "1"}}, ""}, status: 502, reads: []string{"jr2 replay: no recorded answer for GET h.example/h?q=1\n"}},
		{ask: ask{"GET", "https://[::1]/h", nil, ""}, status: 502, reads: []string{"jr2 replay: no recorded answer for GET [::1]/h\n"}},
	} {
		resp, err := send(tc.ask)
		if tc.status == 0 {
			if !errors.Is(err, tc.err) || resp != nil {
				t.Errorf("%s %s: %v, %v; want no answer, %v", tc.method, tc.url, resp, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s %s: %v", tc.method, tc.url, err)
		}
		got, err := reads(resp.Body)
		length := tc.length
		if length == 0 { // an answer made here: its length is its text's
			length = int64(len(strings.Join(tc.reads, "")))
		}
		if resp.StatusCode != tc.status || fmt.Sprint(got) != fmt.Sprint(tc.reads) || !errors.Is(err, tc.err) || resp.ContentLength != length {
			t.Errorf("%s %s: %d %q (length %d), %v; want %d %q (length %d), %v", tc.method, tc.url,
				resp.StatusCode, got, resp.ContentLength, err, tc.status, tc.reads, length, tc.err)
		}
		if name, value, ok := strings.Cut(tc.header, "="); ok && resp.Header.Get(name) != value {
			t.Errorf("%s %s: header %s %q, want %q", tc.method, tc.url, name, resp.Header.Get(name), value)
		}
	}
	var divs []string
	for _, m := range parseLines(o.check()) {
		if m["kind"] == bundle.KindReplayDiverged {
			divs = append(divs, fmt.Sprintf("%v %v %v %v %v %v", m["request"], m["method"], m["host"], m["path"], m["field"], m["nearest"]))
		}
	}
	want := []string{
		fmt.Sprintf("99 GET h.example /dup count %d", dup1), // every equal request consumed: the earliest
		fmt.Sprintf("99 GET h.example /h headers.x-a %d", h),
		fmt.Sprintf("99 PUT h.example /h method %d", h),
		fmt.Sprintf("99 GET g.example /h host %d", h),
		fmt.Sprintf("99 GET h.example /h port %d", h),
		fmt.Sprintf("99 GET h.example /h query %d", h),
		"99 GET ::1 /h host " + fmt.Sprint(never1), // as alike as /h?q=0: a tie goes to the earliest unconsumed
	}
	if strings.Join(divs, "\n") != strings.Join(want, "\n") {
		t.Errorf("divergences:\n%s\nwant:\n%s", strings.Join(divs, "\n"), strings.Join(want, "\n"))
	}
	var unasked []string
	for _, e := range l.Unasked() {
		unasked = append(unasked, e.Method+" "+e.Path)
	}
	if fmt.Sprint(unasked) != "[GET /never GET /h]" {
		t.Errorf("unasked %v", unasked)
	}
}

// Recorded duplicates are consumed once each, in recorded order, however
// many ask at once.
func TestReplayDuplicatesConcurrently(t *testing.T) {
	const n = 40
	src := newSource(t)
	for i := range n {
		src.answer(src.request("GET", "https://h.example/same", nil, ""), 200, nil, "", fmt.Sprint(i))
	}
	l, err := New(Config{Mode: Replay, From: src.seal()}, names, nil)
	if err != nil {
		t.Fatal(err)
	}
	e, _ := Canon("GET", "https://h.example/same", nil, nil)
	var wg sync.WaitGroup
	got := make([]string, n+1)
	for i := range n + 1 {
		wg.Go(func() {
			v := l.Before(e, 0)
			req, _ := http.NewRequest("GET", "https://h.example/same", nil)
			resp, err := v.RoundTrip(never{t}, req)
			if err != nil {
				t.Error(err)
				return
			}
			b, _ := io.ReadAll(resp.Body)
			got[i] = fmt.Sprint(resp.StatusCode, " ", string(b))
		})
	}
	wg.Wait()
	seen := map[string]int{}
	for _, g := range got {
		seen[g]++
	}
	for i := range n {
		if seen[fmt.Sprint("200 ", i)] != 1 {
			t.Errorf("answer %d served %d times", i, seen[fmt.Sprint("200 ", i)])
		}
	}
	if seen["502 jr2 replay: no recorded answer for GET h.example/same\n"] != 1 {
		t.Errorf("the one ask too many: %v", seen)
	}
	// In order: one at a time, the answers come as recorded.
	l2, _ := New(Config{Mode: Replay, From: src.p}, names, nil)
	for i := range n {
		req, _ := http.NewRequest("GET", "https://h.example/same", nil)
		resp, _ := l2.Before(e, 0).RoundTrip(never{t}, req)
		if b, _ := io.ReadAll(resp.Body); string(b) != fmt.Sprint(i) {
			t.Fatalf("ask %d got %q", i, b)
		}
	}
}

// scrubPlan is a host's plan with its streaming scrubber, which knows the
// sentinel.
func scrubPlan(t *testing.T) Plan {
	sc, err := scrub.New([]scrub.Secret{{Name: "T", Value: []byte(sentinel)}})
	if err != nil {
		t.Fatal(err)
	}
	return Plan{Scrub: func() Stream { return sc.NewStream() }}
}

// truncate and corrupt send, then spoil the answer at the offset their
// record names; the agent never sees the value the upstream echoed.
func TestSpoilingFaultsAgainstARealUpstream(t *testing.T) {
	var n atomic.Int64
	body := strings.Repeat("0123456789", 50) + sentinel + strings.Repeat("abcdefghij", 50)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		io.WriteString(w, body)
	}))
	defer srv.Close()
	scrubbed := strings.ReplaceAll(body, sentinel, "[secret:T]")
	for _, kind := range []string{FaultTruncate, FaultCorrupt} {
		for seed := range uint64(8) {
			before := n.Load()
			o := newOut(t)
			l, err := New(Config{Mode: Faults, Seed: seed, Faults: "*=1:" + kind}, names, o.w)
			if err != nil {
				t.Fatal(err)
			}
			e, _ := Canon("GET", srv.URL+"/x", nil, nil)
			v := l.BeforeWith(e, 3, scrubPlan(t))
			if !v.Sends() {
				t.Fatalf("%s does not send", kind)
			}
			req, _ := http.NewRequest("GET", srv.URL+"/x", nil)
			resp, err := v.RoundTrip(srv.Client().Transport, req)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			var rec map[string]any
			for _, m := range parseLines(o.check()) {
				if m["kind"] == bundle.KindFaultInjected {
					rec = m
				}
			}
			off, ok := rec["offset"].(float64)
			if !ok || rec["fault"] != kind || rec["seed"] != float64(seed) || rec["class"] != "read" || rec["rate"] != 1.0 || rec["request"] != 3.0 {
				t.Fatalf("%s seed %d: record %v", kind, seed, rec)
			}
			at := int(off)
			want, wantErr := []byte(scrubbed[:min(at, len(scrubbed))]), io.ErrUnexpectedEOF
			if kind == FaultCorrupt {
				want, wantErr = []byte(scrubbed), nil
				want[min(at, len(want)-1)] ^= 0xff
			}
			if !bytes.Equal(got, want) || !errors.Is(err, wantErr) {
				t.Errorf("%s seed %d at %d: %d bytes, %v; want %d bytes, %v", kind, seed, at, len(got), err, len(want), wantErr)
			}
			if bytes.Contains(got, []byte(sentinel[:8])) || n.Load()-before != 1 {
				t.Errorf("%s seed %d: the value passed, or %d requests sent", kind, seed, n.Load()-before)
			}
		}
	}
}

// The same seed against the same effects writes the same records, byte for
// byte, and gives the agent the same outcomes; another seed does not. Each
// record names a draw below its rate, its class's rate, and an offset only
// for the kinds that spoil.
func TestFaultsReplayTheirDraws(t *testing.T) {
	next := roundTripper(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(strings.Repeat("x", 2000)))}, nil
	})
	run := func(seed uint64) (records []byte, outcomes string) {
		o := newOut(t)
		l, err := New(Config{Mode: Faults, Seed: seed, Faults: "write=0.3,read=0.1", Bound: time.Nanosecond}, names, o.w)
		if err != nil {
			t.Fatal(err)
		}
		var sb strings.Builder
		for i := range 300 {
			method := []string{"GET", "POST", "PUT"}[i%3]
			url := fmt.Sprintf("https://h.example/%d", i%25)
			e, _ := Canon(method, url, nil, nil)
			v := l.BeforeWith(e, uint64(i+1), scrubPlan(t))
			req, _ := http.NewRequest(method, url, nil)
			resp, err := v.RoundTrip(next, req)
			if err != nil {
				fmt.Fprintf(&sb, "%d %v\n", i, err)
				continue
			}
			b, err := io.ReadAll(resp.Body)
			fmt.Fprintf(&sb, "%d %d %s %x %v\n", i, resp.StatusCode, resp.Header.Get("Retry-After"), b, err)
		}
		return o.check(), sb.String()
	}
	a, ao := run(42)
	b, bo := run(42)
	c, co := run(43)
	if !bytes.Equal(a, b) || ao != bo {
		t.Error("one seed, two runs: the records or the outcomes differ")
	}
	if bytes.Equal(a, c) || ao == co {
		t.Error("another seed drew the same faults")
	}
	kinds := map[string]int{}
	for _, m := range parseLines(a) {
		if m["kind"] != bundle.KindFaultInjected {
			continue
		}
		var u float64
		fmt.Sscan(m["draw"].(string), &u)
		rate := map[string]float64{"read": 0.1, "write": 0.3}[m["class"].(string)]
		_, hasOffset := m["offset"]
		k := m["fault"].(string)
		kinds[k]++
		if u >= rate || m["rate"] != rate || hasOffset != (k == FaultTruncate || k == FaultCorrupt) || m["seed"] != 42.0 {
			t.Errorf("a record that does not hold: %v", m)
		}
	}
	if len(kinds) != len(FaultKinds) {
		t.Errorf("300 effects at these rates drew only %v", kinds)
	}
}

// A timeout fault sends nothing and ends when the client gives up, however
// long its bound.
func TestTimeoutEndsWithTheClient(t *testing.T) {
	l, _ := New(Config{Mode: Faults, Faults: "*=1:timeout", Bound: time.Hour}, names, nil)
	e, _ := Canon("GET", "https://h.example/", nil, nil)
	v := l.Before(e, 0)
	if v.Sends() {
		t.Fatal("a timeout sends")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "https://h.example/", nil)
	if resp, err := v.RoundTrip(never{t}, req); resp != nil || !errors.Is(err, ErrTimeout) {
		t.Errorf("%v, %v; want ErrTimeout", resp, err)
	}
}

// FuzzParseSource reads any bytes as a recording: no panic, and every
// request it keeps has a form Canon could have made.
func FuzzParseSource(f *testing.F) {
	f.Add([]byte(`{"seq":2,"kind":"http-request","method":"GET","url":"https://h.example/a","headers":[["X-A","1"]]}
{"seq":3,"kind":"http-request-body","request":2,"end":true,"bytes":1,"sha256":"00"}
{"seq":4,"kind":"http-response","request":2,"status":200,"headers":[["Content-Length","2"]]}
{"seq":5,"kind":"http-response","request":2,"chunk":0,"body":"ok"}
{"seq":6,"kind":"http-response","request":2,"chunk":1,"body_base64":"/w=="}
{"seq":7,"kind":"http-response","request":2,"end":true,"error":"cut"}
`))
	f.Add([]byte(`{"seq":1,"kind":"http-response","request":1,"status":403,"local":true,"body":"no"}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		for _, r := range parseSource(raw) {
			e := r.effect
			if e.Port < 1 || e.Port > 65535 || e.Host != strings.ToLower(e.Host) || e.differs(e) != "" || e.Key() == "" {
				t.Fatalf("a recorded form Canon could not make: %+v", e)
			}
			if a := r.answer; a != nil && len(a.chunks) != len(a.times) {
				t.Fatalf("chunks and times apart: %d %d", len(a.chunks), len(a.times))
			}
		}
	})
}
