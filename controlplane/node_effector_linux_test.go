package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"jr2.dev/boundary/controlplane/internal/kube"
	"jr2.dev/boundary/effector/client"
	"jr2.dev/boundary/filter/scrub"
	"jr2.dev/boundary/internal/testkit/imagestest"
	"jr2.dev/boundary/internal/testkit/nodetest"
	"jr2.dev/boundary/internal/testkit/testpki"
)

// The Effector on the node: the instance placement's objects, one effect
// secret, a drain short enough to wait out.
const (
	effPlacement = "instance"
	effSecret    = "EXAMPLE_API_KEY"
	effDrain     = 20 // --drain; the grace period is 25 s
	// effCallDir is where a call Pod finds the placement key and its
	// start bodies.
	effCallDir = "/etc/jr2/call"
)

// effLines are docs/kubernetes.md's lines for the Effector's objects, run
// as written from the directory holding effector.key, the value file and
// the render (DIR), with kubectl's context in the Effector's namespace.
var effLines = []string{
	"kubectl create secret generic jr2-instance-effector-key --from-file=effector-key=effector.key",
	"kubectl create secret generic jr2-instance-effector-secrets --from-file=EXAMPLE_API_KEY=effector-secrets/EXAMPLE_API_KEY",
	"kubectl apply --server-side --field-manager=jr2 -f DIR/kubernetes/",
	"kubectl rollout status deployment/jr2-instance-effector --timeout=180s",
}

