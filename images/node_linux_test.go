package images_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"jr2.dev/boundary/internal/testkit/imagestest"
	"jr2.dev/boundary/internal/testkit/nodetest"
)

// TestImagesOnNode: the tarballs `make images` built are what a real node
// runs. containerd 2.4.2 imports every one (ctr images import); the pause
// image is the sandbox of the Pod (containerd pins it, and with no
// registry nothing else could start one); the kubelet starts a container
// of each other image with no pull (imagePullPolicy Never), as the image's
// own user, under RuntimeDefault seccomp, a read-only root, no privilege
// escalation and no capability. Each container ends 0 and says, in the
// log the API server reads from the kubelet, what proves its image whole:
// the agent's uid, curl reaching an upstream on the node's address over
// the Pod's network, Node loading the e2e client's modules, Envoy's
// release, custodian's and the Effector's usage.
func TestImagesOnNode(t *testing.T) {
	imgs := imagestest.Find(t)
	n := nodetest.Start(t, nodetest.Options{Images: imagestest.Tars(imgs), Pause: imgs["pause"].Ref})
	if n == nil {
		return // the node's namespaces ran the test
	}
	ln, err := nodetest.Listen()
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "upstream saw %s %s\n", r.Method, r.URL.Path)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := n.API.Namespace(t)
	no, yes := false, true
	sc := &corev1.SecurityContext{
		RunAsNonRoot:             &yes,
		ReadOnlyRootFilesystem:   &yes,
		AllowPrivilegeEscalation: &no,
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	url := "http://" + ln.Addr().String() + "/from-the-pod"
	cases := []struct {
		container, image string
		command          []string
		want             []string
	}{
		{"curl", "agent", []string{"/bin/sh", "-c", "id -u; id -g; exec curl -sS --max-time 20 " + url},
			[]string{"1000\n1000\n", "upstream saw GET /from-the-pod"}},
		{"node", "agent", []string{"/usr/local/bin/node", "-e",
			"process.chdir('/opt/jr2/e2e/node'); require('/opt/jr2/e2e/node/node_modules/https-proxy-agent'); require('/opt/jr2/e2e/node/node_modules/ws'); console.log('node', process.version, 'modules ok')"},
			[]string{"node v24.11.1 modules ok"}},
		{"envoy", "custodian-envoy", []string{"/usr/local/bin/envoy", "--version"}, []string{"/1.39.3/"}},
		{"custodian", "custodian-envoy", []string{"/opt/jr2/bin/custodian", "--help"}, []string{"custodian envoy -- ENVOY"}},
		{"serve", "custodian-serve", []string{"/opt/jr2/bin/custodian", "--help"}, []string{"custodian serve --config"}},
		{"effector", "effector", []string{"/opt/jr2/bin/effector", "--help"}, []string{"Serve the signed wire"}},
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "images", Namespace: ns},
		Spec: corev1.PodSpec{
			NodeName:                     nodetest.NodeName,
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: &no,
			TerminationGracePeriodSeconds: func() *int64 {
				var s int64 = 1
				return &s
			}(),
		},
	}
	for _, c := range cases {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{
			Name: c.container, Image: imgs[c.image].Ref, ImagePullPolicy: corev1.PullNever,
			Command: c.command, SecurityContext: sc,
		})
	}
	if _, err := n.API.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var got *corev1.Pod
	for {
		got, err = n.API.Client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the Pod did not end: %v; the kubelet's log:\n%s", err, n.Log("kubelet"))
		}
		if p := got.Status.Phase; p == corev1.PodSucceeded || p == corev1.PodFailed {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	for _, c := range cases {
		b, err := n.API.Client.CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{Container: c.container}).DoRaw(ctx)
		log := string(b)
		if err != nil {
			t.Errorf("kubectl logs %s -c %s: %v", pod.Name, c.container, err)
		}
		for _, w := range c.want {
			if !strings.Contains(log, w) {
				t.Errorf("container %s (image %s): its log\n%s\nlacks %q", c.container, imgs[c.image].Ref, log, w)
			}
		}
	}
	want := map[string]string{}
	for _, c := range pod.Spec.Containers {
		want[c.Name] = c.Image
	}
	for _, s := range got.Status.ContainerStatuses {
		if s.State.Terminated == nil || s.State.Terminated.ExitCode != 0 {
			t.Errorf("container %s: %+v; want ended 0", s.Name, s.State)
		}
		if s.Image != want[s.Name] {
			t.Errorf("container %s ran image %q; want %s, as imported", s.Name, s.Image, want[s.Name])
		}
		delete(want, s.Name)
	}
	if len(want) > 0 {
		t.Errorf("no status for containers %v", want)
	}
	if got.Status.Phase != corev1.PodSucceeded {
		t.Errorf("the Pod is %s (%s); want Succeeded", got.Status.Phase, got.Status.Message)
	}
	// The sandbox is the pause image: nothing else could have been pulled.
	out, err := n.Ctr("containers", "list")
	if err != nil || !strings.Contains(string(out), imgs["pause"].Ref) {
		t.Errorf("ctr containers list: %v\n%s\nno sandbox of %s", err, out, imgs["pause"].Ref)
	}
}
