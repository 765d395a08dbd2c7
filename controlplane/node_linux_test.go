package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"jr2.dev/boundary/filter/scrub"
	"jr2.dev/boundary/internal/contract"
	"jr2.dev/boundary/internal/testkit/imagestest"
	"jr2.dev/boundary/internal/testkit/keyecho"
	"jr2.dev/boundary/internal/testkit/nodetest"
	"jr2.dev/boundary/internal/testkit/testpki"
)

// What the Pod on the node holds: one secret, bound to an upstream on the
// node's address, its value in a Secret of the user's.
const (
	nodePod      = "agent-on-node"
	nodeUserKeys = "agent-keys"
	nodeHeld     = "KEY_A" // bound to the upstream, valueFrom agent-keys/a
	nodeOther    = "KEY_B" // bound to another upstream, valueFrom agent-keys/b
	// conventionSecret holds the rest (the Sandbox token).
	conventionSecret = "jr2-held-secrets-" + nodePod
)

// TestPodOnNode: what render writes runs on a real node. The images
// `make images` built are imported into the node's containerd; for each
// sidecar the pod's objects are rendered by this command (the Custodian as
// `custodian envoy` with the module in the custodian-envoy image, then as
// `custodian serve` in the custodian-serve image; the agent image with
// curl and Node) and applied with the documented `kubectl apply
// --server-side`, the user's value Secret created through the API server.
// The kubelet runs the Pod: the Custodian's native sidecar is started and
// ready, and began before the agent; the agent container's own curl and
// the e2e suite's Node client, with only the env the Pod gives them, send
// the stand-in, and the upstream on the node's address gets the value from
// the API server while the agent gets the echo scrubbed; the stand-in
// sent toward the host of another secret is refused. The kernel shows
// what the kubelet applied to the Custodian's processes (uid 65532, no
// capability, seccomp, no_new_privs, a read-only root), and the agent
// reads no value and holds no service-account token.
func TestPodOnNode(t *testing.T) {
	imgs := imagestest.Find(t, "custodian-envoy", "custodian-serve", "agent", "pause")
	n := nodetest.Start(t, nodetest.Options{Images: imagestest.Tars(imgs), Pause: imgs["pause"].Ref})
	if n == nil {
		return // the node's namespaces ran the test
	}
	for _, sidecar := range []string{"envoy", "serve"} {
		t.Run(sidecar, func(t *testing.T) { podOnNode(t, n, imgs, sidecar) })
	}
}

