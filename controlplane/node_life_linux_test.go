package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"jr2.dev/boundary/internal/testkit/imagestest"
	"jr2.dev/boundary/internal/testkit/nodetest"
)

// TestPodLife: what a Pod render wrote lives through on a real node, past
// its start (TestPodOnNode). For each sidecar: the user's value Secret
// updated through the API server reaches the Custodian through the
// kubelet's own atomic writer, with no restart, a request in flight kept
// and the old value still scrubbed, and the Custodian's contract lines in
// kubectl logs; kubectl delete pod stops the agent first and then the
// Custodian, which drains the request in flight; the Custodian's startup
// probe holds the agent back. Then a missing value Secret as the kubelet
// reports it, a namespace enforcing the restricted Pod Security level, and
// the pod-template patch on a Deployment the controller-manager runs.
func TestPodLife(t *testing.T) {
	imgs := imagestest.Find(t, "custodian-envoy", "custodian-serve", "agent", "pause")
	n := nodetest.Start(t, nodetest.Options{Images: imagestest.Tars(imgs), Pause: imgs["pause"].Ref})
	if n == nil {
		return // the node's namespaces ran the test
	}
	for _, sidecar := range []string{"envoy", "serve"} {
		t.Run(sidecar, func(t *testing.T) {
			t.Run("rotation through the kubelet, and the logs", func(t *testing.T) { rotationOnNode(t, n, imgs, sidecar) })
			t.Run("stop", func(t *testing.T) { stopOnNode(t, n, imgs, sidecar) })
			t.Run("the startup probe holds the agent", func(t *testing.T) { startupHoldsAgent(t, n, imgs, sidecar) })
		})
	}
	t.Run("a missing value Secret", func(t *testing.T) { missingSecretOnNode(t, n, imgs) })
	for _, sidecar := range []string{"envoy", "serve"} {
		t.Run("restricted/"+sidecar, func(t *testing.T) { restrictedOnNode(t, n, imgs, sidecar) })
		t.Run("deployment/"+sidecar, func(t *testing.T) { deploymentOnNode(t, n, imgs, sidecar) })
	}
}

