// Package demo is `make demo`: the Custodian's main job, shown on one
// machine with no network. It renders an example pod with controlplane,
// starts a local HTTPS upstream that echoes the credential it gets, starts
// `custodian serve` on the rendered directory, and runs a client (curl, or
// a Go client configured only from harness.env where curl is missing) that
// holds nothing but the stand-in. It prints what the upstream received, what
// the client saw, one refusal, and the Custodian's log.
//
// Invariant: the demo never prints the value — only its SHA-256
// fingerprint — and checks what it shows: Run fails when the upstream got
// anything but the value, when the client saw the value in any form, or
// when the refusal reached the upstream. Everything it starts listens on
// loopback and is stopped, and its files removed, before Run returns.
package demo

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"jr2.dev/boundary/filter/scrub"
	"jr2.dev/boundary/internal/contract"
)

// Options name the binaries the demo runs.
type Options struct {
	// Custodian and Controlplane are the built commands.
	Custodian, Controlplane string
	// Curl is the client; empty runs a Go client configured only from
	// harness.env instead.
	Curl string
}

// secretName is the example pod's one held secret.
const secretName = "DEMO_API_KEY"

// Run runs the demo and writes its story to w.
func Run(ctx context.Context, o Options, w io.Writer) (err error) {
	start := time.Now()
	tmp, err := os.MkdirTemp("", "jr2-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	value, err := newValue()
	if err != nil {
		return err
	}
	up, err := startUpstream(ctx, o, tmp)
	if err != nil {
		return err
	}
	defer up.close()

	pod, summary, err := render(ctx, o, tmp, up, value)
	if err != nil {
		return err
	}
	srv, err := startServe(ctx, o.Custodian, pod)
	if err != nil {
		return err
	}
	defer func() {
		if serr := srv.stop(); serr != nil && err == nil {
			err = serr
		}
	}()
	env, err := harnessEnv(pod, srv.egress)
	if err != nil {
		return err
	}

	fmt.Fprintf(w, "jr2 boundary demo: one pod, on this machine's loopback only\n\n")
	fmt.Fprintf(w, "controlplane render: %s\n", summary)
	fmt.Fprintf(w, "the Custodian holds the value, fingerprint %s (its file; never printed)\n", fingerprint(value))
	fmt.Fprintf(w, "the client holds only %s=%s (harness.env), and goes through HTTPS_PROXY=http://%s\n\n", secretName, contract.StandIn(secretName), srv.egress)

	c := client{o: o, env: env}
	u := "https://" + up.target + "/v1/messages"
	fmt.Fprintf(w, "1. %s\n", c.describe("POST", u))
	status, body, err := c.do(ctx, "POST", u)
	if err != nil {
		return err
	}
	if err := swapped(w, up, "client", status, body, value); err != nil {
		return err
	}

	u = "https://" + up.target + "/admin/keys"
	fmt.Fprintf(w, "\n2. %s\n", c.describe("POST", u))
	status, body, err = c.do(ctx, "POST", u)
	if err != nil {
		return err
	}
	if n := len(up.take()); n != 0 || status != 403 {
		return fmt.Errorf("the refusal: %d, and %d requests reached the upstream", status, n)
	}
	fmt.Fprintf(w, "   refused, and nothing reached the upstream; the client saw %d:\n     %s\n", status, body)

	fmt.Fprintf(w, "\nthe Custodian's log (one line per decision; never a value, a stand-in, a path or a body):\n")
	for _, l := range srv.waitLines(3, 5*time.Second) {
		fmt.Fprintf(w, "  %s\n", l)
	}
	fmt.Fprintf(w, "\ndone in %.1fs; everything it started is stopped and removed.\n", time.Since(start).Seconds())
	return nil
}

// swapped checks and tells the swap: up received one request, with the
// value (values[0]), and the client (who) saw 200 and the echo with no
// form of any of values; it writes what each side saw.
func swapped(w io.Writer, up *upstream, who string, status int, body string, values ...string) error {
	got := up.take()
	if len(got) != 1 {
		return fmt.Errorf("the upstream received %d requests, want 1", len(got))
	}
	if got[0] != fingerprint(values[0]) {
		return fmt.Errorf("the upstream received a credential with fingerprint %s, not the value", got[0])
	}
	fmt.Fprintf(w, "   the upstream received x-api-key with fingerprint %s: the value, not the stand-in\n", got[0])
	fmt.Fprintf(w, "   the upstream echoed it back (as text, base64, hex and percent-encoded); the %s saw %d:\n", who, status)
	for _, line := range strings.Split(strings.TrimSpace(body), "\n") {
		fmt.Fprintf(w, "     %s\n", line)
	}
	for _, v := range values {
		if status != 200 || leaks(body, v) {
			return fmt.Errorf("the %s saw %d and the echo was not scrubbed", who, status)
		}
	}
	return nil
}

// newValue is a fresh fake credential: the demo's secret value.
func newValue() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return "sk-demo-" + hex.EncodeToString(b), nil
}

// fingerprint is what the demo shows of a value: sha256:<first 16 hex>.
func fingerprint(v string) string {
	sum := sha256.Sum256([]byte(v))
	return "sha256:" + hex.EncodeToString(sum[:8])
}