// podOnNode renders, applies and exercises one Pod whose Custodian is
// sidecar (render's --sidecar), in a namespace of its own.
func podOnNode(t *testing.T, n *nodetest.Node, imgs map[string]imagestest.Image, sidecar string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := renderHeldPod(t, n, imgs, sidecar)
	p.createSecrets(ctx, t, n)
	ns, dir, up, other, image := p.ns, p.dir, p.up, p.other, p.image
	value := p.value
	if out, err := n.API.Run(t, dir, "kubectl apply --server-side --field-manager=jr2 -f kubernetes/"); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}

	pod := waitRunning(ctx, t, n, ns, nodePod)
	if len(pod.Spec.InitContainers) != 1 || len(pod.Spec.Containers) != 1 || len(pod.Status.InitContainerStatuses) != 1 || len(pod.Status.ContainerStatuses) != 1 {
		t.Fatalf("the Pod has %d init containers and %d containers (%d, %d statuses); want the Custodian's sidecar and the agent",
			len(pod.Spec.InitContainers), len(pod.Spec.Containers), len(pod.Status.InitContainerStatuses), len(pod.Status.ContainerStatuses))
	}
	side, agent := pod.Status.InitContainerStatuses[0], pod.Status.ContainerStatuses[0]
	t.Run("the sidecar first", func(t *testing.T) {
		sideSpec := pod.Spec.InitContainers[0]
		if sideSpec.RestartPolicy == nil || *sideSpec.RestartPolicy != corev1.ContainerRestartPolicyAlways || sideSpec.StartupProbe == nil {
			t.Fatalf("the init container %s is not a native sidecar with a startup probe", sideSpec.Name)
		}
		if side.Started == nil || !*side.Started || !side.Ready || side.State.Running == nil || side.RestartCount != 0 {
			t.Fatalf("the sidecar %s: %+v; want started, ready and running, never restarted", side.Name, side)
		}
		if agent.State.Running == nil || agent.State.Running.StartedAt.Before(&side.State.Running.StartedAt) {
			t.Errorf("the agent started at %v, the sidecar at %v; the sidecar starts first", agent.State.Running, side.State.Running.StartedAt)
		}
		// Started first, to the kernel's clock tick: the first process of
		// the sidecar's container began before the agent's.
		sideTicks, agentTicks := processStart(t, n, side.ContainerID), processStart(t, n, agent.ContainerID)
		if sideTicks >= agentTicks {
			t.Errorf("the sidecar's process started at tick %d since boot, the agent's at %d; the sidecar starts first", sideTicks, agentTicks)
		}
		t.Logf("the agent's process started %v after the sidecar's", time.Duration(agentTicks-sideTicks)*time.Second/ticksPerSecond)
		if side.Image != image || agent.Image != imgs["agent"].Ref {
			t.Errorf("the sidecar ran %s and the agent %s; want the imported %s and %s", side.Image, agent.Image, image, imgs["agent"].Ref)
		}
	})
	t.Run("what the kubelet applied", func(t *testing.T) {
		// Every process of the Custodian's container, as the kernel
		// sees it: uid and gid 65532, no effective capability, the
		// runtime's seccomp filter (mode 2), no_new_privs, a read-only
		// root.
		pids := containerPIDs(t, n, side.ContainerID)
		if sidecar == "envoy" && len(pids) < 2 {
			t.Errorf("the Envoy sidecar's processes %v; want custodian envoy and Envoy under it", pids)
		}
		for _, pid := range pids {
			st, ro := confinement(t, pid)
			want := map[string]string{"Uid": "65532 65532 65532 65532", "Gid": "65532 65532 65532 65532", "CapEff": "0000000000000000", "NoNewPrivs": "1", "Seccomp": "2"}
			for k, v := range want {
				if st[k] != v {
					t.Errorf("the Custodian's process %s (%s): %s %q; want %q", pid, st["Name"], k, st[k], v)
				}
			}
			if !ro {
				t.Errorf("the Custodian's process %s (%s): its root is not mounted read-only", pid, st["Name"])
			}
		}
	})
	exec := func(t *testing.T, script string) string { t.Helper(); return p.exec(t, n, nodePod, agent.Name, script) }
	curl := func(t *testing.T, target string) (int, string) {
		t.Helper()
		return p.curl(t, n, nodePod, agent.Name, target, "/v1/echo")
	}
	noValue := func(t *testing.T, where, s string) { t.Helper(); p.noValue(t, where, s) }
	t.Run("swap and scrub", func(t *testing.T) {
		code, body := curl(t, up.addr)
		got := up.Take()
		if len(got) != 1 || got[0] != value {
			t.Fatalf("the upstream got %d requests, the first with the value: %v; want one, with the value from the API server", len(got), len(got) > 0 && got[0] == value)
		}
		if code != 200 || !strings.HasPrefix(body, "invalid key ") {
			t.Errorf("the agent got %d %q; want 200 and the echo", code, body)
		}
		noValue(t, "the agent's answer", body)
	})
	// The e2e suite's Node client (Node 24 in the agent image), once with
	// https-proxy-agent and once with Node's own proxy support
	// (NODE_USE_ENV_PROXY, which harness.env sets): the same swap.
	for _, mode := range []struct{ name, flag string }{{"https-proxy-agent", ""}, {"NODE_USE_ENV_PROXY", "--env-proxy"}} {
		t.Run("node client, "+mode.name, func(t *testing.T) {
			out := exec(t, fmt.Sprintf(`exec node /opt/jr2/e2e/node/client.js %s "{\"method\":\"GET\",\"url\":\"https://%s/v1/echo\",\"headers\":[[\"x-api-key\",\"$%s\"]]}"`, mode.flag, up.addr, nodeHeld))
			var res struct {
				Status int    `json:"status"`
				Body   string `json:"body"`
			}
			if err := json.Unmarshal([]byte(out), &res); err != nil {
				t.Fatalf("the Node client printed %q: %v", out, err)
			}
			if got := up.Take(); len(got) != 1 || got[0] != value {
				t.Fatalf("the upstream got %d requests, the first with the value: %v; want one, with the value from the API server", len(got), len(got) > 0 && got[0] == value)
			}
			if res.Status != 200 || !strings.HasPrefix(res.Body, "invalid key ") {
				t.Errorf("the Node client got %d %q; want 200 and the echo", res.Status, res.Body)
			}
			noValue(t, "the Node client's answer", out)
		})
	}
	t.Run("the agent holds no value", func(t *testing.T) {
		// Its env, its processes' environments, its own mounts and every
		// place the Custodian's container mounts a volume (the Pod's
		// paths, tried in the agent's), and no service-account token.
		script := "env; cat /proc/[0-9]*/environ"
		for _, c := range []corev1.Container{pod.Spec.Containers[0], pod.Spec.InitContainers[0]} {
			for _, vm := range c.VolumeMounts {
				script += fmt.Sprintf("; ls -la %[1]s; cat %[1]s/* %[1]s/*/* %[1]s/*/*/*", vm.MountPath)
			}
		}
		out := exec(t, script+" 2>&1; test -e /var/run/secrets/kubernetes.io/serviceaccount && echo SA-TOKEN-MOUNTED; true")
		noValue(t, "the agent container's env and files", out)
		if !strings.Contains(out, "bundle.crt") || !strings.Contains(out, "HTTPS_PROXY=") {
			t.Errorf("the agent sees neither its trust files nor its proxy env:\n%s", out)
		}
		if strings.Contains(out, "SA-TOKEN-MOUNTED") {
			t.Errorf("the agent container has a service-account token mounted")
		}
		if st, _ := confinement(t, containerPIDs(t, n, agent.ContainerID)[0]); st["Uid"] != "1000 1000 1000 1000" {
			t.Errorf("the agent's process runs as uid %q; want render's --agent-uid 1000", st["Uid"])
		}
	})
	t.Run("another host refused", func(t *testing.T) {
		code, body := curl(t, other.addr)
		if got := len(other.Take()) + len(up.Take()); got != 0 || code != 403 {
			t.Errorf("%s's stand-in toward %s's host: %d %q, and %d requests reached an upstream; want 403 and none", nodeHeld, nodeOther, code, body, got)
		}
		noValue(t, "the refusal", body)
	})
	logs, err := n.API.Client.CoreV1().Pods(ns).GetLogs(nodePod, &corev1.PodLogOptions{Container: side.Name}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("kubectl logs -c %s: %v", side.Name, err)
	}
	if !strings.Contains(string(logs), "jr2.custodian ready ") {
		t.Errorf("the Custodian's log lacks its ready line:\n%s", lastLines(string(logs), 20))
	}
	noValue(t, "the Custodian's log", string(logs))
}