// rotationOnNode: the user's Secret changes under a running Pod; the
// kubelet swaps the projected files; the Custodian follows.
func rotationOnNode(t *testing.T, n *nodetest.Node, imgs map[string]imagestest.Image, sidecar string) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	p := renderHeldPod(t, n, imgs, sidecar)
	p.createSecrets(ctx, t, n)
	if out, err := n.API.Run(t, p.dir, "kubectl apply --server-side --field-manager=jr2 -f kubernetes/"); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	pod := waitRunning(ctx, t, n, p.ns, nodePod)
	side, agent := pod.Status.InitContainerStatuses[0], pod.Status.ContainerStatuses[0].Name
	old := p.value
	if code, body := p.curl(t, n, nodePod, agent, p.up.addr, "/v1/echo"); code != 200 || !equal(p.up.Take(), old) {
		t.Fatalf("before the rotation: %d %q; want 200 and the value at the upstream", code, body)
	}

	// A request in flight through the Custodian's egress listener, from
	// the pod's own network namespace, held by the upstream across the
	// swap.
	inPod := podNetns(t, n, p, pod)
	held := make(chan proxied, 1)
	go func() { held <- inPod.get(p.up.addr, "/v1/hold") }()
	waitHeld(t, p.up, held)

	s, err := n.API.Client.CoreV1().Secrets(p.ns).Get(ctx, nodeUserKeys, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.value = nodeSentinel(t, nodeHeld+"-rotated")
	s.Data["a"] = []byte(p.value)
	if _, err := n.API.Client.CoreV1().Secrets(p.ns).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Fresh requests from the agent's curl, until one carries the new
	// value: every one before carries the old value, never anything else,
	// and every answer is scrubbed of both.
	for tries := 0; ; tries++ {
		code, body := p.curl(t, n, nodePod, agent, p.up.addr, "/v1/echo")
		got := p.up.Take()
		p.noValue(t, "an answer during the rotation", body, old)
		if code != 200 || len(got) != 1 || got[0] != old && got[0] != p.value {
			t.Fatalf("during the rotation: %d %q, the upstream got %d keys; want 200 and the old value or the new one", code, body, len(got))
		}
		if got[0] == p.value {
			t.Logf("the new value reached the upstream at the %d. request after the Secret's update", tries+1)
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the new value never reached the upstream; the Custodian's log:\n%s", lastLines(sidecarLogs(ctx, t, n, p.ns, nodePod, side.Name), 20))
		}
		time.Sleep(time.Second)
	}
	t.Run("the request in flight", func(t *testing.T) {
		p.up.Release <- struct{}{}
		r := <-held
		if r.err != nil || r.code != 200 || !strings.HasPrefix(r.body, "invalid key ") {
			t.Fatalf("the request in flight during the swap: %d %q %v; want 200 and the echo", r.code, r.body, r.err)
		}
		if got := p.up.Take(); !equal(got, old) {
			t.Errorf("the request in flight reached the upstream with the new value or none (%d keys); it began with the old set", len(got))
		}
		p.noValue(t, "the answer of the request in flight", r.body, old)
	})
	t.Run("the old value still scrubbed", func(t *testing.T) {
		p.up.Say(old)
		code, body := p.curl(t, n, nodePod, agent, p.up.addr, "/v1/say")
		if code != 200 || !strings.HasPrefix(body, "said [secret:"+nodeHeld+"]") {
			t.Errorf("an upstream echoing the rotated-away value: %d %q; want 200 and the value replaced by [secret:%s]", code, body, nodeHeld)
		}
		p.noValue(t, "an echo of the old value", body, old)
		if got := p.up.Take(); !equal(got, p.value) {
			t.Errorf("the upstream got %d keys, the new value: %v; want the new value", len(got), len(got) == 1 && got[0] == p.value)
		}
	})
	t.Run("no restart", func(t *testing.T) {
		now, err := n.API.Client.CoreV1().Pods(p.ns).Get(ctx, nodePod, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		st := now.Status.InitContainerStatuses[0]
		if st.RestartCount != 0 || st.ContainerID != side.ContainerID || st.State.Running == nil {
			t.Errorf("the Custodian after the rotation: restarts %d, container %s (was %s), %+v; want the same container, never restarted", st.RestartCount, st.ContainerID, side.ContainerID, st.State)
		}
	})
	t.Run("the logs", func(t *testing.T) {
		// Envoy flushes its log every second: poll for the reload line.
		reload := "jr2.custodian action=reload result=ok secrets=3"
		var logs string
		for !strings.Contains(logs, reload) && ctx.Err() == nil {
			time.Sleep(500 * time.Millisecond)
			logs = sidecarLogs(ctx, t, n, p.ns, nodePod, side.Name)
		}
		lines := custodianLines(logs)
		for _, want := range []string{
			"jr2.custodian ready secrets=" + nodeHeld + "," + nodeOther + ",JR2_SANDBOX_TOKEN hosts=2",
			fmt.Sprintf("jr2.custodian action=intercept target=%s secret=%s method=GET status=200", p.up.addr, nodeHeld),
			reload,
		} {
			if !hasLinePrefix(lines, want) {
				t.Errorf("kubectl logs -c %s lacks a line %q; its jr2.custodian lines:\n%s", side.Name, want, strings.Join(lines, "\n"))
			}
		}
		p.noValue(t, "the Custodian's log", logs, old)
		for _, l := range lines {
			for _, never := range []string{"jr2-held-", "/v1/", "invalid key", "said ", "[secret:"} {
				if strings.Contains(l, never) {
					t.Errorf("a jr2.custodian line holds %q (a stand-in, a path or a body): %q", never, l)
				}
			}
		}
	})
}

// stopOnNode: kubectl delete pod with a request in flight. The agent
// (here a shell that, on SIGTERM, holds its exit until the test lets it)
// is stopped first while the Custodian still serves; then the Custodian
// gets its SIGTERM, refuses new connections and drains the request in
// flight; both exit 0 and the Pod is gone before its grace period ends.
func stopOnNode(t *testing.T, n *nodetest.Node, imgs map[string]imagestest.Image, sidecar string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p := renderHeldPod(t, n, imgs, sidecar)
	p.createSecrets(ctx, t, n)
	const life = "/run/jr2-life"
	applyPod(ctx, t, n, p, func(pod *corev1.Pod) {
		a := &pod.Spec.Containers[0]
		a.Command = []string{"/bin/sh", "-c", `trap 'touch ` + life + `/term; while [ ! -e ` + life + `/stop ]; do sleep 0.1; done; exit 0' TERM; while :; do sleep 1 & wait $!; done`}
		a.VolumeMounts = append(a.VolumeMounts, corev1.VolumeMount{Name: "jr2-life", MountPath: life})
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "jr2-life", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}})
	})
	pod := waitRunning(ctx, t, n, p.ns, nodePod)
	agent := pod.Status.ContainerStatuses[0]
	agentRoot := "/proc/" + containerPIDs(t, n, agent.ContainerID)[0] + "/root" + life
	inPod := podNetns(t, n, p, pod)

	held := make(chan proxied, 1)
	go func() { held <- inPod.get(p.up.addr, "/v1/hold") }()
	waitHeld(t, p.up, held)
	w, err := n.API.Client.CoreV1().Pods(p.ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + nodePod, ResourceVersion: pod.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	deleted := time.Now()
	if out, err := n.API.Run(t, p.dir, fmt.Sprintf("kubectl delete pod -n %s %s --wait=false", p.ns, nodePod)); err != nil {
		t.Fatalf("kubectl delete pod: %v\n%s", err, out)
	}

	// The agent has its SIGTERM; the Custodian serves new requests still,
	// a second later too.
	waitFor(ctx, t, "the agent's SIGTERM", func() bool { _, err := os.Stat(agentRoot + "/term"); return err == nil })
	for i := 0; i < 2; i++ {
		if r := inPod.get(p.up.addr, "/v1/echo"); r.err != nil || r.code != 200 {
			t.Fatalf("while the agent stops, a new request: %d %v; want 200: the Custodian stops only after the agent", r.code, r.err)
		}
		if got := p.up.Take(); !equal(got, p.value) {
			t.Fatalf("while the agent stops, the upstream got %d keys; want the value", len(got))
		}
		time.Sleep(time.Second)
	}
	if err := os.WriteFile(agentRoot+"/stop", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// Then the Custodian: it refuses a new connection (or closes it
	// unanswered) while the request in flight is still held.
	waitFor(ctx, t, "the Custodian refusing new connections", func() bool {
		r := inPod.get(p.up.addr, "/v1/echo")
		if r.err == nil {
			p.up.Take()
		}
		return r.err != nil
	})
	select {
	case r := <-held:
		t.Fatalf("the request in flight ended before its upstream answered: %d %q %v", r.code, r.body, r.err)
	default:
	}
	if st := taskStatus(t, n, agent.ContainerID); st == "RUNNING" {
		t.Errorf("the Custodian stopped accepting while the agent's task still ran")
	}
	p.up.Release <- struct{}{}
	r := <-held
	if r.err != nil || r.code != 200 || !strings.HasPrefix(r.body, "invalid key ") {
		t.Errorf("the request in flight at the stop: %d %q %v; want 200 and the echo, drained", r.code, r.body, r.err)
	}
	if got := p.up.Take(); !equal(got, p.value) {
		t.Errorf("the request in flight reached the upstream with %d keys; want the value", len(got))
	}
	p.noValue(t, "the drained answer", r.body)

	// The Pod goes, both containers having exited 0 (137 would be the
	// kill at the grace period's end), before its grace period is over.
	last := goneInGrace(ctx, t, n, p.ns, nodePod, w, deleted)
	for _, st := range append(last.Status.InitContainerStatuses, last.Status.ContainerStatuses...) {
		if st.State.Terminated == nil || st.State.Terminated.ExitCode != 0 {
			t.Errorf("the container %s at the Pod's end: %+v; want exited 0", st.Name, st.State)
		}
	}
	if ag, sc := last.Status.ContainerStatuses[0].State.Terminated, last.Status.InitContainerStatuses[0].State.Terminated; ag != nil && sc != nil && sc.FinishedAt.Before(&ag.FinishedAt) {
		t.Errorf("the Custodian finished at %v, before the agent at %v", sc.FinishedAt, ag.FinishedAt)
	}
}

// startupHoldsAgent: the sidecar's startup probe points at a gate on the
// node's address that fails until the test opens it, then answers what the
// Custodian's own /healthz answers. While it fails, the Custodian runs and
// is healthy, yet the agent's container is not even created; once it
// passes, the agent's process starts after the first 200 the kubelet got.
func startupHoldsAgent(t *testing.T, n *nodetest.Node, imgs map[string]imagestest.Image, sidecar string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p := renderHeldPod(t, n, imgs, sidecar)
	p.createSecrets(ctx, t, n)
	g := startGate(t)
	var health corev1.HTTPGetAction
	applyPod(ctx, t, n, p, func(pod *corev1.Pod) {
		sp := pod.Spec.InitContainers[0].StartupProbe
		health = *sp.HTTPGet
		sp.HTTPGet.Host, sp.HTTPGet.Port = nodetest.NodeIP, intstr.FromInt(g.port)
	})
	port := 0
	for _, cp := range mustPod(ctx, t, n, p.ns).Spec.InitContainers[0].Ports {
		if cp.Name == health.Port.StrVal {
			port = int(cp.ContainerPort)
		}
	}
	var pod *corev1.Pod
	waitFor(ctx, t, "the Custodian running and healthy, its startup probe failed 3 times", func() bool {
		pod = mustPod(ctx, t, n, p.ns)
		if len(pod.Status.InitContainerStatuses) == 0 || pod.Status.InitContainerStatuses[0].State.Running == nil || pod.Status.PodIP == "" {
			return false
		}
		resp, err := http.Get(fmt.Sprintf("http://%s:%d%s", pod.Status.PodIP, port, health.Path))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200 && g.failed() >= 3
	})
	if side := pod.Status.InitContainerStatuses[0]; side.Started != nil && *side.Started {
		t.Errorf("the Custodian is started before its startup probe passed: %+v", side)
	}
	for _, st := range pod.Status.ContainerStatuses {
		if st.ContainerID != "" || st.State.Running != nil {
			t.Fatalf("the agent's container %s exists before the Custodian's startup probe passed: %+v", st.Name, st)
		}
	}
	g.open(fmt.Sprintf("http://%s:%d%s", pod.Status.PodIP, port, health.Path))
	pod = waitRunning(ctx, t, n, p.ns, nodePod)
	agentTicks, passed := processStart(t, n, pod.Status.ContainerStatuses[0].ContainerID), g.passedAt()
	if agentTicks < passed {
		t.Errorf("the agent's process started at tick %d since boot, the startup probe first passed at tick %d; the agent waits for it", agentTicks, passed)
	}
	t.Logf("the agent's process started %v after the startup probe first passed, which failed %d times before", time.Duration(agentTicks-passed)*time.Second/ticksPerSecond, g.failed())
}

// missingSecretOnNode: one Pod whose user Secret does not exist, one
// whose Secret lacks a key: neither starts, and the kubelet's event names
// the Secret, or the key; once the first's Secret is created it starts.
func missingSecretOnNode(t *testing.T, n *nodetest.Node, imgs map[string]imagestest.Image) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	missing, noKey := renderHeldPod(t, n, imgs, "serve"), renderHeldPod(t, n, imgs, "serve")
	missing.createSecrets(ctx, t, n, conventionSecret)
	noKey.createSecrets(ctx, t, n, conventionSecret)
	if _, err := n.API.Client.CoreV1().Secrets(noKey.ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: nodeUserKeys, Namespace: noKey.ns},
		Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"a": []byte(noKey.value)}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*heldPod{missing, noKey} {
		if out, err := n.API.Run(t, p.dir, "kubectl apply --server-side --field-manager=jr2 -f kubernetes/"); err != nil {
			t.Fatalf("kubectl apply: %v\n%s", err, out)
		}
	}
	for _, c := range []struct {
		p    *heldPod
		want string
	}{
		{missing, fmt.Sprintf(`MountVolume.SetUp failed for volume "custodian-values" : secret %q not found`, nodeUserKeys)},
		{noKey, `MountVolume.SetUp failed for volume "custodian-values" : references non-existent secret key: b`},
	} {
		var seen []string
		waitFor(ctx, t, "the kubelet's event "+c.want, func() bool {
			evs, err := n.API.Client.CoreV1().Events(c.p.ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + nodePod})
			if err != nil {
				return false
			}
			seen = seen[:0]
			for _, e := range evs.Items {
				seen = append(seen, e.Type+" "+e.Reason+": "+e.Message)
				if e.Reason == "FailedMount" && e.Type == corev1.EventTypeWarning && e.Message == c.want {
					return true
				}
			}
			return false
		}, func() string { return strings.Join(seen, "\n") })
		pod := mustPod(ctx, t, n, c.p.ns)
		for _, st := range append(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses...) {
			if st.State.Running != nil || st.ContainerID != "" {
				t.Errorf("with %q, the container %s was created: %+v", c.want, st.Name, st)
			}
		}
		if pod.Status.Phase != corev1.PodPending {
			t.Errorf("with %q, the Pod is %s; want Pending", c.want, pod.Status.Phase)
		}
		c.p.noValue(t, "the events", strings.Join(seen, "\n"))
	}
	missing.createSecrets(ctx, t, n, nodeUserKeys)
	pod := waitRunning(ctx, t, n, missing.ns, nodePod)
	missing.swaps(t, n, nodePod, pod.Spec.Containers[0].Name, "once the Secret is there, the Pod")
}

