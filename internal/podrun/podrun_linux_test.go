package podrun

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"jr2.dev/boundary/internal/kubelayout"
)

func TestMain(m *testing.M) {
	Child()
	os.Exit(m.Run())
}

func ptr[T any](v T) *T { return &v }

// testPod is a sidecar with a value projected 0400 under the Pod's
// fsGroup, a read-only root, its own uid, and a config volume with its
// values mounted beneath it; and a container with an env from the objects.
func testPod() (*corev1.Pod, kubelayout.Objects) {
	objs := kubelayout.Objects{
		ConfigMaps: map[string]*corev1.ConfigMap{"cfg": {ObjectMeta: metav1.ObjectMeta{Name: "cfg"}, Data: map[string]string{"a.json": "{}", "port": "7"}}},
		Secrets:    map[string]*corev1.Secret{"user": {ObjectMeta: metav1.ObjectMeta{Name: "user"}, Data: map[string][]byte{"k": []byte("value-1")}}},
	}
	always := corev1.ContainerRestartPolicyAlways
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{FSGroup: ptr(int64(65532)), SupplementalGroups: []int64{4000}},
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, DefaultMode: ptr(int32(0o444))}}},
				{Name: "values", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{DefaultMode: ptr(int32(0o400)),
					Sources: []corev1.VolumeProjection{{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "user"},
						Items: []corev1.KeyToPath{{Key: "k", Path: "KEY"}}}}}}}},
			},
			InitContainers: []corev1.Container{{
				Name: "side", RestartPolicy: &always,
				Command: []string{"/bin/sh"}, Args: []string{"-c", "$(SCRIPT)"},
				Env: []corev1.EnvVar{
					{Name: "SCRIPT", Value: `id -u; id -G; cat /etc/side/values/KEY; echo; ls /etc/side; echo $$POD; touch /x 2>/dev/null || echo ro-root; echo '$(NOPE)' >/dev/stdout`},
					{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
				},
				VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/side"}, {Name: "values", MountPath: "/etc/side/values"}},
				SecurityContext: &corev1.SecurityContext{RunAsUser: ptr(int64(65532)), RunAsGroup: ptr(int64(65532)),
					ReadOnlyRootFilesystem: ptr(true), AllowPrivilegeEscalation: ptr(false)},
				Ports:        []corev1.ContainerPort{{Name: "health", ContainerPort: 15021}},
				StartupProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("health")}}},
			}},
			Containers: []corev1.Container{{
				Name: "main", Command: []string{"/bin/sh", "-c", "id -u; echo $PORT; cat /etc/side/values/KEY 2>&1 || true"},
				Env:             []corev1.EnvVar{{Name: "PORT", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Key: "port"}}}},
				SecurityContext: &corev1.SecurityContext{RunAsUser: ptr(int64(1000))},
			}},
		},
	}
	return pod, objs
}

// TestSidecarSeesItsPod: the sidecar runs as its uid with the fsGroup and
// supplementary groups, reads its value through the kubelet's links (0400
// made 0440 by fsGroup), sees the values mounted inside its read-only
// config volume, cannot write its root, and gets its args expanded from
// its env ($$ in a value is a $, so the shell expands $POD; an unknown
// $(NAME) stays as written), and opens /dev/stdout as its own user.
func TestSidecarSeesItsPod(t *testing.T) {
	pod, objs := testPod()
	p := New(t)
	p.Pod, p.Objects = pod, objs
	var out, errb bytes.Buffer
	if err := p.Run(t, "side", Options{Stdout: &out, Stderr: &errb}); err != nil {
		t.Fatalf("side: %v\n%s%s", err, out.String(), errb.String())
	}
	want := "65532\n65532 4000\nvalue-1\na.json\nport\nvalues\np\nro-root\n$(NOPE)\n"
	if got := out.String(); got != want {
		t.Errorf("side printed:\n%s\nwant:\n%s\nstderr: %s", got, want, errb.String())
	}
}

