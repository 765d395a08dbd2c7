package run

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"jr2.dev/boundary/custodian/internal/runtest"
	"jr2.dev/boundary/internal/bundle"
	"jr2.dev/boundary/internal/testkit/testpki"
)

// witness is an HTTPS upstream that logs every request it gets (method,
// path, the sha-256 of the body): the proof of what a mode sent.
type witness struct {
	addr  string
	roots *testpki.CA
	srv   *http.Server
	mu    sync.Mutex
	got   []string
}

func startWitness(t *testing.T) *witness {
	t.Helper()
	u := &witness{}
	u.addr, u.roots, u.srv = serveTLS(t, "modes test upstream CA", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		sum := sha256.Sum256(b)
		u.mu.Lock()
		u.got = append(u.got, r.Method+" "+r.URL.Path+" "+hex.EncodeToString(sum[:4]))
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Witness", "1")
		fmt.Fprintf(w, `{"method":%q,"path":%q,"auth":%q,"body":%q}`+"\n", r.Method, r.URL.Path, r.Header.Get("Authorization"), b)
	}), "api.example.com")
	return u
}

// serveTLS serves h over TLS on the host's loopback with a leaf for
// hosts under a test CA named caName, until the test ends; it returns
// the address, the CA and the server (a test may close it sooner).
func serveTLS(t *testing.T, caName string, h http.Handler, hosts ...string) (string, *testpki.CA, *http.Server) {
	t.Helper()
	ca := testpki.NewCA(t, caName)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, TLSConfig: &tls.Config{Certificates: []tls.Certificate{ca.Leaf(t, hosts...).TLS}}}
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), ca, srv
}

func (u *witness) received() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.got...)
}

const modesSecret = `EXAMPLE_TOKEN = { env = "EXAMPLE_TOKEN", hosts = ["api.example.com"] }` + "\n"

// clients is the child of the modes tests: curl (through the proxy and
// not), and Python's urllib, reading and writing; body is the POST's.
func clients(body string) []string {
	py := `import os, urllib.request as u
r = u.Request("https://api.example.com/v1/py", data=b'{"from":"python"}', method="PUT", headers={"Authorization": "Bearer " + os.environ["EXAMPLE_TOKEN"], "Content-Type": "application/json"})
try:
    resp = u.urlopen(r, timeout=5)
    print("py", resp.status, resp.read().decode(), end="")
except Exception as e:
    print("py", getattr(e, "code", "error"), getattr(e, "read", lambda: b"")().decode())
`
	return []string{"sh", "-c", curlFlags + ` -w ' %{http_code}\n' -H "Authorization: Bearer $EXAMPLE_TOKEN" https://api.example.com/v1/items; ` +
		curlFlags + ` -w ' %{http_code}\n' -X POST -H "Authorization: Bearer $EXAMPLE_TOKEN" -H 'Content-Type: application/json' -d '` + body + `' https://api.example.com/v1/items; ` +
		`(unset HTTPS_PROXY https_proxy; ` + curlFlags + ` -w ' %{http_code}\n' -I -H "Authorization: Bearer $EXAMPLE_TOKEN" https://api.example.com/v1/head); ` +
		`python3 -c '` + strings.ReplaceAll(py, "'", `'"'"'`) + `'`}
}

func modeRun(t *testing.T, u *witness, body string, set func(*Options)) *result {
	t.Helper()
	pol := writePolicy(t, []string{"api.example.com"}, nil, nil, modesSecret)
	res := containedWith(t, pol, u.addr, u.roots, []string{"PATH=/usr/bin:/bin", "EXAMPLE_TOKEN=" + sentinel}, set, clients(body)...)
	if res.err != nil {
		t.Fatalf("exit %d, %v\nstderr: %s", res.code, res.err, res.stderr)
	}
	runtest.AssertNoValue(t, "the bundle", res.raw, sentinel)
	runtest.AssertNoValue(t, "the child's and the runner's output", []byte(res.stdout+res.stderr), sentinel)
	return res
}