// leaks reports whether s holds the value in any form the scrubber covers.
func leaks(s, value string) bool {
	for _, f := range scrub.Forms([]byte(value)) {
		if strings.Contains(s, string(f)) {
			return true
		}
	}
	return false
}

// upstream is the bound target: HTTPS on loopback, answering with the
// credential it got in four forms, the way a careless API echoes a key in an
// error. It keeps only each credential's fingerprint.
type upstream struct {
	target string
	caPEM  string // the CA its certificate chains to
	l      net.Listener
	srv    *http.Server
	mu     sync.Mutex
	got    []string // fingerprints of the x-api-key values received
}

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	k := r.Header.Get("X-Api-Key")
	u.mu.Lock()
	u.got = append(u.got, fingerprint(k))
	u.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(map[string]string{
		"error":   "invalid x-api-key: " + k,
		"base64":  base64.StdEncoding.EncodeToString([]byte(k)),
		"hex":     hex.EncodeToString([]byte(k)),
		"percent": url.QueryEscape(k),
	})
}

func (u *upstream) take() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	got := u.got
	u.got = nil
	return got
}

func (u *upstream) close() { u.srv.Close() }

// upstreamIP is where the upstream listens: loopback (Linux routes all of
// 127.0.0.0/8 to lo), but not the 127.0.0.1 that harness.env's NO_PROXY
// sends direct, so the client goes through the Custodian as it would to
// any bound host.
const upstreamIP = "127.0.0.2"

// startUpstream is one upstream on upstreamIP (startUpstreams).
func startUpstream(ctx context.Context, o Options, tmp string) (*upstream, error) {
	ups, err := startUpstreams(ctx, o.Controlplane, filepath.Join(tmp, "upstream"), upstreamIP, 1)
	if err != nil {
		return nil, err
	}
	return ups[0], nil
}

// startUpstreams listens n times on ip and serves each with a certificate
// from a CA of their own, issued the way controlplane issues every leaf: a
// second `ca init` and a render that binds the upstreams' addresses. On an
// error none is left listening.
func startUpstreams(ctx context.Context, controlplane, dir, ip string, n int) (ups []*upstream, err error) {
	defer func() {
		if err != nil {
			for _, u := range ups {
				if u.srv != nil {
					u.close()
				} else {
					u.l.Close()
				}
			}
			ups = nil
		}
	}()
	var hosts []string
	for range n {
		l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		if err != nil {
			return ups, err
		}
		ups = append(ups, &upstream{target: l.Addr().String(), l: l})
		hosts = append(hosts, l.Addr().String())
	}
	ca := filepath.Join(dir, "ca")
	h, _ := json.Marshal(hosts)
	m := fmt.Sprintf(`{"pod":"upstream-cert","orchestrator":"127.0.0.1:9","secrets":[{"name":"UPSTREAM","hosts":%s}]}`, h)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return ups, err
	}
	if err := os.WriteFile(filepath.Join(dir, "held.json"), []byte(m), 0o600); err != nil {
		return ups, err
	}
	if _, err := tool(ctx, controlplane, "ca", "init", "--dir", ca); err != nil {
		return ups, err
	}
	if _, err := tool(ctx, controlplane, "render", "--manifest", filepath.Join(dir, "held.json"), "--ca", ca,
		"--out", filepath.Join(dir, "out"), "--values-dir", filepath.Join(dir, "none"), "--allow-local-targets"); err != nil {
		return ups, err
	}
	for _, u := range ups {
		base := filepath.Join(dir, "out", contract.LeafBase(u.target))
		cert, err := tls.LoadX509KeyPair(base+".crt", base+".key")
		if err != nil {
			return ups, err
		}
		u.caPEM = filepath.Join(ca, "ca.crt")
		u.srv = &http.Server{Handler: u, ReadHeaderTimeout: 10 * time.Second, ErrorLog: nil}
		go u.srv.Serve(tls.NewListener(u.l, &tls.Config{Certificates: []tls.Certificate{cert}}))
	}
	return ups, nil
}

// render writes the value file and the example pod's manifest, makes the
// pod's CA and renders the pod. The upstream is on loopback, which a pod
// never binds (the agent shares it): --allow-local-targets is for a demo
// on one machine.
func render(ctx context.Context, o Options, tmp string, up *upstream, value string) (pod, summary string, err error) {
	values := filepath.Join(tmp, "values")
	if err := os.MkdirAll(values, 0o700); err != nil {
		return "", "", err
	}
	for name, v := range map[string]string{secretName: value, contract.TokenName: "demo-sandbox-token-unused"} {
		if err := os.WriteFile(filepath.Join(values, name), []byte(v+"\n"), 0o600); err != nil {
			return "", "", err
		}
	}
	m := fmt.Sprintf(`{"pod":"demo","orchestrator":"127.0.0.1:9","secrets":[{"name":%q,"hosts":[%q],"headers":["x-api-key"],"paths":["/v1/"]}]}`, secretName, up.target)
	if err := os.WriteFile(filepath.Join(tmp, "held.json"), []byte(m), 0o600); err != nil {
		return "", "", err
	}
	if _, err := tool(ctx, o.Controlplane, "ca", "init", "--dir", filepath.Join(tmp, "ca")); err != nil {
		return "", "", err
	}
	pod = filepath.Join(tmp, "pod")
	summary, err = tool(ctx, o.Controlplane, "render", "--manifest", filepath.Join(tmp, "held.json"), "--ca", filepath.Join(tmp, "ca"),
		"--out", pod, "--ca-bundle", up.caPEM, "--values-dir", values, "--harness-ca-dir", filepath.Join(pod, "ca"), "--allow-local-targets")
	return pod, strings.TrimSpace(summary), err
}

