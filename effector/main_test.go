package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"jr2.dev/boundary/effector/client"
	"jr2.dev/boundary/effector/internal/efftest"
	"jr2.dev/boundary/effector/internal/wire"
)

// binary is the effector built once for every test here.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "effector-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "effector")
	// Built as it is deployed: static (no cgo), so each `effector
	// confine` and `effector keep` starts without the dynamic loader.
	// effector-confine beside it, as make effector builds it: the
	// Effector runs confinement through it (confine.Argv).
	build := exec.Command("go", "build", "-o", dir+"/", ".", "./cmd/effector-confine")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building effector:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// sentinel is the secret that must appear in no log line, error or answer.
const sentinel = `S3nt/in+el=&?<>"\ é-process~`

var placementKey = bytes.Repeat([]byte{0x3c}, 32)

// site is one Effector's files: key, secrets, effector.json, CA.
type site struct {
	dir string
	env map[string]string
}

// newSite writes the files of a placement whose one target is the
// upstream at port, with SENTINEL and OTHER held and SENTINEL listed.
func newSite(t testing.TB, pki *efftest.PKI, port int) *site {
	t.Helper()
	dir := t.TempDir()
	s := &site{dir: dir}
	s.write("key", hex.EncodeToString(placementKey)+"\n")
	os.Mkdir(filepath.Join(dir, "secrets"), 0o700)
	s.write("secrets/SENTINEL", sentinel+"\n")
	s.write("secrets/OTHER", "other-value-1234")
	s.write("effector.json", fmt.Sprintf(`{"placement":"instance","targets":[{"scheme":"https","host":"127.0.0.1","port":%d,"secrets":["SENTINEL"]}],"commands":false}`, port))
	s.write("ca.pem", string(pki.CAPEM))
	s.env = map[string]string{
		"JR2_EFFECTOR_KEY": filepath.Join(dir, "key"), "JR2_EFFECTOR_SECRETS": filepath.Join(dir, "secrets"),
		"JR2_EFFECTOR_CONFIG": filepath.Join(dir, "effector.json"), "JR2_CA_FILE": filepath.Join(dir, "ca.pem"),
		"POD_NAME": "effector-a", "POD_IP": "127.0.0.1", "NODE_NAME": "node-a",
	}
	return s
}

func (s *site) write(name, content string) {
	if err := os.WriteFile(filepath.Join(s.dir, name), []byte(content), 0o600); err != nil {
		panic(err)
	}
}

// proc is a running effector.
type proc struct {
	cmd    *exec.Cmd
	addr   string
	name   string
	stdout *efftest.Buffer
	stderr *efftest.Buffer
	done   chan struct{}
	err    error
}

func freePort(t testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// run starts the binary with the site's env and extra, and waits for its
// ready line or its end. When the port it picked was taken before the
// Effector bound it (freePort closes its listener, and another process's
// connection may get the port meanwhile), it starts again on another.
func (s *site) run(t testing.TB, extra map[string]string) *proc {
	t.Helper()
	_, fixed := extra["JR2_EFFECTOR_PORT"]
	if _, ok := s.env["JR2_EFFECTOR_PORT"]; ok {
		fixed = true
	}
	for attempt := 1; ; attempt++ {
		p, ready := s.runOnce(t, extra)
		if ready || fixed || attempt == 5 || !strings.Contains(p.stdout.String(), "action=exit reason=listen") {
			return p
		}
		t.Logf("the effector's port was taken before it bound it; starting it on another (attempt %d)", attempt+1)
	}
}

func (s *site) runOnce(t testing.TB, extra map[string]string) (*proc, bool) {
	t.Helper()
	env := []string{"PATH=" + os.Getenv("PATH")}
	port := strconv.Itoa(freePort(t))
	merged := map[string]string{"JR2_EFFECTOR_PORT": port}
	for k, v := range s.env {
		merged[k] = v
	}
	for k, v := range extra {
		merged[k] = v
	}
	for k, v := range merged {
		env = append(env, k+"="+v)
	}
	p := &proc{cmd: exec.Command(binary), stdout: &efftest.Buffer{}, stderr: &efftest.Buffer{}, done: make(chan struct{}),
		addr: net.JoinHostPort("127.0.0.1", merged["JR2_EFFECTOR_PORT"]), name: merged["POD_NAME"]}
	p.cmd.Env = env
	pr, pw := io.Pipe()
	p.cmd.Stdout = io.MultiWriter(p.stdout, pw)
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		pw.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("%s stdout:\n%s\nstderr:\n%s", p.name, p.stdout, p.stderr)
		}
	})
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		found := false
		for sc.Scan() {
			if !found && strings.HasPrefix(sc.Text(), "jr2.effector ready ") {
				found = true
				ready <- true
			}
		}
		if !found {
			ready <- false
		}
	}()
	select {
	case ok := <-ready:
		if !ok {
			<-p.done
		}
		return p, ok
	case <-time.After(20 * time.Second):
		t.Fatal("the effector did not say ready")
	}
	return p, false
}

