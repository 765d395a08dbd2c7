package filter

import (
	"bytes"
	"compress/gzip"
	"reflect"
	"strings"
	"testing"

	"jr2.dev/boundary/internal/contract"
)

func TestDecideResponse(t *testing.T) {
	e := testEngine(t)
	cases := []struct {
		name    string
		method  string
		status  int
		headers []Header
		reply   string
		set     []Header
		remove  []string
		body    bool
		gz      bool
	}{
		{"plain body", "GET", 200, hs("content-type", "application/json", "Content-Length", "42"), "", nil, []string{"content-length"}, true, false},
		{"no content-length", "GET", 200, hs("content-type", "text/event-stream"), "", nil, nil, true, false},
		{"echoed header scrubbed", "GET", 200, hs("x-echo", "key="+anthropicValue, "x-echo", "ok", "x-other", githubValue), "",
			hs("x-echo", "key=[secret:ANTHROPIC_API_KEY]", "x-echo", "ok", "x-other", "[secret:GITHUB_TOKEN]"), nil, true, false},
		{"gzip", "GET", 200, hs("Content-Encoding", "gzip", "content-length", "10"), "", nil, []string{"content-length", "content-encoding"}, true, true},
		{"x-gzip", "POST", 201, hs("content-encoding", "x-gzip"), "", nil, []string{"content-encoding"}, true, true},
		{"identity", "GET", 200, hs("content-encoding", "identity"), "", nil, nil, true, false},
		{"br refused", "GET", 200, hs("content-encoding", "br"), "jr2 custodian: api.anthropic.com:443 answered with content-encoding br, which the Custodian cannot read to scrub; the answer was not passed on", nil, nil, true, false},
		{"two encodings refused", "GET", 200, hs("content-encoding", "gzip, deflate"), "jr2 custodian: api.anthropic.com:443 answered with content-encoding gzip, deflate, which the Custodian cannot read to scrub; the answer was not passed on", nil, nil, true, false},
		{"gzip twice refused", "GET", 200, hs("content-encoding", "gzip, gzip"), "jr2 custodian: api.anthropic.com:443 answered with content-encoding gzip, gzip, which the Custodian cannot read to scrub; the answer was not passed on", nil, nil, true, false},
		{"gzip in two headers refused", "GET", 200, hs("content-encoding", "gzip", "Content-Encoding", "x-gzip"), "jr2 custodian: api.anthropic.com:443 answered with content-encoding gzip, x-gzip, which the Custodian cannot read to scrub; the answer was not passed on", nil, nil, true, false},
		{"HEAD keeps length", "HEAD", 200, hs("content-length", "42", "content-encoding", "br"), "", nil, nil, false, false},
		{"204", "GET", 204, hs("content-length", "0"), "", nil, nil, false, false},
		{"304", "GET", 304, hs("content-length", "42"), "", nil, nil, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := e.DecideResponse(anth, c.method, c.status, c.headers)
			if c.reply != "" {
				if d.Reply == nil || d.Reply.Status != 502 || d.Reply.Body != c.reply || d.Reply.Reason != ReasonEncoding {
					t.Fatalf("reply %+v, want 502 %q", d.Reply, c.reply)
				}
				return
			}
			if d.Reply != nil {
				t.Fatalf("reply %+v", d.Reply)
			}
			if !reflect.DeepEqual(d.Set, c.set) || !reflect.DeepEqual(d.Remove, c.remove) || d.Body != c.body || d.Gzip != c.gz {
				t.Fatalf("got set %v remove %v body %v gzip %v", d.Set, d.Remove, d.Body, d.Gzip)
			}
		})
	}
}

