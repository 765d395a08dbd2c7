//go:build linux

package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/internal/contract"
	"jr2.dev/boundary/internal/testkit/testpki"
)

// world is one rendered pod and everything around it: the upstreams its
// secrets are bound to, the fake Orchestrator, the namespace's test host,
// the running Custodian, and the environment a Harness container gets.
type world struct {
	host   Host
	run    *Running
	dir    string            // controlplane render's --out
	values map[string]string // held secret -> its value (sentinels)
	// harness is harness.env as rendered, in order.
	harness []string
	// env is a client's whole environment: harness.env with HTTPS_PROXY
	// pointed at the bound egress listener, and what a shell has.
	env []string

	upstreamCA *testpki.CA
	echo       map[string]*echoUpstream // client name -> its own bound target
	git        *gitUpstream
	orch       *orchestrator
	ns         *nsHost
	summary    string // render's stdout
}

const (
	podName  = "ws-e2e"
	gitName  = "GIT_TOKEN"
	gitUser  = "x-access-token"
	keyPaths = "/v1/"
)

// keyName is the held secret bound to client c's echo upstream.
func keyName(c string) string { return "KEY_" + strings.ToUpper(c) }

// sentinel makes a fresh value for name: printable, with the characters
// that make its percent, JSON and base64 forms differ from it.
func sentinel(t testing.TB, name string) string {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "sk-SENTINEL/" + name + "+" + hex.EncodeToString(b) + "&<v>"
}

// manifest is the held manifest the suite renders (spec: custodian.md).
type manifest struct {
	Pod          string           `json:"pod"`
	Orchestrator string           `json:"orchestrator"`
	Sandbox      string           `json:"sandbox,omitempty"`
	Secrets      []manifestSecret `json:"secrets"`
}

type manifestSecret struct {
	Name    string              `json:"name"`
	Hosts   []string            `json:"hosts"`
	Headers []string            `json:"headers,omitempty"`
	Paths   []string            `json:"paths,omitempty"`
	AWS     map[string]bool     `json:"aws,omitempty"` // an AWS key (sigv4_test.go)
	OAuth   *filter.OAuthConfig `json:"oauth,omitempty"`
}