// heldPod is one pod render wrote for the node, in a namespace of its
// own: KEY_A bound to up, KEY_B to other, their values in the user's
// Secret agent-keys and the Sandbox token in the convention Secret, none
// of them created yet.
type heldPod struct {
	ns, dir, tmp string
	sidecar      string // render's --sidecar
	image        string // the Custodian's
	up, other    *nodeUpstream
	value        string // KEY_A's
	otherValue   string // KEY_B's
	token        string // JR2_SANDBOX_TOKEN's
}

// renderHeldPod runs ca init and render for one pod whose Custodian is
// sidecar, in a new namespace.
func renderHeldPod(t *testing.T, n *nodetest.Node, imgs map[string]imagestest.Image, sidecar string) *heldPod {
	t.Helper()
	tmp := t.TempDir()
	upCA := testpki.NewCA(t, "node-upstream")
	p := &heldPod{
		ns: n.API.Namespace(t), dir: filepath.Join(tmp, "pod"), tmp: tmp, sidecar: sidecar, image: imgs["custodian-"+sidecar].Ref,
		up: startNodeUpstream(t, upCA), other: startNodeUpstream(t, upCA), // KEY_B's: not KEY_A's host
		value: nodeSentinel(t, nodeHeld), otherValue: nodeSentinel(t, nodeOther), token: nodeSentinel(t, contract.TokenName),
	}
	m := fmt.Sprintf(`{"pod":%q,"orchestrator":"127.0.0.1:9","secrets":[`+
		`{"name":%q,"hosts":[%q],"headers":["x-api-key"],"paths":["/v1/"],"valueFrom":{"secretKeyRef":{"name":%q,"key":"a"}}},`+
		`{"name":%q,"hosts":[%q],"headers":["x-api-key"],"paths":["/v1/"],"valueFrom":{"secretKeyRef":{"name":%q,"key":"b"}}}]}`,
		nodePod, nodeHeld, p.up.addr, nodeUserKeys, nodeOther, p.other.addr, nodeUserKeys)
	if err := os.WriteFile(filepath.Join(tmp, "held.json"), []byte(m), 0o600); err != nil {
		t.Fatal(err)
	}
	roots := rootsPEM(t)
	bundle := upCA.WriteFile(t, tmp, "upstream-ca.pem")
	for _, args := range [][]string{
		{"ca", "init", "--dir", filepath.Join(tmp, "ca")},
		{"render", "--manifest", filepath.Join(tmp, "held.json"), "--ca", filepath.Join(tmp, "ca"), "--out", p.dir,
			"--ca-bundle", bundle, "--allow-local-targets", "--namespace", p.ns,
			"--sidecar", sidecar, "--custodian-image", p.image, "--agent-image", imgs["agent"].Ref,
			"--data-plane", "module", "--module", "/opt/jr2/lib/custodian-module.so", "--module-in-pod"},
	} {
		if code, _, stderr := runCmd(t, roots, args...); code != 0 {
			t.Fatalf("controlplane %s: exit %d\n%s", strings.Join(args, " "), code, stderr)
		}
	}
	return p
}