// restrictedAdds is what the agent container must set for a namespace
// enforcing the restricted Pod Security level, as docs/kubernetes.md
// lists it; restrictedRefusal the API server's refusal without it.
var restrictedAdds = corev1.SecurityContext{
	AllowPrivilegeEscalation: new(false),
	Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
}

const restrictedRefusal = `violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "agent" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container "agent" must set securityContext.capabilities.drop=["ALL"])`

// restrictedOnNode: in a namespace labelled to enforce restricted, the
// documented apply is refused naming exactly the agent's missing settings;
// with them the Pod is admitted, runs and swaps.
func restrictedOnNode(t *testing.T, n *nodetest.Node, imgs map[string]imagestest.Image, sidecar string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p := renderHeldPod(t, n, imgs, sidecar)
	ns, err := n.API.Client.CoreV1().Namespaces().Get(ctx, p.ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	ns.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
	if _, err := n.API.Client.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	p.createSecrets(ctx, t, n)
	out, err := n.API.Run(t, p.dir, "kubectl apply --server-side --field-manager=jr2 -f kubernetes/")
	want := fmt.Sprintf(`pods %q is forbidden: %s`, nodePod, restrictedRefusal)
	if err == nil || !strings.Contains(out, want) {
		t.Fatalf("kubectl apply in a restricted namespace: %v\n%s\nwant the refusal %q", err, out, want)
	}
	applyPod(ctx, t, n, p, func(pod *corev1.Pod) {
		sc := pod.Spec.Containers[0].SecurityContext
		sc.AllowPrivilegeEscalation, sc.Capabilities = restrictedAdds.AllowPrivilegeEscalation, restrictedAdds.Capabilities
	})
	pod := waitRunning(ctx, t, n, p.ns, nodePod)
	p.swaps(t, n, pod.Name, pod.Spec.Containers[0].Name, "the restricted Pod")
}

// deploymentOnNode: a Deployment of the user's (one container named
// agent), the objects but the Pod applied and the template patched as
// docs/kubernetes.md writes it; the controller-manager rolls out a Pod
// with the Custodian, which swaps.
func deploymentOnNode(t *testing.T, n *nodetest.Node, imgs map[string]imagestest.Image, sidecar string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p := renderHeldPod(t, n, imgs, sidecar)
	p.createSecrets(ctx, t, n)
	const name = "my-agent"
	labels := map[string]string{"app": name}
	d, err := json.Marshal(&appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(int32(1)), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "agent", Image: imgs["agent"].Ref, ImagePullPolicy: corev1.PullIfNotPresent}},
			}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p.tmp, "deployment.json"), d, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"kubectl apply --server-side --field-manager=me -f ../deployment.json",
		"kubectl apply --server-side --field-manager=jr2 -f kubernetes/ -l jr2.dev/component!=pod",
		fmt.Sprintf("kubectl patch -n %s deployment %s --type strategic --patch-file kubernetes-patch/pod-template-%s.yaml", p.ns, name, nodePod),
	} {
		if out, err := n.API.Run(t, p.dir, line); err != nil {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
	}
	var pod *corev1.Pod
	var seen string
	waitFor(ctx, t, "a Pod of the patched template ready", func() bool {
		pods, err := n.API.Client.CoreV1().Pods(p.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name + ",jr2.dev/held-pod=" + nodePod})
		if err != nil || len(pods.Items) != 1 {
			return false
		}
		pod = &pods.Items[0]
		seen = fmt.Sprintf("%s %s %+v", pod.Name, pod.Status.Phase, pod.Status.InitContainerStatuses)
		ready := pod.Status.Phase == corev1.PodRunning && len(pod.Status.ContainerStatuses) == 1
		for _, s := range append(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses...) {
			ready = ready && s.Ready
		}
		return ready
	}, func() string { return seen + "\n" + lastLines(n.Log("kube-controller-manager"), 20) })
	if len(pod.Spec.InitContainers) != 1 || pod.Spec.InitContainers[0].Image != p.image || len(pod.OwnerReferences) != 1 || pod.OwnerReferences[0].Kind != "ReplicaSet" {
		t.Errorf("the Deployment's Pod %s: init containers %d, owners %v; want the Custodian's sidecar (%s), owned by a ReplicaSet", pod.Name, len(pod.Spec.InitContainers), pod.OwnerReferences, p.image)
	}
	p.swaps(t, n, pod.Name, "agent", "the Deployment's Pod")
}