// TestEffectorOnNode: what `controlplane effector` writes runs on a real
// node. The placement key from `controlplane key` and the effect secret's
// value file go into the user's two Secrets, and the render is applied,
// by docs/kubernetes.md's kubectl lines as written; the controller-manager
// rolls the Deployment out and the kubelet runs the effector image `make
// images` built, nothing of the host mounted, confined as the Deployment
// says. The Service's EndpointSlice (the endpointslice controller's, from
// the Service's selector) names the replica's POD_IP:8082, the address a
// headless Service gives its clients; a Pod of the effector image runs
// `effector call` toward that address, signing with the key projected from
// the same Secret. The upstream is https on the node's address under a CA
// made here, which the render trusts by --ca-file (the CA ConfigMap, where
// JR2_CA_FILE points): the signed http effect reaches it with the value
// from the Secret, and the call prints the signed answer with the echo
// scrubbed. Then, with an effect held in flight by its
// upstream, the replica's Pod is deleted: the replica says it is stopping
// (healthz 503, a signed start 503 stopping) and the EndpointSlice keeps it
// as terminating; the upstream lets go, the call Pod gets its outcome, the
// Effector logs its drain ending with nothing unread, its container exits
// 0 and the Pod is gone before its grace period ends. The same
// effector.json rendered without --ca-file and applied over it rolls out a
// replica that trusts the image's system roots only, and the same effect
// toward the same upstream is unreachable, nothing sent, its certificate
// signed by an unknown authority. No form of the value or of the key, and
// no byte of the CA's private key, is in any log, answer or object of the
// namespace.
func TestEffectorOnNode(t *testing.T) {
	imgs := imagestest.Find(t, "effector", "pause")
	n := nodetest.Start(t, nodetest.Options{Images: imagestest.Tars(imgs), Pause: imgs["pause"].Ref})
	if n == nil {
		return // the node's namespaces ran the test
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e := deployEffector(ctx, t, n, imgs["effector"].Ref)
	pod := e.pod
	t.Run("the Deployment runs the image", func(t *testing.T) {
		c := pod.Status.ContainerStatuses
		if len(pod.Spec.Containers) != 1 || len(c) != 1 || !c[0].Ready || c[0].RestartCount != 0 || c[0].Image != e.image {
			t.Fatalf("the Effector's Pod %s: %d containers, statuses %+v; want one, ready, never restarted, running %s", pod.Name, len(pod.Spec.Containers), c, e.image)
		}
		for _, v := range pod.Spec.Volumes {
			if v.HostPath != nil {
				t.Errorf("the Effector's Pod mounts the host's %s (volume %s)", v.HostPath.Path, v.Name)
			}
		}
		pid := containerPIDs(t, n, c[0].ContainerID)[0]
		if exe, err := os.Readlink("/proc/" + pid + "/exe"); err != nil || exe != kube.EffectorBinary {
			t.Errorf("the Effector's process runs %q (%v); want the image's %s", exe, err, kube.EffectorBinary)
		}
		st, ro := confinement(t, pid)
		want := map[string]string{"Uid": "65532 65532 65532 65532", "Gid": "65532 65532 65532 65532", "CapEff": "0000000000000000", "NoNewPrivs": "1", "Seccomp": "2"}
		for k, v := range want {
			if st[k] != v {
				t.Errorf("the Effector's process: %s %q; want %q", k, st[k], v)
			}
		}
		if !ro {
			t.Errorf("the Effector's root is not mounted read-only")
		}
	})

	t.Run("a signed effect from a pod", func(t *testing.T) {
		out := e.call(ctx, t, "echo", "/v1/echo")
		if got := e.up.Take(); !equal(got, e.value) {
			t.Fatalf("the upstream got %d requests, the first with the value: %v; want one, with the value from the Secret", len(got), len(got) > 0 && got[0] == e.value)
		}
		e.settled(t, out, pod.Name)
	})

	t.Run("drain on delete", func(t *testing.T) { e.drain(ctx, t, n) })

	t.Run("without --ca-file the https upstream is refused", func(t *testing.T) { e.untrusted(ctx, t) })

	t.Run("no value in the objects", func(t *testing.T) {
		out, err := n.API.RunIn(t, e.dir, e.ns, "kubectl get configmaps,deployments,replicasets,pods,services,endpointslices,events -o json")
		if err != nil {
			t.Fatalf("kubectl get: %v\n%s", err, out)
		}
		if !strings.Contains(out, e.name) {
			t.Fatalf("kubectl get printed no object named %s:\n%s", e.name, lastLines(out, 20))
		}
		e.noValue(t, "the namespace's objects", out)
		for _, line := range strings.Split(string(e.ca.KeyPEM), "\n") {
			if len(line) >= 32 && !strings.HasPrefix(line, "-----") && strings.Contains(out, line) {
				t.Error("the namespace's objects hold a line of the CA's private key")
			}
		}
		cm, err := n.API.Client.CoreV1().ConfigMaps(e.ns).Get(ctx, kube.EffectorCAConfigMap(effPlacement), metav1.GetOptions{})
		if err != nil || cm.Data["ca.crt"] != string(e.ca.CertPEM) || len(cm.Data) != 1 {
			t.Errorf("the CA ConfigMap: %v %v; want ca.crt alone, the CA's certificate", cm, err)
		}
	})
}

// effOnNode is the Effector the test deployed, and what it holds.
type effOnNode struct {
	n         *nodetest.Node
	ns, dir   string
	name      string // the objects'
	image     string
	ca        *testpki.CA   // the upstream's, given as --ca-file
	up        *nodeUpstream // https on the node's address, under ca
	value     string        // EXAMPLE_API_KEY's
	key, sign string        // the placement key file's bytes, the signing key's
	pod       *corev1.Pod   // the replica, ready
	addr      string        // its POD_IP:port, from the EndpointSlice
	calls     int
}

// deployEffector writes the key, the value and effector.json, runs
// `controlplane effector`, then the documented lines, and returns the
// replica once the Deployment is Available and the Service's
// EndpointSlice names it.
func deployEffector(ctx context.Context, t *testing.T, n *nodetest.Node, image string) *effOnNode {
	t.Helper()
	dir := t.TempDir()
	ca := testpki.NewCA(t, "effector-upstream")
	e := &effOnNode{n: n, ns: n.API.Namespace(t), dir: dir, name: kube.EffectorName(effPlacement), image: image,
		ca: ca, up: startNodeUpstream(t, ca), value: nodeSentinel(t, effSecret)}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	e.sign = hex.EncodeToString(b) + "\n"
	host, port, _ := strings.Cut(e.up.addr, ":")
	conf := fmt.Sprintf(`{"placement":%q,"targets":[{"scheme":"https","host":%q,"port":%s,"secrets":[%q]}],"commands":false}`, effPlacement, host, port, effSecret)
	for name, body := range map[string]string{"signing.key": e.sign, "effector.json": conf, "effector-secrets/" + effSecret: e.value, "upstream-ca.pem": string(ca.CertPEM)} {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o700)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	roots := rootsPEM(t)
	code, key, stderr := runCmd(t, roots, "key", "--signing-key", filepath.Join(dir, "signing.key"), "--placement", effPlacement)
	if code != 0 {
		t.Fatalf("controlplane key: exit %d\n%s", code, stderr)
	}
	e.key = key
	if err := os.WriteFile(filepath.Join(dir, "effector.key"), []byte(key), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runCmd(t, roots, "effector", "--config", filepath.Join(dir, "effector.json"), "--out", filepath.Join(dir, "out"),
		"--namespace", e.ns, "--image", image, "--drain", fmt.Sprint(effDrain), "--ca-file", filepath.Join(dir, "upstream-ca.pem"))
	if code != 0 {
		t.Fatalf("controlplane effector: exit %d\n%s", code, stderr)
	}
	for _, s := range []string{"your Secret jr2-instance-effector-key, key effector-key", "your Secret jr2-instance-effector-secrets, key " + effSecret} {
		if !strings.Contains(stderr, s) {
			t.Errorf("controlplane effector's stderr does not name %q:\n%s", s, stderr)
		}
	}
	doc, err := os.ReadFile(filepath.Join("..", "docs", "kubernetes.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range effLines {
		if !strings.Contains(string(doc), "\n"+line+"\n") {
			t.Errorf("docs/kubernetes.md lacks the line the test runs: %s", line)
		}
		if out, err := n.API.RunIn(t, dir, e.ns, strings.ReplaceAll(line, "DIR/", "out/")); err != nil {
			t.Fatalf("%s: %v\n%s\n%s", line, err, out, e.detail(ctx))
		}
	}

	d, err := n.API.Client.AppsV1().Deployments(e.ns).Get(ctx, e.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	available := false
	for _, c := range d.Status.Conditions {
		available = available || c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue
	}
	if !available || d.Status.ReadyReplicas != 1 {
		t.Fatalf("the Deployment after its rollout: conditions %+v, %d ready; want Available and one ready replica", d.Status.Conditions, d.Status.ReadyReplicas)
	}
	pods, err := n.API.Client.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "jr2.dev/effector=" + e.name})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("the Deployment's Pods: %v %v; want one", pods, err)
	}
	e.pod = &pods.Items[0]
	if e.pod.Status.PodIP == "" {
		t.Fatalf("the Effector's Pod %s has no IP", e.pod.Name)
	}
	want := fmt.Sprintf("%s:%d", e.pod.Status.PodIP, kube.EffectorPort)
	waitFor(ctx, t, "the Service's EndpointSlice naming the replica at "+want, func() bool {
		addrs, _ := e.endpoints(ctx)
		e.addr = ""
		if len(addrs) == 1 && addrs[0].pod == e.pod.Name && !addrs[0].terminating {
			e.addr = addrs[0].addr
		}
		return e.addr != ""
	}, func() string { addrs, err := e.endpoints(ctx); return fmt.Sprintf("%+v %v", addrs, err) })
	if e.addr != want {
		t.Fatalf("the EndpointSlice names %s; want the replica's POD_IP:port %s", e.addr, want)
	}
	logs := e.logs(ctx, t, e.pod.Name)
	if ready := fmt.Sprintf("jr2.effector ready placement=%s replica=%s secrets=%s targets=1", effPlacement, e.pod.Name, effSecret); !strings.Contains(logs, ready) {
		t.Errorf("the Effector's log lacks %q:\n%s", ready, lastLines(logs, 20))
	}
	e.noValue(t, "the Effector's log", logs)
	return e
}

// endpoint is one address of the Effector's Service, as its
// EndpointSlices give it: POD_IP:port of the port named wire.
type endpoint struct {
	addr, pod          string
	ready, terminating bool
}

func (e *effOnNode) endpoints(ctx context.Context) ([]endpoint, error) {
	slices, err := e.n.API.Client.DiscoveryV1().EndpointSlices(e.ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + e.name})
	if err != nil {
		return nil, err
	}
	var out []endpoint
	for _, s := range slices.Items {
		var port int32
		for _, p := range s.Ports {
			if p.Name != nil && *p.Name == "wire" && p.Port != nil {
				port = *p.Port
			}
		}
		for _, ep := range s.Endpoints {
			for _, a := range ep.Addresses {
				x := endpoint{addr: fmt.Sprintf("%s:%d", a, port)}
				if ep.TargetRef != nil {
					x.pod = ep.TargetRef.Name
				}
				x.ready = ep.Conditions.Ready != nil && *ep.Conditions.Ready
				x.terminating = ep.Conditions.Terminating != nil && *ep.Conditions.Terminating
				out = append(out, x)
			}
		}
	}
	return out, nil
}