// createSecrets creates, through the API server, the Secrets named (both
// when none is): the user's value Secret, nodeUserKeys, and the convention
// Secret with the token, conventionSecret.
func (p *heldPod) createSecrets(ctx context.Context, t *testing.T, n *nodetest.Node, names ...string) {
	t.Helper()
	if len(names) == 0 {
		names = []string{nodeUserKeys, conventionSecret}
	}
	data := map[string]map[string][]byte{
		nodeUserKeys:     {"a": []byte(p.value), "b": []byte(p.otherValue)},
		conventionSecret: {contract.TokenName: []byte(p.token)},
	}
	for _, name := range names {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.ns}, Type: corev1.SecretTypeOpaque, Data: data[name]}
		if _, err := n.API.Client.CoreV1().Secrets(p.ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// exec runs script with a container's own shell, env and clients
// (kubectl exec), and returns what it printed.
func (p *heldPod) exec(t *testing.T, n *nodetest.Node, pod, container, script string) string {
	t.Helper()
	line := fmt.Sprintf(`kubectl exec -n %s %s -c %s -- /bin/sh -c '%s'`, p.ns, pod, container, script)
	out, err := n.API.Run(t, p.dir, line)
	if err != nil {
		t.Fatalf("%s: %v\n%s", line, err, out)
	}
	return out
}

// curl sends KEY_A's stand-in, from the agent's env, toward target's path
// with the agent container's curl; the status is printed last.
func (p *heldPod) curl(t *testing.T, n *nodetest.Node, pod, container, target, path string) (int, string) {
	t.Helper()
	out := p.exec(t, n, pod, container, fmt.Sprintf(`exec curl -sS --max-time 60 -w "\n%%{http_code}" -H "x-api-key: $%s" https://%s%s`, nodeHeld, target, path))
	out = strings.TrimRight(out, "\n")
	i := strings.LastIndexByte(out, '\n')
	var code int
	fmt.Sscan(out[i+1:], &code)
	return code, out[:max(i, 0)]
}

// noValue fails the test when s holds any form of the pod's values or of
// the extra ones (a value rotated away).
func (p *heldPod) noValue(t *testing.T, where, s string, extra ...string) {
	t.Helper()
	vs := map[string]string{nodeHeld: p.value, nodeOther: p.otherValue, contract.TokenName: p.token}
	for i, v := range extra {
		vs[fmt.Sprintf("a rotated value (%d)", i)] = v
	}
	for name, v := range vs {
		for _, f := range scrub.Forms([]byte(v)) {
			if strings.Contains(s, string(f)) {
				t.Errorf("%s holds a form of %s's value", where, name)
			}
		}
	}
}

// ticksPerSecond is the unit of /proc/PID/stat's times (USER_HZ, 100 on
// Linux).
const ticksPerSecond = 100

// containerPIDs are the processes of a container (containerd://ID, as
// its status names it), its first process first, as the node's PID
// namespace numbers them (it holds the containers' namespaces).
func containerPIDs(t *testing.T, n *nodetest.Node, containerID string) []string {
	t.Helper()
	id := strings.TrimPrefix(containerID, "containerd://")
	out, err := n.Ctr("tasks", "ls")
	if err != nil {
		t.Fatalf("ctr tasks ls: %v\n%s", err, out)
	}
	var pids []string
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == id {
			pids = append(pids, f[1])
		}
	}
	if len(pids) != 1 {
		t.Fatalf("container %s: no one task in\n%s", id, out)
	}
	ps, err := n.Ctr("tasks", "ps", id)
	if err != nil {
		t.Fatalf("ctr tasks ps %s: %v\n%s", id, err, ps)
	}
	for _, line := range strings.Split(string(ps), "\n") {
		// PID INFO, then a line a process.
		f := strings.Fields(line)
		if len(f) == 0 || f[0] == pids[0] || strings.Trim(f[0], "0123456789") != "" {
			continue
		}
		pids = append(pids, f[0])
	}
	return pids
}