// Trailers follow the headers' rule: a name holding a value (in any case)
// is dropped, every value is scrubbed, the rest keeps its order.
func TestDecideTrailers(t *testing.T) {
	e := testEngine(t)
	for _, c := range []struct {
		name string
		in   []Header
		want []Header
	}{
		{"plain", hs("Grpc-Status", "0", "x-sum", "abc"), hs("grpc-status", "0", "x-sum", "abc")},
		{"value scrubbed", hs("grpc-message", "bad key "+anthropicValue), hs("grpc-message", "bad key [secret:ANTHROPIC_API_KEY]")},
		{"name holds a value", hs(anthropicValue, "1", "x-sum", "2"), hs("x-sum", "2")},
		{"name holds a value, case folded", hs("X-"+strings.ToUpper(githubValue), "1", "x-b", githubValue), hs("x-b", "[secret:GITHUB_TOKEN]")},
		{"none", nil, nil},
	} {
		if got := e.DecideTrailers(c.in); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}

// A body is scrubbed across every chunk border; a gzip body is read first.
func TestBodyEveryChunkSplit(t *testing.T) {
	e := testEngine(t)
	plain := []byte(`{"echo":"` + anthropicValue + `","again":"` + githubValue + `"}` + "\n")
	want := `{"echo":"[secret:ANTHROPIC_API_KEY]","again":"[secret:GITHUB_TOKEN]"}` + "\n"
	var zbuf bytes.Buffer
	zw := gzip.NewWriter(&zbuf)
	zw.Write(plain)
	zw.Close()
	for _, gz := range []bool{false, true} {
		in := plain
		if gz {
			in = zbuf.Bytes()
		}
		for i := 0; i <= len(in); i++ {
			for j := i; j <= len(in); j += 7 {
				b := e.NewBody(gz)
				var out []byte
				var err error
				for _, chunk := range [][]byte{in[:i], in[i:j], in[j:]} {
					if out, err = b.Write(out, chunk); err != nil {
						t.Fatalf("gz=%v split %d,%d: %v", gz, i, j, err)
					}
				}
				if out, err = b.Flush(out); err != nil {
					t.Fatalf("gz=%v split %d,%d: flush: %v", gz, i, j, err)
				}
				if string(out) != want {
					t.Fatalf("gz=%v split %d,%d:\n got %q\nwant %q", gz, i, j, out, want)
				}
			}
		}
	}
}

// Each gzip chunk's plain bytes come out of the Write that brought it when
// the writer flushed: an SSE stream over gzip keeps its timing.
func TestGzipBodyStreams(t *testing.T) {
	e := testEngine(t)
	var zbuf bytes.Buffer
	zw := gzip.NewWriter(&zbuf)
	b := e.NewBody(true)
	var got []string
	for _, ev := range []string{"data: one\n\n", "data: two\n\n", "data: " + anthropicValue + "\n\n"} {
		zw.Write([]byte(ev))
		zw.Flush()
		chunk := append([]byte(nil), zbuf.Bytes()...)
		zbuf.Reset()
		out, err := b.Write(nil, chunk)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(out))
	}
	zw.Close()
	out, err := b.Write(nil, zbuf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if out, err = b.Flush(out); err != nil {
		t.Fatal(err)
	}
	got = append(got, string(out))
	want := []string{"data: one\n\n", "data: two\n\n", "data: [secret:ANTHROPIC_API_KEY]\n\n", ""}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
}

// A gzip body of several members (RFC 1952 §2.2) is read to its end, in
// any chunking, and every member is scrubbed; bytes after a member that do
// not start another are a broken body (never only the first member, ended
// as if complete).
func TestGzipMembers(t *testing.T) {
	e := testEngine(t)
	member := func(s string) []byte {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		zw.Write([]byte(s))
		zw.Close()
		return b.Bytes()
	}
	z := append(append(member("one "+anthropicValue+" "), member("two "+anthropicValue)...), member("")...)
	for n := 1; n <= len(z); n += 7 {
		b := e.NewBody(true)
		var out []byte
		var err error
		for i := 0; i < len(z) && err == nil; i += n {
			out, err = b.Write(out, z[i:min(i+n, len(z))])
		}
		if err == nil {
			out, err = b.Flush(out)
		}
		if want := "one [secret:ANTHROPIC_API_KEY] two [secret:ANTHROPIC_API_KEY]"; err != nil || string(out) != want {
			t.Fatalf("chunks of %d: %q, %v; want %q", n, out, err, want)
		}
	}
	b := e.NewBody(true)
	out, err := b.Write(nil, append(member("one "), []byte("not gzip "+anthropicValue)...))
	if err == nil {
		out, err = b.Flush(out)
	}
	if err != ErrBadGzip || strings.Contains(string(out), anthropicValue) {
		t.Fatalf("a member and then garbage: %q, %v; want ErrBadGzip", out, err)
	}
}

func TestBadGzip(t *testing.T) {
	e := testEngine(t)
	b := e.NewBody(true)
	_, err := b.Write(nil, []byte("this is not gzip at all"))
	if err == nil {
		_, err = b.Flush(nil)
	}
	if err != ErrBadGzip {
		t.Fatalf("err = %v, want ErrBadGzip", err)
	}
	// Cut short.
	var zbuf bytes.Buffer
	zw := gzip.NewWriter(&zbuf)
	zw.Write([]byte(strings.Repeat("abc", 1000)))
	zw.Close()
	b = e.NewBody(true)
	if _, err := b.Write(nil, zbuf.Bytes()[:zbuf.Len()-4]); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Flush(nil); err != ErrBadGzip {
		t.Fatalf("truncated gzip: err = %v", err)
	}
	// An empty body that claimed gzip is an empty body, not a broken one.
	if out, err := e.NewBody(true).Flush(nil); err != nil || len(out) != 0 {
		t.Fatalf("empty gzip: %q, %v", out, err)
	}
	// Closing early does not leak the decoder goroutine into a deadlock.
	b = e.NewBody(true)
	b.Write(nil, zbuf.Bytes()[:5])
	b.Close()
}

// A value spelled anywhere the agent controls comes back scrubbed in a
// reply and never in a log field; a response header whose name holds one is
// dropped.
func TestValuesSpelledByTheAgent(t *testing.T) {
	e := testEngine(t)
	lower := "x" + strings.ToLower(anthropicValue)
	c := testConfig()
	c.Secrets[0].Name, c.Secrets[0].StandIn = "LOWER", contract.StandIn("LOWER")
	v := testValues()
	delete(v, "ANTHROPIC_API_KEY")
	v["LOWER"] = []byte(lower[1:])
	e2, err := New(c, v)
	if err != nil {
		t.Fatal(err)
	}
	cd := e2.DecideConnect("CONNECT", lower[1:]+".localhost:443")
	if cd.Reply == nil || strings.Contains(cd.Reply.Body, lower[1:]) || strings.Contains(strings.Join(cd.LogFields(), " "), lower[1:]) {
		t.Fatalf("connect leaks: %+v %v", cd.Reply, cd.LogFields())
	}
	cd = e2.DecideConnect("CONNECT", lower[1:]+".example:443")
	if strings.Contains(strings.Join(cd.LogFields(), " "), lower[1:]) {
		t.Fatalf("tunnel log leaks: %v", cd.LogFields())
	}
	if r := e2.Unreachable(lower[1:]+".example:443", "x"); strings.Contains(r.Body, lower[1:]) {
		t.Fatalf("unreachable leaks: %s", r.Body)
	}
	d := e.DecideRequest(anth, &Request{"GET", "api.anthropic.com", "/v1/x", hs("x-api-key", anthSI, "x-"+githubValue+"_a", "1"), ""})
	if d.Reply == nil || strings.Contains(d.Reply.Body, githubValue) || !strings.Contains(d.Reply.Body, "[secret:GITHUB_TOKEN]") {
		t.Fatalf("rule 2 reply: %+v", d.Reply)
	}
	rd := e.DecideResponse(anth, "GET", 200, hs("x-"+githubValue, "1", "x-ok", "2"))
	if !reflect.DeepEqual(rd.Remove, []string{"x-" + strings.ToLower(githubValue)}) || len(rd.Set) != 0 {
		t.Fatalf("header name: remove %v set %v", rd.Remove, rd.Set)
	}
}

// How much of an echoed chunk the body releases must not say whether it
// begins a held value: the agent could make a streaming upstream echo
// guesses and read the value a byte at a time.
func TestBodyHoldIsNoOracle(t *testing.T) {
	e := testEngine(t)
	right := "echo: " + anthropicValue[:9]
	wrong := "echo: " + anthropicValue[:8] + "#"
	a, _ := e.NewBody(false).Write(nil, []byte(right))
	b, _ := e.NewBody(false).Write(nil, []byte(wrong))
	if len(a) != len(b) {
		t.Fatalf("a right guess released %d bytes, a wrong one %d", len(a), len(b))
	}
	// A line's end releases everything before it.
	body := e.NewBody(false)
	out, _ := body.Write(nil, []byte(wrong+"\n"))
	if string(out) != wrong+"\n" {
		t.Fatalf("released %q", out)
	}
}

// refScrubFields is scrubFields as it was first written (maps of every
// name's values): the reference FuzzScrubFields holds the list-walking
// one to.
func refScrubFields(e *Engine, hs []Header) (set []Header, renamed []string, raw map[string][]string) {
	raw = map[string][]string{}
	scrubbed := map[string][]string{}
	changed := map[string]bool{}
	var order []string
	for _, h := range hs {
		n := strings.ToLower(h.Name)
		if string(e.scrubber.Folded().Bytes([]byte(n))) != n {
			if !containsStr(renamed, n) {
				renamed = append(renamed, n)
			}
			continue
		}
		if _, ok := raw[n]; !ok {
			order = append(order, n)
		}
		v := string(e.scrubber.Bytes([]byte(h.Value)))
		if v != h.Value {
			changed[n] = true
		}
		raw[n] = append(raw[n], h.Value)
		scrubbed[n] = append(scrubbed[n], v)
	}
	for _, n := range order {
		if changed[n] {
			for _, v := range scrubbed[n] {
				set = append(set, Header{Name: n, Value: v})
			}
		}
	}
	return set, renamed, raw
}

// FuzzScrubFields: the upstream's header list, any names, values and
// repeats (the fuzzer's bytes, split on \n into name:value lines, with the
// held values spliced in), read as the reference reads it.
func FuzzScrubFields(f *testing.F) {
	f.Add([]byte("x-echo:key=\x01\nX-Echo:ok\nx-other:\x02\ncontent-length:4"))
	f.Add([]byte("\x01:v\ncontent-encoding:gzip\nContent-Encoding:br\nupgrade:websocket"))
	f.Add([]byte("a:1\nb:\x02\na:\x01\nB:2"))
	f.Add([]byte("\u017fec-websocket-extensions:x\nupgrade:websocket\n\u212aa:\x01\nka:2\nx-echo:\x02"))
	e := testEngine(f)
	f.Fuzz(func(t *testing.T, spec []byte) {
		spec = bytes.ReplaceAll(spec, []byte{1}, []byte(anthropicValue))
		spec = bytes.ReplaceAll(spec, []byte{2}, []byte(githubValue))
		var hs []Header
		for _, line := range strings.Split(string(spec), "\n") {
			n, v, _ := strings.Cut(line, ":")
			hs = append(hs, Header{Name: n, Value: v})
		}
		got := e.scrubFields(hs)
		set, renamed, raw := refScrubFields(e, hs)
		if !reflect.DeepEqual(got.set, set) || !reflect.DeepEqual(got.renamed, renamed) {
			t.Fatalf("set %q renamed %q, the reference: %q %q", got.set, got.renamed, set, renamed)
		}
		for _, n := range []string{"content-encoding", "content-length", "upgrade", ExtensionsHeader, "x-echo", "a", "ka"} {
			if !reflect.DeepEqual(got.values(n), raw[n]) || got.has(n) != (len(raw[n]) > 0) {
				t.Fatalf("%s: %q %v, the reference %q", n, got.values(n), got.has(n), raw[n])
			}
		}
	})
}