// callOutput is what `effector call` printed.
type callOutput struct {
	stdout string
	code   int32
}

// startCall creates a Pod of the effector image running `effector call`
// toward the replica at e.addr with the start toward path on the
// upstream; the placement key is projected from the user's key Secret,
// the start from a ConfigMap of its own.
func (e *effOnNode) startCall(ctx context.Context, t *testing.T, id, path string) string {
	t.Helper()
	e.calls++
	name := fmt.Sprintf("call-%d", e.calls)
	start := fmt.Sprintf(`{"kind":"http","http":{"method":"GET","url":[{"text":"https://%s%s"}],"headers":{"x-api-key":[{"secret":%q}]}}}`, e.up.addr, path, effSecret)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns}, Data: map[string]string{"start.json": start}}
	if _, err := e.n.API.Client.CoreV1().ConfigMaps(e.ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	uid, mode := kube.EffectorUID, int32(0o400)
	yes, no := true, false
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: corev1.PodSpec{
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: &no,
			EnableServiceLinks:           &no,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsUser: &uid, RunAsGroup: &uid, RunAsNonRoot: &yes, FSGroup: &uid,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:    "call",
				Image:   e.image,
				Command: []string{kube.EffectorBinary, "call", "--key", effCallDir + "/key/effector-key", "--start", effCallDir + "/start/start.json", "--address", e.addr, "--id", id},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "key", MountPath: effCallDir + "/key", ReadOnly: true},
					{Name: "start", MountPath: effCallDir + "/start", ReadOnly: true},
				},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes,
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
			Volumes: []corev1.Volume{
				{Name: "key", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: e.name + "-key", DefaultMode: &mode,
					Items: []corev1.KeyToPath{{Key: "effector-key", Path: "effector-key"}}}}},
				{Name: "start", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}},
			},
		},
	}
	if _, err := e.n.API.Client.CoreV1().Pods(e.ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the call Pod: %v", err)
	}
	return name
}