// tool runs a built command and returns its stdout.
func tool(ctx context.Context, bin string, args ...string) (string, error) {
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %v: %s", filepath.Base(bin), args[0], err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// serve is the running `custodian serve`.
type serve struct {
	cmd    *exec.Cmd
	egress string
	mu     sync.Mutex
	lines  []string
	done   chan error
}

func startServe(ctx context.Context, bin, pod string) (*serve, error) {
	s := &serve{done: make(chan error, 1)}
	s.cmd = exec.CommandContext(ctx, bin, "serve", "--config", filepath.Join(pod, "custodian.json"),
		"--control", "127.0.0.1:0", "--egress", "127.0.0.1:0", "--health", "127.0.0.1:0")
	var stderr bytes.Buffer
	s.cmd.Stderr = &stderr
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			s.mu.Lock()
			s.lines = append(s.lines, sc.Text())
			s.mu.Unlock()
			if strings.HasPrefix(sc.Text(), "jr2.custodian ready ") {
				ready <- sc.Text()
			}
		}
		s.done <- s.cmd.Wait()
	}()
	select {
	case line := <-ready:
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, "egress="); ok {
				s.egress = v
			}
		}
		return s, nil
	case err := <-s.done:
		return nil, fmt.Errorf("custodian serve stopped: %v: %s", err, strings.TrimSpace(stderr.String()))
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		return nil, errors.New("custodian serve did not print its ready line within 10 s")
	}
}

// waitLines returns the log once it has n lines, or what it has after d.
func (s *serve) waitLines(n int, d time.Duration) []string {
	deadline := time.Now().Add(d)
	for {
		s.mu.Lock()
		lines := append([]string(nil), s.lines...)
		s.mu.Unlock()
		if len(lines) >= n || time.Now().After(deadline) {
			return lines
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stop ends serve gracefully (SIGTERM); it must exit 0.
func (s *serve) stop() error {
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		if err != nil {
			return fmt.Errorf("custodian serve: %v", err)
		}
		return nil
	case <-time.After(15 * time.Second):
		s.cmd.Process.Kill()
		return errors.New("custodian serve did not stop within 15 s of SIGTERM")
	}
}

// harnessEnv is the rendered harness.env, with the proxy pointed at the
// egress listener serve bound.
func harnessEnv(pod, egress string) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(pod, "harness.env"))
	if err != nil {
		return nil, err
	}
	var env []string
	for _, kv := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		k, _, _ := strings.Cut(kv, "=")
		if k == "HTTPS_PROXY" || k == "https_proxy" {
			kv = k + "=http://" + egress
		}
		env = append(env, kv)
	}
	return env, nil
}

// client is what the agent's tool would be: it knows only harness.env.
type client struct {
	o   Options
	env []string
}

func (c client) get(k string) string {
	for _, kv := range c.env {
		if v, ok := strings.CutPrefix(kv, k+"="); ok {
			return v
		}
	}
	return ""
}

func (c client) describe(method, u string) string {
	if c.o.Curl != "" {
		return fmt.Sprintf("curl -X %s %s -H \"x-api-key: $%s\"", method, u, secretName)
	}
	return fmt.Sprintf("%s %s with x-api-key: $%s (a Go client; curl is not installed)", method, u, secretName)
}

// do sends method u with x-api-key set to the stand-in from harness.env.
func (c client) do(ctx context.Context, method, u string) (int, string, error) {
	key := c.get(secretName)
	if c.o.Curl != "" {
		cmd := exec.CommandContext(ctx, c.o.Curl, "-sS", "-X", method, "-H", "x-api-key: "+key, "-w", "\n%{http_code}", u)
		cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, c.env...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return 0, "", fmt.Errorf("curl: %v: %s", err, strings.TrimSpace(stderr.String()))
		}
		body, code, _ := strings.Cut(string(out), "\n")
		if i := strings.LastIndexByte(string(out), '\n'); i >= 0 {
			body, code = string(out[:i]), string(out[i+1:])
		}
		var status int
		fmt.Sscan(code, &status)
		return status, body, nil
	}
	proxy, err := url.Parse(c.get("HTTPS_PROXY"))
	if err != nil {
		return 0, "", err
	}
	pem, err := os.ReadFile(c.get("SSL_CERT_FILE"))
	if err != nil {
		return 0, "", err
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(proxy), TLSClientConfig: &tls.Config{RootCAs: roots}}}
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("x-api-key", key)
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}