// exit waits for the process to end and returns its code.
func (p *proc) exit(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(within):
		t.Fatalf("%s still runs", p.name)
	}
	return p.cmd.ProcessState.ExitCode()
}

func (p *proc) client() *client.Client {
	return &client.Client{Key: placementKey, Addresses: func(context.Context) ([]string, error) { return []string{p.addr}, nil }}
}

func (p *proc) logCount(sub string) int { return strings.Count(p.stdout.String(), sub) }

// rig is an upstream and a site for it.
type rig struct {
	pki  *efftest.PKI
	up   *efftest.Upstream
	site *site
}

func newRig(t testing.TB, h http.HandlerFunc) *rig {
	t.Helper()
	pki := efftest.NewPKI(t, "127.0.0.1")
	if h == nil {
		h = func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			io.WriteString(w, "hello "+r.URL.Path)
		}
	}
	up := efftest.StartTLS(t, pki, h)
	return &rig{pki: pki, up: up, site: newSite(t, pki, up.Port)}
}

func (r *rig) url(path string) string { return "https://127.0.0.1:" + strconv.Itoa(r.up.Port) + path }

func get(u string) *wire.Start {
	return &wire.Start{Kind: wire.KindHTTP, TimeoutMs: 10000, HTTP: &wire.HTTP{Method: "GET", URL: wire.Value{wire.Text(u)}}}
}

// settle polls the replica at addr until the effect settles.
func settle(t testing.TB, c *client.Client, id, addr string) *wire.Outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		a, err := c.Poll(ctx, id, addr)
		if err != nil {
			t.Fatalf("poll %s: %v", id, err)
		}
		if a.State.State == wire.StateSettled {
			return a.State.Outcome
		}
	}
}

func TestReadyLine(t *testing.T) {
	r := newRig(t, nil)
	p := r.site.run(t, nil)
	want := "jr2.effector ready placement=instance replica=effector-a secrets=OTHER,SENTINEL targets=1\n"
	if !strings.HasPrefix(p.stdout.String(), want) {
		t.Fatalf("stdout %q, want it to start %q", p.stdout, want)
	}
	resp, err := http.Get("http://" + p.addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "ok" {
		t.Errorf("healthz %d %q", resp.StatusCode, b)
	}
}

// TestStartRefused: a start that cannot serve ends with one exit line and
// a reason that names the fix and never the value or a path.
func TestStartRefused(t *testing.T) {
	cases := []struct {
		name   string
		change func(s *site)
		word   string
		reason string
	}{
		{"a short secret", func(s *site) { s.write("secrets/SHORT", "1234567\n") }, "config", "held secret SHORT: the value is shorter than 8 bytes"},
		{"an empty secret", func(s *site) { s.write("secrets/EMPTY", "") }, "config", "held secret EMPTY: the value is empty"},
		{"a key that is not hex", func(s *site) { s.write("key", sentinel) }, "config", "JR2_EFFECTOR_KEY"},
		{"effector.json broken", func(s *site) {
			v, _ := json.Marshal(sentinel)
			s.write("effector.json", `{"placement":"x","secrets":[`+string(v)+`]}`)
		}, "config", "effector.json: secrets: unknown field"},
		{"no POD_IP", func(s *site) { delete(s.env, "POD_IP") }, "config", "POD_IP"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, nil)
			c.change(r.site)
			var stdout, stderr bytes.Buffer
			cmd := exec.Command(binary)
			cmd.Env = []string{"JR2_EFFECTOR_PORT=" + strconv.Itoa(freePort(t))}
			for k, v := range r.site.env {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			if cmd.ProcessState.ExitCode() != 1 {
				t.Fatalf("exit %v", err)
			}
			if got := stdout.String(); got != "jr2.effector action=exit reason="+c.word+"\n" {
				t.Errorf("stdout %q", got)
			}
			if !strings.Contains(stderr.String(), c.reason) {
				t.Errorf("stderr %q does not say %q", stderr.String(), c.reason)
			}
			all := stdout.String() + stderr.String()
			if strings.Contains(all, r.site.dir) || len(efftest.Leaks(all, sentinel)) > 0 {
				t.Errorf("the output carries a path or the value: %q", all)
			}
		})
	}
}