// waitCall waits until the call Pod has ended and returns what it
// printed and its exit code.
func (e *effOnNode) waitCall(ctx context.Context, t *testing.T, name string) callOutput {
	t.Helper()
	var pod *corev1.Pod
	waitFor(ctx, t, "the call Pod "+name+" ending", func() bool {
		var err error
		pod, err = e.n.API.Client.CoreV1().Pods(e.ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && (pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed)
	}, func() string { return e.detail(ctx) })
	out := callOutput{stdout: e.logs(ctx, t, name)}
	if cs := pod.Status.ContainerStatuses; len(cs) == 1 && cs[0].State.Terminated != nil {
		out.code = cs[0].State.Terminated.ExitCode
	} else {
		t.Fatalf("the call Pod %s ended with statuses %+v", name, cs)
	}
	return out
}

// call runs one effect toward path from a call Pod and waits for it.
func (e *effOnNode) call(ctx context.Context, t *testing.T, id, path string) callOutput {
	t.Helper()
	return e.waitCall(ctx, t, e.startCall(ctx, t, id, path))
}

// callAnswer is the answer `effector call` prints: the effect's state,
// the replica that answered and the outcome.
type callAnswer struct {
	State   string `json:"state"`
	Replica struct {
		Name    string `json:"name"`
		Address string `json:"address"`
	} `json:"replica"`
	Outcome struct {
		Kind   string `json:"kind"`
		Status int    `json:"status"`
		Body   string `json:"body"`
		Reason string `json:"reason"`
	} `json:"outcome"`
}

// answer reads a call's output as its answer, failing the test when any
// form of a value is in it.
func (e *effOnNode) answer(t *testing.T, out callOutput) callAnswer {
	t.Helper()
	e.noValue(t, "the call's answer", out.stdout)
	var st callAnswer
	if err := json.Unmarshal([]byte(strings.TrimSpace(out.stdout)), &st); err != nil {
		t.Fatalf("effector call exited %d and printed %q: %v", out.code, out.stdout, err)
	}
	return st
}

// settled holds a call's output to a settled response 200 from replica,
// the upstream's echo scrubbed, and no form of a value in it.
func (e *effOnNode) settled(t *testing.T, out callOutput, replica string) {
	t.Helper()
	if out.code != 0 {
		t.Fatalf("effector call exited %d:\n%s", out.code, out.stdout)
	}
	st := e.answer(t, out)
	if st.State != "settled" || st.Outcome.Kind != "response" || st.Outcome.Status != 200 || st.Replica.Name != replica || st.Replica.Address != e.addr {
		t.Errorf("effector call: %+v; want settled, a response 200, from %s at %s", st, replica, e.addr)
	}
	if want := "invalid key [secret:" + effSecret + "] "; !strings.HasPrefix(st.Outcome.Body, want) {
		t.Errorf("the answer's body %q; want the echo scrubbed, %q…", st.Outcome.Body, want)
	}
}

// drain: an effect in flight when the replica's Pod is deleted completes,
// the container exits 0 and the Pod is gone before its grace period ends.
func (e *effOnNode) drain(ctx context.Context, t *testing.T, n *nodetest.Node) {
	pod := e.pod
	w, err := n.API.Client.CoreV1().Pods(e.ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + pod.Name, ResourceVersion: pod.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	// The container's log to its end, as kubectl logs -f reads it.
	stream, err := n.API.Client.CoreV1().Pods(e.ns).GetLogs(pod.Name, &corev1.PodLogOptions{Container: "effector", Follow: true}).Stream(ctx)
	if err != nil {
		t.Fatalf("kubectl logs -f: %v", err)
	}
	var logMu sync.Mutex
	var log strings.Builder
	logEnd := make(chan struct{})
	go func() {
		defer close(logEnd)
		defer stream.Close()
		sc := bufio.NewScanner(stream)
		for sc.Scan() {
			logMu.Lock()
			log.WriteString(sc.Text() + "\n")
			logMu.Unlock()
		}
	}()

	call := e.startCall(ctx, t, "drain", "/v1/hold")
	select {
	case <-e.up.Held:
	case <-ctx.Done():
		t.Fatalf("the upstream never got the effect to hold\n%s", e.detail(ctx))
	}
	deleted := time.Now()
	if out, err := n.API.RunIn(t, e.dir, e.ns, "kubectl delete pod "+pod.Name+" --wait=false"); err != nil {
		t.Fatalf("kubectl delete pod: %v\n%s", err, out)
	}

	// Draining: /healthz says stopping, a signed start is refused 503
	// stopping, the EndpointSlice keeps the replica as terminating.
	waitFor(ctx, t, "the replica's /healthz answering 503 stopping", func() bool {
		code, body := healthz(e.addr)
		return code == http.StatusServiceUnavailable && strings.TrimSpace(body) == "stopping"
	})
	c := &client.Client{Key: e.placementKey(t)}
	a, err := c.Do(ctx, e.addr, http.MethodPost, "after-the-delete", []byte(`{"kind":"http","http":{"method":"GET","url":[{"text":"https://`+e.up.addr+`/v1/echo"}]}}`))
	if err != nil || a.Status != http.StatusServiceUnavailable || a.Error == nil || a.Error.Error != "stopping" {
		t.Errorf("a signed start while the replica drains: %+v %v; want 503 stopping", a, err)
	}
	waitFor(ctx, t, "the EndpointSlice keeping the stopping replica as terminating", func() bool {
		addrs, _ := e.endpoints(ctx)
		for _, x := range addrs {
			if x.pod == pod.Name && x.addr == e.addr && x.terminating {
				return true
			}
		}
		return false
	}, func() string { addrs, err := e.endpoints(ctx); return fmt.Sprintf("%+v %v", addrs, err) })
	if p, err := n.API.Client.CoreV1().Pods(e.ns).Get(ctx, call, metav1.GetOptions{}); err != nil || p.Status.Phase != corev1.PodRunning {
		t.Fatalf("the call in flight at the delete: %v %v; want it still running, its effect held", p.Status.Phase, err)
	}

	// The upstream answers: the effect settles, the call reads it, the
	// replica has nothing unread and exits.
	e.up.Release <- struct{}{}
	e.settled(t, e.waitCall(ctx, t, call), pod.Name)
	if got := e.up.Take(); !equal(got, e.value) {
		t.Errorf("the effect in flight reached the upstream with %d keys; want the value", len(got))
	}

	last := goneInGrace(ctx, t, n, e.ns, pod.Name, w, deleted)
	if cs := last.Status.ContainerStatuses; len(cs) != 1 || cs[0].State.Terminated == nil || cs[0].State.Terminated.ExitCode != 0 {
		t.Errorf("the Effector's container at the Pod's end: %+v; want exited 0", cs)
	}
	select {
	case <-logEnd:
	case <-ctx.Done():
		t.Fatal("the Effector's log did not end with its container")
	}
	logMu.Lock()
	logs := log.String()
	logMu.Unlock()
	// In this order: both effects started and the first settled before
	// the SIGTERM, the drain, the held effect settled, then the drain's
	// end with nothing unread.
	host, _, _ := strings.Cut(e.up.addr, ":")
	at := 0
	for _, want := range []string{
		"jr2.effector action=start effect=echo kind=http method=GET host=" + host + "\n",
		"jr2.effector action=settle effect=echo outcome=response status=200\n",
		"jr2.effector action=start effect=drain kind=http method=GET host=" + host + "\n",
		"jr2.effector action=drain\n",
		"jr2.effector action=settle effect=drain outcome=response status=200\n",
		"jr2.effector action=drain-ended waiting=0\n",
	} {
		i := strings.Index(logs[at:], want)
		if i < 0 {
			t.Errorf("the Effector's log lacks %q after what came before it:\n%s", strings.TrimSpace(want), lastLines(logs, 20))
			continue
		}
		at += i + len(want)
	}
	e.noValue(t, "the Effector's log", logs)
}

// goneInGrace reads w, a watch of the Pod name deleted at deleted, until
// the Pod is gone, fails the test unless that was before its grace period
// ended, and returns the Pod as it last was. The grace period ends at the
// first deletionTimestamp the Pod gets (the delete's time and its grace
// period; the kubelet's own final delete, once every container has
// exited, moves it to that moment), written to the second.
func goneInGrace(ctx context.Context, t *testing.T, n *nodetest.Node, ns, name string, w watch.Interface, deleted time.Time) *corev1.Pod {
	t.Helper()
	var last *corev1.Pod
	var graceEnd time.Time
	for ev := range w.ResultChan() {
		if o, ok := ev.Object.(*corev1.Pod); ok {
			last = o
			if graceEnd.IsZero() && o.DeletionTimestamp != nil {
				graceEnd = o.DeletionTimestamp.Add(time.Second)
			}
		}
		if ev.Type == watch.Deleted {
			break
		}
	}
	if last == nil || graceEnd.IsZero() {
		t.Fatalf("the watch of the Pod %s ended before it was deleted (%v)", name, ctx.Err())
	}
	if _, err := n.API.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the Pod %s is still there after its deletion: %v", name, err)
	}
	if gone := time.Now(); gone.After(graceEnd) {
		t.Errorf("the Pod %s was gone at %v, after its grace period ended at %v", name, gone, graceEnd)
	} else {
		t.Logf("the Pod %s was gone %v after the delete, %v before its grace period's end", name, gone.Sub(deleted).Round(time.Millisecond), graceEnd.Sub(gone).Round(time.Second))
	}
	return last
}

// healthz is the replica's one unsigned route.
func healthz(addr string) (int, string) {
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + addr + "/healthz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	return resp.StatusCode, string(b)
}

// placementKey is the key controlplane key printed, as bytes.
func (e *effOnNode) placementKey(t *testing.T) []byte {
	t.Helper()
	k, err := hex.DecodeString(strings.TrimSpace(e.key))
	if err != nil || len(k) != 32 {
		t.Fatalf("controlplane key printed no 64 hex characters: %v", err)
	}
	return k
}

func (e *effOnNode) logs(ctx context.Context, t *testing.T, pod string) string {
	t.Helper()
	b, err := e.n.API.Client.CoreV1().Pods(e.ns).GetLogs(pod, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("kubectl logs %s: %v", pod, err)
	}
	return string(b)
}

// noValue fails the test when s holds any form of the effect secret's
// value, of the placement key or of the signing key.
func (e *effOnNode) noValue(t *testing.T, where, s string) {
	t.Helper()
	for name, v := range map[string]string{effSecret: e.value, "the placement key": strings.TrimSpace(e.key), "the signing key": strings.TrimSpace(e.sign)} {
		for _, f := range scrub.Forms([]byte(v)) {
			if strings.Contains(s, string(f)) {
				t.Errorf("%s holds a form of %s", where, name)
				break
			}
		}
	}
}

// detail is the namespace's Pods and events and the kubelet's last
// lines, for a failure message.
func (e *effOnNode) detail(ctx context.Context) string {
	var b strings.Builder
	if pods, err := e.n.API.Client.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, p := range pods.Items {
			fmt.Fprintf(&b, "pod %s: %s %s\n", p.Name, p.Status.Phase, p.Status.Message)
			for _, s := range p.Status.ContainerStatuses {
				fmt.Fprintf(&b, "  %s: ready %v, %+v\n", s.Name, s.Ready, s.State)
			}
		}
	}
	if evs, err := e.n.API.Client.CoreV1().Events(e.ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, ev := range evs.Items {
			fmt.Fprintf(&b, "event %s/%s %s: %s\n", ev.InvolvedObject.Kind, ev.InvolvedObject.Name, ev.Reason, ev.Message)
		}
	}
	return b.String() + "the kubelet's log:\n" + lastLines(e.n.Log("kubelet"), 20)
}