// applyPod applies the objects but the Pod with the documented line, then
// creates the Pod read from render's file with change made to it (a test's
// own agent, a probe pointed elsewhere).
func applyPod(ctx context.Context, t *testing.T, n *nodetest.Node, p *heldPod, change func(*corev1.Pod)) {
	t.Helper()
	if out, err := n.API.Run(t, p.dir, "kubectl apply --server-side --field-manager=jr2 -f kubernetes/ -l jr2.dev/component!=pod"); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(p.dir, "kubernetes", "pod-"+nodePod+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var pod corev1.Pod
	if err := yaml.UnmarshalStrict(b, &pod); err != nil {
		t.Fatal(err)
	}
	change(&pod)
	if _, err := n.API.Client.CoreV1().Pods(p.ns).Create(ctx, &pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the Pod: %v", err)
	}
}

func mustPod(ctx context.Context, t *testing.T, n *nodetest.Node, ns string) *corev1.Pod {
	t.Helper()
	pod, err := n.API.Client.CoreV1().Pods(ns).Get(ctx, nodePod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

// waitFor polls ok every 200 ms until it holds, or fails naming what at
// ctx's end, with what the optional detail says then.
func waitFor(ctx context.Context, t *testing.T, what string, ok func() bool, detail ...func() string) {
	t.Helper()
	for !ok() {
		if ctx.Err() != nil {
			d := ""
			for _, f := range detail {
				d += "\n" + f()
			}
			t.Fatalf("never %s%s", what, d)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitHeld waits until the upstream holds a request, or fails with what
// ended it first.
func waitHeld(t *testing.T, up *nodeUpstream, held chan proxied) {
	t.Helper()
	select {
	case <-up.Held:
	case r := <-held:
		t.Fatalf("the request to hold ended first: %d %q %v", r.code, r.body, r.err)
	case <-time.After(time.Minute):
		t.Fatal("the upstream never got the request to hold")
	}
}

// taskStatus is the status ctr gives a container's task (RUNNING,
// STOPPED), "" when it has none.
func taskStatus(t *testing.T, n *nodetest.Node, containerID string) string {
	t.Helper()
	out, err := n.Ctr("tasks", "ls")
	if err != nil {
		t.Fatalf("ctr tasks ls: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == strings.TrimPrefix(containerID, "containerd://") {
			return f[2]
		}
	}
	return ""
}

// swaps: one request of the agent container's curl with the stand-in
// reaches the upstream with the value and comes back scrubbed.
func (p *heldPod) swaps(t *testing.T, n *nodetest.Node, pod, container, what string) {
	t.Helper()
	code, body := p.curl(t, n, pod, container, p.up.addr, "/v1/echo")
	if got := p.up.Take(); code != 200 || !equal(got, p.value) || !strings.HasPrefix(body, "invalid key ") {
		t.Errorf("%s: %d %q, %d keys at the upstream; want 200, the echo and the value at the upstream", what, code, body, len(got))
	}
	p.noValue(t, what+"'s answer", body)
}

func equal(got []string, want string) bool { return len(got) == 1 && got[0] == want }

func sidecarLogs(ctx context.Context, t *testing.T, n *nodetest.Node, ns, pod, container string) string {
	t.Helper()
	b, err := n.API.Client.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("kubectl logs -c %s: %v", container, err)
	}
	return string(b)
}

// custodianLines are a log's jr2.custodian lines, from the prefix on.
func custodianLines(logs string) []string {
	var out []string
	for _, l := range strings.Split(logs, "\n") {
		if i := strings.Index(l, "jr2.custodian "); i >= 0 {
			out = append(out, l[i:])
		}
	}
	return out
}

func hasLinePrefix(lines []string, prefix string) bool {
	for _, l := range lines {
		if l == prefix || strings.HasPrefix(l, prefix+" ") {
			return true
		}
	}
	return false
}

// inPod reaches the Custodian's egress listener from inside a pod's
// network namespace, as the agent does, with the agent's stand-in and the
// jr2 CA its trust files hold.
type inPod struct {
	netns   *os.File
	proxy   string // the agent's HTTPS_PROXY, host:port
	standIn string
	roots   *x509.CertPool
}

// podNetns holds the network namespace of the container's (the
// Custodian's) pod open for the test, so it outlives the container.
func podNetns(t *testing.T, n *nodetest.Node, p *heldPod, pod *corev1.Pod) *inPod {
	t.Helper()
	f, err := os.Open("/proc/" + containerPIDs(t, n, pod.Status.InitContainerStatuses[0].ContainerID)[0] + "/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	ip := &inPod{netns: f, roots: x509.NewCertPool()}
	for _, e := range pod.Spec.Containers[0].Env {
		switch e.Name {
		case "HTTPS_PROXY":
			ip.proxy = strings.TrimPrefix(e.Value, "http://")
		case nodeHeld:
			ip.standIn = e.Value
		}
	}
	ca, err := os.ReadFile(filepath.Join(p.tmp, "ca", "ca.crt"))
	if err != nil || !ip.roots.AppendCertsFromPEM(ca) || ip.proxy == "" || ip.standIn == "" {
		t.Fatalf("the jr2 CA (%v), the agent's HTTPS_PROXY %q or its %s stand-in %q missing", err, ip.proxy, nodeHeld, ip.standIn)
	}
	return ip
}

// proxied is what one request through the Custodian got.
type proxied struct {
	code int
	body string
	err  error
}

func (ip *inPod) dial() (net.Conn, error) {
	type res struct {
		c   net.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		// The thread returns to the node's namespace before it is
		// unlocked; the socket stays in the pod's, where it was made. A
		// thread that cannot return is never unlocked and ends with the
		// goroutine — which would also end every child it started with a
		// parent-death signal (the node's parts), so return it.
		runtime.LockOSThread()
		home, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			ch <- res{nil, err}
			return
		}
		defer home.Close()
		if err := unix.Setns(int(ip.netns.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- res{nil, fmt.Errorf("setns: %w", err)}
			return
		}
		c, err := net.DialTimeout("tcp", ip.proxy, 5*time.Second)
		if unix.Setns(int(home.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		ch <- res{c, err}
	}()
	r := <-ch
	return r.c, r.err
}

// get sends GET path to target through the egress listener: CONNECT, TLS
// under the jr2 CA, the stand-in in x-api-key.
func (ip *inPod) get(target, path string) proxied {
	c, err := ip.dial()
	if err != nil {
		return proxied{err: err}
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Minute))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		return proxied{err: fmt.Errorf("CONNECT: %w", err)}
	}
	if resp.StatusCode != 200 {
		return proxied{code: resp.StatusCode, err: errors.New("CONNECT refused")}
	}
	host, _, _ := net.SplitHostPort(target)
	tc := tls.Client(&bufConn{c, br}, &tls.Config{RootCAs: ip.roots, ServerName: host})
	req, _ := http.NewRequest(http.MethodGet, "https://"+target+path, nil)
	req.Header.Set("X-Api-Key", ip.standIn)
	req.Close = true
	if err := req.Write(tc); err != nil {
		return proxied{err: err}
	}
	resp, err = http.ReadResponse(bufio.NewReader(tc), req)
	if err != nil {
		return proxied{err: err}
	}
	b, err := io.ReadAll(resp.Body)
	return proxied{code: resp.StatusCode, body: string(b), err: err}
}

// bufConn reads what the CONNECT's reader buffered first.
type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// gate is a startup probe's target the test controls: 503 until open,
// then the status of the Custodian's own health URL.
type gate struct {
	port   int
	mu     sync.Mutex
	fails  int
	target string
	passed int64 // clock ticks since boot at the first 200
}

func startGate(t *testing.T) *gate {
	t.Helper()
	l, err := nodetest.Listen()
	if err != nil {
		t.Fatal(err)
	}
	g := &gate{port: l.Addr().(*net.TCPAddr).Port}
	srv := &http.Server{Handler: g, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return g
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	target := g.target
	g.mu.Unlock()
	code := http.StatusServiceUnavailable
	if target != "" {
		if resp, err := http.Get(target); err == nil {
			resp.Body.Close()
			code = resp.StatusCode
		}
	}
	g.mu.Lock()
	if code == 200 && g.passed == 0 {
		var ts unix.Timespec
		unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts)
		g.passed = ts.Nano() / int64(time.Second/ticksPerSecond)
	} else if code != 200 {
		g.fails++
	}
	g.mu.Unlock()
	w.WriteHeader(code)
}

func (g *gate) open(target string) { g.mu.Lock(); g.target = target; g.mu.Unlock() }
func (g *gate) failed() int        { g.mu.Lock(); defer g.mu.Unlock(); return g.fails }
func (g *gate) passedAt() int64    { g.mu.Lock(); defer g.mu.Unlock(); return g.passed }