// TestPortInUse: a port another process listens on stops the start with
// the listener, the variable that moves it and what may hold it (net/http's
// "address already in use" names none of them), and no path.
func TestPortInUse(t *testing.T) {
	held, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	port := held.Addr().(*net.TCPAddr).Port
	r := newRig(t, nil)
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(binary)
	for k, v := range r.site.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Env = append(cmd.Env, "JR2_EFFECTOR_PORT="+strconv.Itoa(port))
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Run()
	want := "effector: the Effector's listener: cannot listen on port " + strconv.Itoa(port) + ": bind: address already in use; something else listens there (another Effector may be running): stop it, or move this listener with JR2_EFFECTOR_PORT=PORT\n"
	if code := cmd.ProcessState.ExitCode(); code != 1 || stdout.String() != "jr2.effector action=exit reason=listen\n" || stderr.String() != want {
		t.Errorf("exit %d, stdout %q\n got: %q\nwant: %q", code, stdout.String(), stderr.String(), want)
	}
}

// TestRefusedAfterRestart: a start signed before the process restarted is
// refused by the new process, unsigned, and starts nothing.
func TestRefusedAfterRestart(t *testing.T) {
	r := newRig(t, nil)
	port := strconv.Itoa(freePort(t))
	first := r.site.run(t, map[string]string{"JR2_EFFECTOR_PORT": port})
	body, _ := wire.Marshal(get(r.url("/")))
	req, _ := http.NewRequest("POST", "http://"+first.addr+"/effects/held-back", bytes.NewReader(body))
	client.Sign(req, placementKey, first.addr, body, time.Now(), client.NewNonce())
	first.cmd.Process.Signal(syscall.SIGTERM)
	if code := first.exit(t, 10*time.Second); code != 0 {
		t.Fatalf("the first process exited %d", code)
	}
	second := r.site.run(t, map[string]string{"JR2_EFFECTOR_PORT": port})
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 401 || len(b) != 0 || resp.Header.Get(wire.HeaderSignature) != "" {
		t.Fatalf("the held-back start got %d %q", resp.StatusCode, b)
	}
	if second.logCount("action=start") != 0 || r.up.Hits() != 0 {
		t.Fatalf("it started: hits %d\n%s", r.up.Hits(), second.stdout)
	}
	// A start signed now is taken.
	a, err := second.client().Start(context.Background(), "fresh", get(r.url("/")))
	if err != nil || a.Status != 202 {
		t.Fatalf("a fresh start: %v %+v", err, a)
	}
}

// Test401 drives each refusal against the real process, with a replay.
func Test401(t *testing.T) {
	r := newRig(t, nil)
	p := r.site.run(t, nil)
	body, _ := wire.Marshal(get(r.url("/")))
	send := func(method, target, addr string, key []byte, at time.Time, nonce string, body []byte, sign bool) (int, []byte, string) {
		req, _ := http.NewRequest(method, "http://"+p.addr+target, bytes.NewReader(body))
		if sign {
			client.Sign(req, key, addr, body, at, nonce)
		}
		return roundTrip(t, req)
	}
	if code, _, _ := send("POST", "/effects/first", p.addr, placementKey, time.Now(), "the-nonce", body, true); code != 202 {
		t.Fatalf("the first start got %d", code)
	}
	otherKey := bytes.Repeat([]byte{1}, 32)
	cases := []struct {
		name                        string
		method, target, addr, nonce string
		key                         []byte
		at                          time.Time
		body                        []byte
		sign                        bool
	}{
		{"no signature", "POST", "/effects/a", p.addr, "n1", placementKey, time.Now(), body, false},
		{"a wrong signature", "POST", "/effects/a", p.addr, "n2", otherKey, time.Now(), body, true},
		{"a signature for another address", "POST", "/effects/a", "127.0.0.2:8082", "n3", placementKey, time.Now(), body, true},
		{"a time before the process started", "POST", "/effects/a", p.addr, "n4", placementKey, time.Now().Add(-time.Hour), body, true},
		{"a time over 5 minutes ahead", "POST", "/effects/a", p.addr, "n5", placementKey, time.Now().Add(5*time.Minute + 5*time.Second), body, true},
		{"a nonce seen in the window", "POST", "/effects/first", p.addr, "the-nonce", placementKey, time.Now(), body, true},
		{"a body over 4 MiB", "POST", "/effects/a", p.addr, "n6", placementKey, time.Now(), bytes.Repeat([]byte("{"), wire.MaxBody+1), true},
		{"a stop unsigned", "DELETE", "/effects/first", p.addr, "n7", placementKey, time.Now(), nil, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, b, sig := send(c.method, c.target, c.addr, c.key, c.at, c.nonce, c.body, c.sign)
			if code != 401 || len(b) != 0 || sig != "" {
				t.Fatalf("got %d %q %q", code, b, sig)
			}
		})
	}
	settle(t, p.client(), "first", p.addr)
	if p.logCount("action=start") != 1 || r.up.Hits() != 1 || p.logCount("action=stop") != 0 {
		t.Errorf("hits %d, log:\n%s", r.up.Hits(), p.stdout)
	}
}