// A recorded live run replays with its upstream gone: the same child
// output byte for byte, exit 0, nothing asked left over. The same run with
// one request changed gets the replay's 502 for it, one divergence naming
// the field, and the recorded request it never asked in run-end.
func TestReplay(t *testing.T) {
	requireRun(t, "curl", "sh", "python3")
	u := startWitness(t)
	live := modeRun(t, u, `{"name":"a"}`, nil)
	if live.code != 0 || len(u.received()) != 4 {
		t.Fatalf("live: exit %d, upstream got %q; want 4 requests\nstdout: %s\nstderr: %s", live.code, u.received(), live.stdout, live.stderr)
	}
	if !strings.Contains(live.stdout, `"auth":"Bearer [secret:EXAMPLE_TOKEN]"`) {
		t.Errorf("live output %q: the echoed value is not its label", live.stdout)
	}
	// The seal is signed by a key only the run held: its public half,
	// printed once on the runner's stderr, proves the bundle is this run's;
	// another run's key does not.
	keyOf := func(r *result) string {
		_, after, ok := strings.Cut(r.stderr, "custodian run: the bundle's key is ")
		if !ok {
			t.Fatalf("the runner printed no key:\n%s", r.stderr)
		}
		return strings.Fields(after)[0]
	}
	var vout, verr bytes.Buffer
	if code := bundle.VerifyMain([]string{"--pubkey", keyOf(live), live.path}, &vout, &verr); code != 0 || vout.String() != "VERIFIED\n" {
		t.Errorf("verify --pubkey with the run's key: exit %d %q %q", code, vout.String(), verr.String())
	}
	if !strings.Contains(string(live.raw), `"pubkey":"`+keyOf(live)+`"`) || !strings.Contains(string(live.raw), `"sig":"`) {
		t.Error("run-start does not name the key, or the seal is not signed")
	}
	u.srv.Close()
	replay := modeRun(t, u, `{"name":"a"}`, func(o *Options) { o.Mode, o.From = "replay", live.path })
	vout.Reset()
	if code := bundle.VerifyMain([]string{"--pubkey", keyOf(replay), live.path}, &vout, &verr); code != 4 || vout.String() != "TAMPERED (record 1)\n" {
		t.Errorf("verify --pubkey with another run's key: exit %d %q", code, vout.String())
	}
	if replay.code != 0 || replay.stdout != live.stdout {
		t.Errorf("replay: exit %d, stdout\n%s\nwant\n%s", replay.code, replay.stdout, live.stdout)
	}
	if n := len(runtest.Find(replay.records, "replay-divergence", nil)); n != 0 {
		t.Errorf("replay: %d divergences, want 0", n)
	}
	if end := runtest.Find(replay.records, "run-end", nil); len(end) != 1 || end[0]["unasked"] != nil {
		t.Errorf("replay: run-end %v; want nothing unasked", end)
	}
	if n := len(runtest.Find(replay.records, "secret-injected", nil)); n != 0 {
		t.Errorf("replay: %d secret-injected records; nothing is sent, so none is spent", n)
	}
	// preflight with a recording answers from it, and plans every effect.
	pf := modeRun(t, u, `{"name":"a"}`, func(o *Options) { o.Mode, o.From = "preflight", live.path })
	if pf.stdout != live.stdout || len(runtest.Find(pf.records, "effect-planned", runtest.Rec{"answer": "recorded"})) != 4 {
		t.Errorf("preflight --from: stdout\n%s\nwant\n%s\nplanned: %v", pf.stdout, live.stdout, runtest.Find(pf.records, "effect-planned", nil))
	}
	changed := modeRun(t, u, `{"name":"b"}`, func(o *Options) { o.Mode, o.From = "replay", live.path })
	if want := "jr2 replay: no recorded answer for POST api.example.com/v1/items\n 502\n"; !strings.Contains(changed.stdout, want) {
		t.Errorf("changed replay: stdout %q; want %q", changed.stdout, want)
	}
	var listing, errOut bytes.Buffer
	bundle.InspectMain([]string{changed.path}, &listing, &errOut)
	if !strings.HasPrefix(listing.String(), "replay divergences: 1\n  record ") || !strings.Contains(listing.String(), "POST api.example.com/v1/items differs from record") {
		t.Errorf("inspect does not put the divergence first:\n%.400s", listing.String())
	}
	div := runtest.Find(changed.records, "replay-divergence", nil)
	if len(div) != 1 || div[0]["field"] != "body" {
		t.Errorf("changed replay: divergences %v; want one naming body", div)
	}
	if end := runtest.Find(changed.records, "run-end", nil); len(end) != 1 || fmt.Sprint(end[0]["unasked"]) == "<nil>" || len(end[0]["unasked"].([]any)) != 1 {
		t.Errorf("changed replay: run-end %v; want the recorded POST unasked", end)
	}
	if got := u.received(); len(got) != 4 {
		t.Errorf("the upstream got %q; a replay sends nothing, so only the live run's 4", got)
	}
}