// TestContainerMountsNothingElse: a container sees only its own mounts —
// not a volume another container of the Pod mounts — and runs as its uid,
// with an env read from a ConfigMap.
func TestContainerMountsNothingElse(t *testing.T) {
	pod, objs := testPod()
	p := New(t)
	p.Pod, p.Objects = pod, objs
	var out bytes.Buffer
	if err := p.Run(t, "main", Options{Stdout: &out, Stderr: &out}); err != nil {
		t.Fatalf("main: %v\n%s", err, out.String())
	}
	if got, want := out.String(), "1000\n7\ncat: /etc/side/values/KEY: No such file or directory\n"; got != want {
		t.Errorf("main printed:\n%s\nwant:\n%s", got, want)
	}
}

// TestPodNetwork: the Pod's containers share a loopback of their own: a
// listener opened in the Pod's namespace is what a container reaches at
// 127.0.0.1 (curl, run as the container), what DialContext reaches, and
// not what this machine's own loopback holds; a probe's URL names the
// container's port by its name.
func TestPodNetwork(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("this test runs curl in the Pod: apt-get install curl")
	}
	pod, objs := testPod()
	p := New(t)
	p.Pod, p.Objects = pod, objs
	l, err := p.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "pod:"+r.URL.Path) })}
	go srv.Serve(l)
	defer srv.Close()
	addr := l.Addr().String()

	var out, errb bytes.Buffer
	if err := p.Run(t, "main", Options{Argv: []string{"curl", "-sS", "http://" + addr + "/from-main"}, Stdout: &out, Stderr: &errb}); err != nil {
		t.Fatalf("curl in the Pod: %v: %s", err, errb.String())
	}
	if out.String() != "pod:/from-main" {
		t.Errorf("curl in the Pod got %q", out.String())
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: p.DialContext}}
	resp, err := hc.Get("http://" + addr + "/dial")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "pod:/dial" {
		t.Errorf("DialContext reached %q", b)
	}
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Errorf("this machine's loopback answered at %s: the Pod's listener leaked out of its namespace (or another process holds the port)", addr)
	}
	side, _ := Container(pod, "side")
	if u, err := ProbeURL(side, side.StartupProbe); err != nil || u != "http://127.0.0.1:15021/healthz" {
		t.Errorf("probe URL %q, %v", u, err)
	}
}

// TestStartRefused: what the kubelet would not start is an error before
// any process runs.
func TestStartRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*corev1.Pod, *kubelayout.Objects)
		want string
	}{
		{"missing Secret", func(_ *corev1.Pod, o *kubelayout.Objects) { delete(o.Secrets, "user") }, `Secret "user" not found`},
		{"no command", func(p *corev1.Pod, _ *kubelayout.Objects) { p.Spec.InitContainers[0].Command = nil }, "its image's entrypoint is not known"},
		{"downward env", func(p *corev1.Pod, _ *kubelayout.Objects) {
			p.Spec.InitContainers[0].Env = append(p.Spec.InitContainers[0].Env, corev1.EnvVar{Name: "IP",
				ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}})
		}, "env IP: only secretKeyRef"},
		{"runAsNonRoot as root", func(p *corev1.Pod, _ *kubelayout.Objects) {
			p.Spec.SecurityContext.RunAsNonRoot = ptr(true)
			p.Spec.InitContainers[0].SecurityContext.RunAsUser = nil
		}, `has runAsNonRoot and would run as root`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod, objs := testPod()
			tc.edit(pod, &objs)
			p := New(t)
			p.Pod, p.Objects = pod, objs
			_, _, err := p.command("side", Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v, want an error with %q", err, tc.want)
			}
		})
	}
}

// TestExpand holds the kubelet's expansion rules.
func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "1", "B": "$(A)"}
	for in, want := range map[string]string{
		"$(A)":        "1",
		"x$(A)y$(A)":  "x1y1",
		"$$(A)":       "$(A)",
		"$(C)":        "$(C)",
		"$(B)":        "$(A)", // one pass: a value is not expanded again
		"$A $":        "$A $",
		"$(A":         "$(A",
		"100$$ $$$$$": "100$ $$$",
	} {
		if got := Expand(in, vars); got != want {
			t.Errorf("Expand(%q) = %q, want %q", in, got, want)
		}
	}
}