// TestOptionsStarUnsigned: "OPTIONS *", which Go's server answers itself
// unless told not to, is refused like every other unsigned request: 401,
// an empty body, no signature.
func TestOptionsStarUnsigned(t *testing.T) {
	r := newRig(t, nil)
	p := r.site.run(t, nil)
	c, err := net.Dial("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "OPTIONS * HTTP/1.1\r\nHost: "+p.addr+"\r\nContent-Length: 0\r\n\r\n")
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: "OPTIONS"})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 401 || len(b) != 0 || resp.Header.Get(wire.HeaderSignature) != "" {
		t.Errorf("OPTIONS *: %d %q %v; want 401, empty, unsigned", resp.StatusCode, b, resp.Header)
	}
}

// TestTwoReplicas: a poll on the replica that does not hold an effect is
// 404 naming that replica; the client then finds the holder.
func TestTwoReplicas(t *testing.T) {
	r := newRig(t, nil)
	a := r.site.run(t, map[string]string{"POD_NAME": "effector-a"})
	b := r.site.run(t, map[string]string{"POD_NAME": "effector-b"})
	both := &client.Client{Key: placementKey, Addresses: func(context.Context) ([]string, error) { return []string{a.addr, b.addr}, nil }}
	s, err := both.Start(context.Background(), "e-ab", get(r.url("/x")))
	if err != nil || s.Status != 202 || s.State.Replica.Name != "effector-a" {
		t.Fatalf("start: %v %+v", err, s)
	}
	miss, err := both.Do(context.Background(), b.addr, "GET", "e-ab", nil)
	if err != nil || miss.Status != 404 || miss.State.State != wire.StateUnknown ||
		miss.State.Replica != (wire.Replica{Name: "effector-b", Address: b.addr}) {
		t.Fatalf("the other replica: %v %+v", err, miss)
	}
	out := settle(t, both, "e-ab", b.addr)
	if out.Kind != wire.OutcomeResponse || *out.Body != "hello /x" {
		t.Fatalf("outcome %+v", out)
	}
	// The same start at the other replica: signed for a's address, refused.
	body, _ := wire.Marshal(get(r.url("/x")))
	req, _ := http.NewRequest("POST", "http://"+b.addr+"/effects/e-ab", bytes.NewReader(body))
	client.Sign(req, placementKey, a.addr, body, time.Now(), client.NewNonce())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 || b.logCount("action=start") != 0 || r.up.Hits() != 1 {
		t.Fatalf("a start sent again to the other replica: %d, hits %d", resp.StatusCode, r.up.Hits())
	}
}