// read-only passes reads and refuses every write, the upstream's own log
// the witness; preflight sends nothing and plans every effect.
func TestReadOnlyAndPreflight(t *testing.T) {
	requireRun(t, "curl", "sh", "python3")
	u := startWitness(t)
	ro := modeRun(t, u, `{"name":"a"}`, func(o *Options) { o.Mode = "read-only" })
	got := u.received()
	if len(got) != 2 || !strings.HasPrefix(got[0], "GET /v1/items") || !strings.HasPrefix(got[1], "HEAD /v1/head") {
		t.Errorf("read-only: the upstream got %q; want the GET and the HEAD only", got)
	}
	if n := strings.Count(ro.stdout, "mode read-only"); n != 2 {
		t.Errorf("read-only: stdout %q; want the mode named in the POST's and the PUT's answers", ro.stdout)
	}
	if n := len(runtest.Find(ro.records, "egress-decision", runtest.Rec{"decision": "deny", "rule": "mode:read-only"})); n != 2 {
		t.Errorf("read-only: %d denials by mode:read-only, want 2", n)
	}
	pf := modeRun(t, u, `{"name":"a"}`, func(o *Options) { o.Mode = "preflight" })
	if got := u.received(); len(got) != 2 {
		t.Errorf("preflight: the upstream got %q; want nothing more than read-only's two", got)
	}
	planned := runtest.Find(pf.records, "effect-planned", nil)
	if len(planned) != 4 {
		t.Errorf("preflight: %d effect-planned records, want 4: %v", len(planned), planned)
	}
	if pf.code != 0 {
		t.Errorf("preflight: exit %d", pf.code)
	}
	var plan, errOut bytes.Buffer
	if code := bundle.InspectMain([]string{"--plan", pf.path}, &plan, &errOut); code != 0 ||
		!strings.Contains(plan.String(), "4 effects planned\nVERIFIED") ||
		!strings.Contains(plan.String(), "POST    api.example.com:443  /v1/items") ||
		!strings.Contains(plan.String(), "EXAMPLE_TOKEN") || !strings.Contains(plan.String(), "allow_hosts[0] (engine)") {
		t.Errorf("inspect --plan: exit %d\n%s%s", code, plan.String(), errOut.String())
	}
}

// faults with one seed twice injects the same faults (records and what the
// child saw, byte for byte); another seed, others.
func TestFaultsSeeded(t *testing.T) {
	requireRun(t, "curl", "sh")
	u := startWitness(t)
	pol := writePolicy(t, []string{"api.example.com"}, nil, nil, modesSecret)
	loop := `for i in $(seq 1 30); do ` + curlFlags + ` -w ' %{http_code}\n' -H "Authorization: Bearer $EXAMPLE_TOKEN" https://api.example.com/v1/n/$i; echo; done`
	run := func(seed uint64) (string, []string) {
		res := containedWith(t, pol, u.addr, u.roots, []string{"PATH=/usr/bin:/bin", "EXAMPLE_TOKEN=" + sentinel}, func(o *Options) {
			o.Mode, o.Seed, o.Faults = "faults", seed, "read=0.5:error+rate-limit+truncate+corrupt+reset"
		}, "sh", "-c", loop)
		if res.err != nil {
			t.Fatalf("exit %d, %v\nstderr: %s", res.code, res.err, res.stderr)
		}
		runtest.AssertNoValue(t, "the bundle", res.raw, sentinel)
		// A fault that replaces the answer sent nothing: no secret was spent.
		replaced := 0
		for _, r := range runtest.Find(res.records, "fault-injected", nil) {
			if r["fault"] == "error" || r["fault"] == "rate-limit" {
				replaced++
			}
		}
		if got := len(runtest.Find(res.records, "secret-injected", nil)); got != 30-replaced {
			t.Errorf("seed %d: %d secret-injected records; want 30 less the %d answers a fault replaced", seed, got, replaced)
		}
		var faults []string
		for _, r := range runtest.Find(res.records, "fault-injected", nil) {
			faults = append(faults, fmt.Sprint(r["seed"], r["draw"], r["fault"], r["offset"], r["rate"], r["class"], r["index"]))
		}
		return res.stdout, faults
	}
	out1, f1 := run(7)
	out2, f2 := run(7)
	out3, f3 := run(8)
	if len(f1) < 5 || len(f1) > 25 {
		t.Errorf("seed 7: %d faults in 30 effects at rate 0.5; want 5-25", len(f1))
	}
	if fmt.Sprint(f1) != fmt.Sprint(f2) || out1 != out2 {
		t.Errorf("seed 7 twice: faults\n%q\n%q\nor outputs differ:\n%s\n---\n%s", f1, f2, out1, out2)
	}
	if fmt.Sprint(f1) == fmt.Sprint(f3) {
		t.Errorf("seeds 7 and 8 injected the same faults: %q", f1)
	}
	for _, kind := range []string{" 502\n", " 429\n"} {
		if !strings.Contains(out1+out3, kind) {
			t.Errorf("no%q among the child's outcomes:\n%s", kind, out1)
		}
	}
}