// newWorld builds the world and starts the Custodian on host.
func newWorld(t *testing.T, host Host) *world {
	if _, err := os.Stat(filepath.Join("node", "node_modules", "https-proxy-agent")); err != nil {
		t.Fatal("the Node client's proxy agent is not installed: run npm ci --prefix e2e/node (make test does)")
	}
	tmp := t.TempDir()
	w := &world{host: host, values: map[string]string{}, echo: map[string]*echoUpstream{}}
	w.upstreamCA = testpki.NewCA(t, "e2e upstream CA")
	w.ns = newNSHost(t, w.upstreamCA)
	// The upstreams listen on this namespace's end of the veth pair: an
	// address that is neither loopback nor guarded, so the pod is rendered
	// as for production (no --allow-local-targets), and harness.env's
	// NO_PROXY does not send a client around the Custodian.
	upIP := w.ns.hostSide.String()
	w.orch = newOrchestrator(t)
	m := manifest{Pod: podName, Orchestrator: w.orch.addr, Sandbox: podName}
	for _, c := range clients {
		u := newEchoUpstream(t, w.upstreamCA, upIP)
		w.echo[c.name] = u
		name := keyName(c.name)
		w.values[name] = sentinel(t, name)
		m.Secrets = append(m.Secrets, manifestSecret{Name: name, Hosts: []string{u.target}, Headers: []string{"x-api-key", "authorization"}, Paths: []string{keyPaths}})
	}
	w.values[gitName] = sentinel(t, gitName)
	w.git = newGitUpstream(t, w.upstreamCA, upIP, w.values[gitName])
	m.Secrets = append(m.Secrets, manifestSecret{Name: gitName, Hosts: []string{w.git.target}, Headers: []string{"authorization"}})
	sort.Slice(m.Secrets, func(i, j int) bool { return m.Secrets[i].Name < m.Secrets[j].Name })
	w.values[contract.TokenName] = sentinel(t, contract.TokenName)

	valuesDir := filepath.Join(tmp, "values")
	mustMkdir(t, valuesDir)
	for name, v := range w.values {
		mustWrite(t, filepath.Join(valuesDir, name), v+"\n", 0o600)
	}
	mb, _ := json.MarshalIndent(m, "", "  ")
	mustWrite(t, filepath.Join(tmp, "held.json"), string(mb), 0o644)
	w.upstreamCA.WriteFile(t, tmp, "upstream-ca.pem")

	caDir := filepath.Join(tmp, "ca")
	runTool(t, bins.controlplane, "ca", "init", "--dir", caDir)
	w.dir = filepath.Join(tmp, "pod")
	args := []string{"render", "--manifest", filepath.Join(tmp, "held.json"), "--ca", caDir, "--out", w.dir,
		"--ca-bundle", filepath.Join(tmp, "upstream-ca.pem"), "--values-dir", valuesDir,
		"--harness-ca-dir", filepath.Join(w.dir, "ca")}
	w.summary = runTool(t, bins.controlplane, append(args, host.RenderArgs()...)...)

	hb, err := os.ReadFile(filepath.Join(w.dir, "harness.env"))
	if err != nil {
		t.Fatal(err)
	}
	w.harness = strings.Split(strings.TrimSuffix(string(hb), "\n"), "\n")

	hosts := filepath.Join(tmp, "hosts")
	mustWrite(t, hosts, hostsFile(w.ns), 0o644)
	w.run = host.Start(t, w.dir, hosts)

	home := filepath.Join(tmp, "home")
	mustMkdir(t, home)
	w.env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "LANG=C.UTF-8",
		"GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0"}
	for _, kv := range w.harness {
		k, _, _ := strings.Cut(kv, "=")
		if k == "HTTPS_PROXY" || k == "https_proxy" {
			kv = k + "=http://" + w.run.Egress
		}
		w.env = append(w.env, kv)
	}
	return w
}

// hostsFile is /etc/hosts inside the Custodian's mount namespace: names
// that resolve to guarded addresses, and one (nshost.test) that resolves
// to the namespace's test host, which shows the file is the one read.
func hostsFile(ns *nsHost) string {
	return strings.Join([]string{
		"127.0.0.1 localhost",
		"::1 localhost ip6-localhost",
		"127.0.0.1 evil.test",
		"169.254.169.254 metadata.test",
		"::1 evil6.test",
		"100.100.100.200 alibaba.test",
		ns.addr.String() + " nshost.test",
	}, "\n") + "\n"
}

// runTool runs a built binary and returns its stdout; a failure fails t.
func runTool(t testing.TB, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(bin), strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

func mustMkdir(t testing.TB, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

func mustWrite(t testing.TB, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

// quietLog drops a test server's own error log (handshakes a client
// abandons on purpose).
func quietLog() *log.Logger { return log.New(io.Discard, "", 0) }

// secretNames are the names the Custodian holds, sorted.
func (w *world) secretNames() []string {
	var ns []string
	for n := range w.values {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return ns
}

// heldNames are the held secrets the manifest binds (every one but the
// token), sorted as the manifest lists them.
func (w *world) heldNames() []string {
	var ns []string
	for _, n := range w.secretNames() {
		if n != contract.TokenName {
			ns = append(ns, n)
		}
	}
	return ns
}

// httpsURL is https://target + path.
func httpsURL(target, path string) string { return "https://" + target + path }

// standIn is the stand-in of name.
func standIn(name string) string { return contract.StandIn(name) }

// lineFor is a jr2.custodian line with the pairs kv.
func lineFor(kv ...string) string {
	var b strings.Builder
	b.WriteString("jr2.custodian")
	for i := 0; i+1 < len(kv); i += 2 {
		fmt.Fprintf(&b, " %s=%s", kv[i], kv[i+1])
	}
	return b.String()
}