// TestDrainOnSIGTERM: after SIGTERM new starts get 503 and /healthz 503,
// an effect in flight finishes, and the process stays until its outcome
// was read.
func TestDrainOnSIGTERM(t *testing.T) {
	release := make(chan struct{})
	r := newRig(t, func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/slow" {
			<-release
		}
		io.WriteString(w, "done "+req.URL.Path)
	})
	p := r.site.run(t, map[string]string{"JR2_EFFECTOR_DRAIN_SECONDS": "60"})
	c := p.client()
	if a, err := c.Start(context.Background(), "inflight", get(r.url("/slow"))); err != nil || a.Status != 202 {
		t.Fatalf("start: %v %+v", err, a)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	waitFor(t, func() bool { return p.logCount("action=drain\n") == 1 })
	resp, err := http.Get("http://" + p.addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	hb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || string(hb) != "stopping" {
		t.Errorf("healthz while draining: %d %q", resp.StatusCode, hb)
	}
	body, _ := wire.Marshal(get(r.url("/")))
	if a, err := c.Do(context.Background(), p.addr, "POST", "late", body); err != nil || a.Status != 503 || a.Error.Error != "stopping" {
		t.Fatalf("a start while draining: %v %+v", err, a)
	}
	close(release)
	// Settled but unread: the process stays.
	waitFor(t, func() bool { return p.logCount("action=settle effect=inflight") == 1 })
	select {
	case <-p.done:
		t.Fatal("the process ended before the outcome was read")
	case <-time.After(300 * time.Millisecond):
	}
	out := settle(t, c, "inflight", p.addr)
	if *out.Body != "done /slow" {
		t.Fatalf("outcome %+v", out)
	}
	if code := p.exit(t, 10*time.Second); code != 0 {
		t.Errorf("exit %d", code)
	}
	if p.logCount("action=drain-ended waiting=0\n") != 1 || p.logCount("action=start effect=late") != 0 {
		t.Errorf("log:\n%s", p.stdout)
	}
}

// TestDrainTimeSpent: an outcome nobody reads holds the drain only for
// JR2_EFFECTOR_DRAIN_SECONDS.
func TestDrainTimeSpent(t *testing.T) {
	r := newRig(t, nil)
	p := r.site.run(t, map[string]string{"JR2_EFFECTOR_DRAIN_SECONDS": "1"})
	if a, err := p.client().Start(context.Background(), "unread", get(r.url("/"))); err != nil || a.Status != 202 {
		t.Fatalf("start: %v", err)
	}
	waitFor(t, func() bool { return p.logCount("action=settle effect=unread") == 1 })
	p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.exit(t, 15*time.Second); code != 0 {
		t.Errorf("exit %d", code)
	}
	if p.logCount("action=drain-ended waiting=1\n") != 1 || p.logCount("action=drop effect=unread reason=unread\n") != 1 {
		t.Errorf("log:\n%s", p.stdout)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestEchoAndSentinel: the process answers an upstream that reflects the
// secret in every form with no form of it, of what it built, or of the
// key; no log line or error holds one either.
func TestEchoAndSentinel(t *testing.T) {
	echo := efftest.EchoHandler()
	r := newRig(t, func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/key" {
			w.Write(append([]byte(hex.EncodeToString(placementKey)+" "), placementKey...))
			return
		}
		echo.ServeHTTP(w, req)
	})
	p := r.site.run(t, nil)
	c := p.client()
	start := &wire.Start{Kind: wire.KindHTTP, TimeoutMs: 10000, HTTP: &wire.HTTP{Method: "POST",
		URL:              wire.Value{wire.Text(r.url("/v1/")), wire.Secret("SENTINEL")},
		Headers:          map[string]wire.Value{"x-token": {wire.Text("tok "), wire.Secret("SENTINEL")}},
		Auth:             &wire.Auth{Type: wire.AuthBasic, Secret: "SENTINEL", User: "u"},
		Body:             &wire.Body{JSON: []byte(`{"a":"b"}`)},
		MaxResponseBytes: 8 << 20,
	}}
	if _, err := c.Start(context.Background(), "echo", start); err != nil {
		t.Fatal(err)
	}
	a, err := c.Poll(context.Background(), "echo", p.addr)
	for err == nil && a.State.State != wire.StateSettled {
		a, err = c.Poll(context.Background(), "echo", p.addr)
	}
	if err != nil {
		t.Fatal(err)
	}
	seen := r.url("/v1/" + efftest.EscapeSegment(sentinel))
	built := []string{sentinel, "tok " + sentinel, "u:" + sentinel, "Basic " + efftest.Base64("u:"+sentinel), seen,
		strings.TrimPrefix(seen, r.url(""))}
	whole, _ := wire.Marshal(a.State)
	if leaks := efftest.Leaks(string(whole)+*a.State.Outcome.Body, built...); len(leaks) > 0 {
		t.Errorf("the answer holds %s", strings.Join(leaks, "; "))
	}
	if !strings.Contains(*a.State.Outcome.Body, "[secret:SENTINEL]") {
		t.Errorf("the echo was not scrubbed into markers")
	}
	c.Start(context.Background(), "key", get(r.url("/key")))
	if out := settle(t, c, "key", p.addr); *out.Body != "[secret:effector-key] [secret:effector-key]" {
		t.Errorf("the key came back: %q", *out.Body)
	}
	// A malformed start that quotes the secret's name and a 400 reason.
	bad := `{"kind":"http","http":{"method":"GET","url":[{"text":"` + r.url("/?") + `"},{"secret":"SENTINEL"}]}}`
	if a, err := c.Do(context.Background(), p.addr, "POST", "bad", []byte(bad)); err != nil || a.Status != 400 {
		t.Fatalf("bad start: %v %+v", err, a)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.exit(t, 10*time.Second)
	logs := p.stdout.String() + p.stderr.String()
	if leaks := efftest.Leaks(logs, append(built, string(placementKey), hex.EncodeToString(placementKey))...); len(leaks) > 0 {
		t.Errorf("the logs hold %s", strings.Join(leaks, "; "))
	}
	for _, line := range strings.Split(strings.TrimSpace(p.stdout.String()), "\n") {
		if !strings.HasPrefix(line, "jr2.effector ") {
			t.Errorf("a line off the contract: %q", line)
		}
		if strings.Contains(line, "/v1") || strings.Contains(line, "?") {
			t.Errorf("a line with a path or query: %q", line)
		}
	}
}

func TestCommandRefused(t *testing.T) {
	r := newRig(t, nil)
	p := r.site.run(t, nil)
	a, err := p.client().Start(context.Background(), "cmd", &wire.Start{Kind: wire.KindCommand, Command: &wire.Command{Argv: []string{"true"}}})
	if err != nil || a.Status != 400 || !strings.Contains(a.Error.Error, "commands false") {
		t.Fatalf("a command start: %v %+v", err, a)
	}
}

// peakRSS is a process's peak resident memory (VmHWM) in KiB.
func peakRSS(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	return -1
}

// TestThousandEffects: 1,000 effects at once, half of them slow, each
// settles exactly once and each outcome is readable; the process's peak
// memory is reported and held under a bound.
func TestThousandEffects(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the load test starts 1,000 effects")
	}
	const n = 1000
	r := newRig(t, func(w http.ResponseWriter, req *http.Request) {
		if strings.HasPrefix(req.URL.Path, "/slow/") {
			time.Sleep(time.Second)
		}
		io.WriteString(w, "answer for "+req.URL.Path)
	})
	p := r.site.run(t, nil)
	c := &client.Client{Key: placementKey, Addresses: func(context.Context) ([]string, error) { return []string{p.addr}, nil },
		HTTP: &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: n, MaxConnsPerHost: 0}}}
	path := func(i int) string {
		if i%2 == 0 {
			return "/slow/" + strconv.Itoa(i)
		}
		return "/fast/" + strconv.Itoa(i)
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := "load-" + strconv.Itoa(i)
			a, err := c.Start(context.Background(), id, get(r.url(path(i))))
			if err != nil || a.Status != 202 {
				errs <- fmt.Errorf("start %s: %v %+v", id, err, a)
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			for {
				a, err := c.Poll(ctx, id, p.addr)
				if err != nil {
					errs <- fmt.Errorf("poll %s: %v", id, err)
					return
				}
				if a.State.State == wire.StateSettled {
					if o := a.State.Outcome; o.Kind != wire.OutcomeResponse || *o.Body != "answer for "+path(i) {
						errs <- fmt.Errorf("%s settled %+v", id, o)
					}
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// Each outcome is still readable, and each settled exactly once. The
	// child's stdout reaches p.stdout through a pipe another goroutine
	// copies: a settle line, written before its outcome could be read, may
	// still be in the pipe when the poll that saw the outcome returns.
	log := p.stdout.String()
	for deadline := time.Now().Add(5 * time.Second); strings.Count(log, "action=settle ") < n && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		log = p.stdout.String()
	}
	for i := 0; i < n; i++ {
		id := "load-" + strconv.Itoa(i)
		if got := strings.Count(log, "action=settle effect="+id+" "); got != 1 {
			t.Errorf("%s settled %d times", id, got)
		}
		if i%97 == 0 {
			if out := settle(t, c, id, p.addr); *out.Body != "answer for "+path(i) {
				t.Errorf("%s read again: %+v", id, out)
			}
		}
	}
	if got := r.up.Hits(); got != n {
		t.Errorf("the upstream got %d requests, want %d", got, n)
	}
	peak := peakRSS(p.cmd.Process.Pid)
	t.Logf("1,000 effects (500 slow): effector peak RSS %d KiB", peak)
	if peak <= 0 || peak > 256<<10 {
		t.Errorf("peak RSS %d KiB, want under 256 MiB", peak)
	}
}