// processStart is when a container's first process started, in clock
// ticks since boot (/proc/PID/stat's starttime).
func processStart(t *testing.T, n *nodetest.Node, containerID string) int64 {
	t.Helper()
	pid := containerPIDs(t, n, containerID)[0]
	stat, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	// After the command's ")", the fields from 3 (state) on; starttime
	// is field 22.
	_, rest, _ := strings.Cut(string(stat), ") ")
	var ticks int64
	if f := strings.Fields(rest); len(f) < 20 {
		t.Fatalf("/proc/%s/stat: %q", pid, stat)
	} else if _, err := fmt.Sscan(f[22-3], &ticks); err != nil {
		t.Fatalf("/proc/%s/stat's starttime %q: %v", pid, f[22-3], err)
	}
	return ticks
}

// confinement is what the kernel says of a process: its uid and gid
// lines, effective capabilities, no_new_privs, seccomp mode
// (/proc/PID/status) and whether its root is mounted read-only
// (/proc/PID/mountinfo).
func confinement(t *testing.T, pid string) (status map[string]string, rootRO bool) {
	t.Helper()
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		t.Fatal(err)
	}
	status = map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			status[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	mi, err := os.ReadFile("/proc/" + pid + "/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mi), "\n") {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS …
		if f := strings.Fields(line); len(f) > 5 && f[4] == "/" {
			rootRO = strings.HasPrefix(f[5], "ro,") || f[5] == "ro"
		}
	}
	return status, rootRO
}