// untrusted renders the same effector.json without --ca-file, applies it
// over the first render by the documented lines and, once the rollout's
// replica is in the EndpointSlice, sends the same effect toward the same
// https upstream: it is unreachable, nothing sent, the upstream's
// certificate signed by an authority the image's system roots do not hold.
func (e *effOnNode) untrusted(ctx context.Context, t *testing.T) {
	code, _, stderr := runCmd(t, rootsPEM(t), "effector", "--config", filepath.Join(e.dir, "effector.json"), "--out", filepath.Join(e.dir, "plain"),
		"--namespace", e.ns, "--image", e.image, "--drain", fmt.Sprint(effDrain))
	if code != 0 {
		t.Fatalf("controlplane effector without --ca-file: exit %d\n%s", code, stderr)
	}
	for _, line := range effLines[2:] {
		if out, err := e.n.API.RunIn(t, e.dir, e.ns, strings.ReplaceAll(line, "DIR/", "plain/")); err != nil {
			t.Fatalf("%s: %v\n%s\n%s", line, err, out, e.detail(ctx))
		}
	}
	var replica string
	waitFor(ctx, t, "a ready replica without JR2_CA_FILE in the EndpointSlice", func() bool {
		pods, err := e.n.API.Client.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "jr2.dev/effector=" + e.name})
		if err != nil {
			return false
		}
		replica = ""
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && len(p.Spec.Containers) == 1 && !hasEnv(p.Spec.Containers[0], "JR2_CA_FILE") {
				replica = p.Name
			}
		}
		addrs, _ := e.endpoints(ctx)
		for _, x := range addrs {
			if replica != "" && x.pod == replica && x.ready && !x.terminating {
				e.addr = x.addr
				return true
			}
		}
		return false
	}, func() string {
		addrs, err := e.endpoints(ctx)
		return fmt.Sprintf("%+v %v\n%s", addrs, err, e.detail(ctx))
	})
	out := e.call(ctx, t, "untrusted", "/v1/echo")
	st := e.answer(t, out)
	if out.code != 3 || st.State != "settled" || st.Outcome.Kind != "unreachable" || !strings.HasPrefix(st.Outcome.Reason, "nothing was sent: ") ||
		!strings.Contains(st.Outcome.Reason, "x509: certificate signed by unknown authority") {
		t.Errorf("effector call without --ca-file: exit %d, %+v; want 3, settled, unreachable, nothing sent, the certificate signed by an unknown authority", out.code, st)
	}
	if got := e.up.Take(); len(got) != 0 {
		t.Errorf("the upstream got %d requests from a replica that does not trust its CA; want none", len(got))
	}
}

func hasEnv(c corev1.Container, name string) bool {
	for _, v := range c.Env {
		if v.Name == name {
			return true
		}
	}
	return false
}