// waitRunning polls the Pod until every container of it is ready, or
// fails naming each container's state and the kubelet's last lines.
func waitRunning(ctx context.Context, t *testing.T, n *nodetest.Node, ns, name string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	var err error
	for {
		pod, err = n.API.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil && pod.Status.Phase == corev1.PodRunning && len(pod.Status.ContainerStatuses) > 0 {
			ready := true
			for _, s := range append(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses...) {
				ready = ready && s.Ready
			}
			if ready {
				return pod
			}
		}
		if ctx.Err() != nil || pod != nil && pod.Status.Phase == corev1.PodFailed {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	var b strings.Builder
	if pod != nil {
		fmt.Fprintf(&b, "phase %s %s\n", pod.Status.Phase, pod.Status.Message)
		for _, s := range append(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses...) {
			fmt.Fprintf(&b, "  %s: ready %v, %+v\n", s.Name, s.Ready, s.State)
		}
	}
	if node, err := n.API.Client.CoreV1().Nodes().Get(context.Background(), nodetest.NodeName, metav1.GetOptions{}); err == nil {
		fmt.Fprintf(&b, "  node taints %+v\n", node.Spec.Taints)
	}
	if evs, err := n.API.Client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{}); err == nil {
		for _, e := range evs.Items {
			fmt.Fprintf(&b, "  event %s %s: %s\n", e.InvolvedObject.FieldPath, e.Reason, e.Message)
		}
	}
	t.Fatalf("the Pod %s did not become ready: %v\n%s\nthe kubelet's log:\n%s", name, err, b.String(), lastLines(n.Log("kubelet"), 30)+"\nthe controller-manager's:\n"+lastLines(n.Log("kube-controller-manager"), 60))
	return nil
}

// nodeUpstream is an HTTPS upstream on the node's address (which the Pod
// reaches through the bridge), under its own CA: a keyecho.Echo, which on
// /v1/hold first tells Held and waits for one Release (a request the test
// keeps in flight), and on /v1/say first writes what Say holds (an
// upstream that echoes a value it knows).
type nodeUpstream struct {
	addr string
	keyecho.Echo
	Held, Release chan struct{}
	mu            sync.Mutex
	say           string
}

func startNodeUpstream(t *testing.T, ca *testpki.CA) *nodeUpstream {
	t.Helper()
	l, err := nodetest.Listen()
	if err != nil {
		t.Fatal(err)
	}
	u := &nodeUpstream{addr: l.Addr().String(), Held: make(chan struct{}, 8), Release: make(chan struct{})}
	srv := &http.Server{Handler: u, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{ca.Leaf(t, nodetest.NodeIP).TLS}}))
	t.Cleanup(func() { srv.Close() })
	return u
}

func (u *nodeUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/v1/hold":
		u.Held <- struct{}{}
		select {
		case <-u.Release:
		case <-r.Context().Done():
			return
		}
	case "/v1/say":
		u.mu.Lock()
		fmt.Fprintf(w, "said %s\n", u.say)
		u.mu.Unlock()
	}
	u.Echo.ServeHTTP(w, r)
}

// Say sets what /v1/say answers first.
func (u *nodeUpstream) Say(s string) {
	u.mu.Lock()
	u.say = s
	u.mu.Unlock()
}

// nodeSentinel is a value no test writes anywhere else, with the bytes a
// careless encoder changes (/, +, &, <, >).
func nodeSentinel(t *testing.T, name string) string {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "sk-SENTINEL/" + name + "+" + hex.EncodeToString(b) + "&<v>"
}

// lastLines is s's last n lines.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{"…"}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}
