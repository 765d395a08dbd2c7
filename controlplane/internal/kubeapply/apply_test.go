package kubeapply

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"jr2.dev/boundary/controlplane/internal/cli"
	"jr2.dev/boundary/controlplane/internal/kube"
	"jr2.dev/boundary/controlplane/internal/manifesttest"
	"jr2.dev/boundary/internal/testkit/kubetest"
	"jr2.dev/boundary/internal/testkit/testpki"
)

func TestMain(m *testing.M) { os.Exit(kubetest.Main(m)) }

// small is the spec's example manifest (pod ws-7f3a), which the docs'
// kubectl lines name.
var small = filepath.Join("..", "..", "testdata", "manifests", "small.json")

// render runs `controlplane render` as a user types it, into out, with
// the objects in namespace ns. The CA (`controlplane ca init`) and the
// system roots (one made in code) are made once beside out, so a
// re-render into out uses the same.
func render(t *testing.T, held, out, ns string, extra ...string) {
	t.Helper()
	ca, roots := filepath.Join(filepath.Dir(out), "ca"), filepath.Join(filepath.Dir(out), "roots.pem")
	if _, err := os.Stat(ca); err != nil {
		if code := cli.Main([]string{"ca", "init", "--dir", ca}, new(bytes.Buffer), new(bytes.Buffer)); code != 0 {
			t.Fatal("controlplane ca init failed")
		}
		testpki.NewCA(t, "root").WriteFile(t, filepath.Dir(out), "roots.pem")
	}
	t.Setenv("SSL_CERT_FILE", roots)
	var stdout, stderr bytes.Buffer
	args := append([]string{"render", "--manifest", held, "--ca", ca, "--out", out, "--namespace", ns}, extra...)
	if code := cli.Main(args, &stdout, &stderr); code != 0 {
		t.Fatalf("controlplane %s: exit %d\n%s", strings.Join(args, " "), code, stderr.String())
	}
}

// writeHeld writes a held manifest into dir and returns its path.
func writeHeld(t *testing.T, dir string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, "held.json")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// applyAll applies each file of DIR/kubernetes/ server-side (field manager
// jr2) and returns what the server stored, by file name.
func applyAll(t *testing.T, s *kubetest.Server, out string) map[string]*unstructured.Unstructured {
	t.Helper()
	files, err := kubetest.ObjectFiles(filepath.Join(out, kube.Dir))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*unstructured.Unstructured{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		u, err := s.Apply(context.Background(), b)
		if err != nil {
			t.Fatalf("the API server refused %s/%s: %v", kube.Dir, filepath.Base(f), err)
		}
		got[filepath.Base(f)] = u
	}
	return got
}

// ownedByJR2 reports whether an Apply of field manager jr2 owns fields of u.
func ownedByJR2(u *unstructured.Unstructured) bool {
	for _, f := range u.GetManagedFields() {
		if f.Manager == kube.FieldManager && f.Operation == metav1.ManagedFieldsOperationApply {
			return true
		}
	}
	return false
}

// TestRenderedObjectsApply: every object render writes is accepted by a
// server-side apply as it is, owned by field manager jr2; applied again,
// none changes (the same resourceVersion); no Secret or ConfigMap carries
// last-applied-configuration.
func TestRenderedObjectsApply(t *testing.T) {
	s := kubetest.Shared(t)
	ns := s.Namespace(t)
	out := filepath.Join(t.TempDir(), "pod")
	render(t, small, out, ns)
	first := applyAll(t, s, out)
	var kinds []string
	for name, u := range first {
		kinds = append(kinds, u.GetKind())
		if !ownedByJR2(u) {
			t.Errorf("%s: no field owned by an Apply of %s: %+v", name, kube.FieldManager, u.GetManagedFields())
		}
		if _, ok := u.GetAnnotations()[corev1.LastAppliedConfigAnnotation]; ok {
			t.Errorf("%s carries %s", name, corev1.LastAppliedConfigAnnotation)
		}
		if u.GetNamespace() != ns {
			t.Errorf("%s stored in namespace %q; want --namespace's %q", name, u.GetNamespace(), ns)
		}
	}
	sort.Strings(kinds)
	if strings.Join(kinds, ",") != "ConfigMap,ConfigMap,Pod,Secret" {
		t.Errorf("kinds applied: %v", kinds)
	}
	again := applyAll(t, s, out)
	for name, u := range again {
		if u.GetResourceVersion() != first[name].GetResourceVersion() {
			t.Errorf("%s: resourceVersion %s, then %s applied again: want unchanged", name, first[name].GetResourceVersion(), u.GetResourceVersion())
		}
	}
}

// docLine is the line of docs/kubernetes.md's sh blocks that starts with
// prefix: the command as the docs give it.
func docLine(t *testing.T, prefix string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "kubernetes.md"))
	if err != nil {
		t.Fatal(err)
	}
	in := false
	for _, l := range strings.Split(string(b), "\n") {
		switch {
		case l == "```sh":
			in = true
		case l == "```":
			in = false
		case in && strings.HasPrefix(l, prefix):
			return l
		}
	}
	t.Fatalf("docs/kubernetes.md has no sh line starting %q", prefix)
	return ""
}

// TestDocumentedKubectlLine: docs/kubernetes.md's deployment line,
// `kubectl apply --server-side --field-manager=jr2 -f DIR/kubernetes/`,
// run as written (render's output in a directory named DIR) with the real
// kubectl, applies every object; run again, it changes none.
func TestDocumentedKubectlLine(t *testing.T) {
	s := kubetest.Shared(t)
	ns := s.Namespace(t)
	line := docLine(t, "kubectl apply --server-side")
	if line != "kubectl apply --server-side --field-manager=jr2 -f DIR/kubernetes/" {
		t.Fatalf("the docs' line is now %q; this test runs it as written, check it still means the whole deployment", line)
	}
	work := t.TempDir()
	out := filepath.Join(work, "DIR")
	render(t, small, out, ns)
	files, err := kubetest.ObjectFiles(filepath.Join(out, kube.Dir))
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for _, f := range files {
		u := decode(t, f)
		fmt.Fprintf(&want, "%s/%s serverside-applied\n", strings.ToLower(u.GetKind()), u.GetName())
	}
	got, err := s.Run(t, work, line)
	if err != nil || got != want.String() {
		t.Fatalf("%s: %v\n got: %s\nwant: %s", line, err, got, want.String())
	}
	rv := map[string]string{}
	for _, f := range files {
		live, err := s.Get(context.Background(), decode(t, f))
		if err != nil {
			t.Fatalf("%s not stored: %v", filepath.Base(f), err)
		}
		if !ownedByJR2(live) {
			t.Errorf("%s: not owned by an Apply of %s", filepath.Base(f), kube.FieldManager)
		}
		rv[filepath.Base(f)] = live.GetResourceVersion()
	}
	if got, err := s.Run(t, work, line); err != nil || got != want.String() {
		t.Fatalf("%s again: %v\n%s", line, err, got)
	}
	for _, f := range files {
		live, err := s.Get(context.Background(), decode(t, f))
		if err != nil || live.GetResourceVersion() != rv[filepath.Base(f)] {
			t.Errorf("%s: resourceVersion %s after the line ran again (%v); want %s", filepath.Base(f), live.GetResourceVersion(), err, rv[filepath.Base(f)])
		}
	}
}

func decode(t *testing.T, file string) *unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	u, err := kubetest.Decode(b)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return u
}

// TestChangedManifestUpdatesInPlace: a re-render after the manifest binds
// one more host, applied server-side, updates the ConfigMaps and Secrets
// in place (same uid): each whose file changed holds the new file's data
// at a new resourceVersion, each whose file did not keeps its
// resourceVersion. The Pod's spec changed too (a new leaf's items, the
// new host's git helper), which Kubernetes refuses in place, as
// docs/kubernetes.md says; deleted and applied again, it is the new one.
func TestChangedManifestUpdatesInPlace(t *testing.T) {
	s := kubetest.Shared(t)
	ns := s.Namespace(t)
	ctx := context.Background()
	dir := t.TempDir()
	b, err := os.ReadFile(small)
	if err != nil {
		t.Fatal(err)
	}
	held := writeHeld(t, dir, b)
	out := filepath.Join(dir, "pod")
	render(t, held, out, ns)
	before := fileBytes(t, out)
	first := applyAll(t, s, out)

	changed := bytes.Replace(b, []byte(`"api.github.com", "github.com:443"`), []byte(`"api.github.com", "github.com:443", "uploads.github.com"`), 1)
	if bytes.Equal(changed, b) {
		t.Fatal("small.json no longer binds api.github.com and github.com:443; change the edit")
	}
	writeHeld(t, dir, changed)
	render(t, held, out, ns)
	after := fileBytes(t, out)
	if len(after) != len(before) {
		t.Fatalf("the re-render wrote %d objects; the first %d", len(after), len(before))
	}
	const podFile = "pod-ws-7f3a.yaml"
	var changedFiles []string
	for name := range after {
		if before[name] == nil {
			t.Fatalf("%s is new in the re-render", name)
		}
		fileChanged := !bytes.Equal(before[name], after[name])
		if fileChanged {
			changedFiles = append(changedFiles, name)
		}
		if name == podFile {
			continue
		}
		u, err := s.Apply(ctx, after[name])
		if err != nil {
			t.Fatalf("re-applied %s refused: %v", name, err)
		}
		f := first[name]
		if u.GetUID() != f.GetUID() {
			t.Errorf("%s: uid %s, then %s: not updated in place", name, f.GetUID(), u.GetUID())
		}
		if rvChanged := u.GetResourceVersion() != f.GetResourceVersion(); rvChanged != fileChanged {
			t.Errorf("%s: file changed %v, resourceVersion changed %v", name, fileChanged, rvChanged)
		}
		want := decode(t, filepath.Join(out, kube.Dir, name))
		w, _, _ := unstructured.NestedFieldNoCopy(want.Object, "data")
		g, _, _ := unstructured.NestedFieldNoCopy(u.Object, "data")
		if !reflect.DeepEqual(w, g) {
			t.Errorf("%s: data read back is not the re-rendered file's", name)
		}
	}
	// The Custodian's ConfigMap (the new binding), the leaves (a new leaf)
	// and the Pod change; jr2-ca does not.
	sort.Strings(changedFiles)
	if want := "configmap-ws-7f3a-custodian.yaml,pod-ws-7f3a.yaml,secret-ws-7f3a-custodian-tls-0.yaml"; strings.Join(changedFiles, ",") != want {
		t.Errorf("files the re-render changed: %v; want %s", changedFiles, want)
	}
	_, err = s.Apply(ctx, after[podFile])
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "pod updates may not change fields other than") {
		t.Fatalf("the changed Pod re-applied: %v; want the server's refusal of a Pod spec change", err)
	}
	if err := s.Client.CoreV1().Pods(ns).Delete(ctx, "ws-7f3a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	u, err := s.Apply(ctx, after[podFile])
	if err != nil {
		t.Fatalf("the changed Pod, deleted and applied again: %v", err)
	}
	want := decode(t, filepath.Join(out, kube.Dir, podFile))
	if d := u.GetAnnotations()[kube.AnnotationDigest]; d == "" || d != want.GetAnnotations()[kube.AnnotationDigest] || d == first[podFile].GetAnnotations()[kube.AnnotationDigest] {
		t.Errorf("the new Pod's %s is %q; the re-render's %q, the first %q", kube.AnnotationDigest, d, want.GetAnnotations()[kube.AnnotationDigest], first[podFile].GetAnnotations()[kube.AnnotationDigest])
	}
}

// fileBytes are the files of DIR/kubernetes/ by name.
func fileBytes(t *testing.T, out string) map[string][]byte {
	t.Helper()
	files, err := kubetest.ObjectFiles(filepath.Join(out, kube.Dir))
	if err != nil {
		t.Fatal(err)
	}
	m := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		m[filepath.Base(f)] = b
	}
	return m
}

// TestLargeRenderApplies: the render of 200 secrets over 400 targets
// applies, every object accepted as it is.
func TestLargeRenderApplies(t *testing.T) {
	s := kubetest.Shared(t)
	ns := s.Namespace(t)
	dir := t.TempDir()
	held := writeHeld(t, dir, manifesttest.Generate(400))
	out := filepath.Join(dir, "pod")
	render(t, held, out, ns)
	got := applyAll(t, s, out)
	largest, name := 0, ""
	for n := range got {
		if b, _ := os.ReadFile(filepath.Join(out, kube.Dir, n)); len(b) > largest {
			largest, name = len(b), n
		}
	}
	t.Logf("%d objects applied; the largest, %s, is %d bytes as written", len(got), name, largest)
}

// TestRenderLimitIsTheServers: render's limit (kube.MaxObjectBytes, as
// kube.Size counts an object) never lets through what the server
// refuses: a ConfigMap at render's limit is accepted, and one the server
// refuses (values one byte over 1 MiB) is over render's limit too. (The
// server counts values only; kube.Size counts keys as well, a few bytes
// stricter.)
func TestRenderLimitIsTheServers(t *testing.T) {
	s := kubetest.Shared(t)
	ns := s.Namespace(t)
	for _, tc := range []struct {
		name    string
		data    map[string]string
		refused bool
	}{
		{"at-render-limit", map[string]string{"a": strings.Repeat("x", kube.MaxObjectBytes-3), "b": "y"}, false},
		{"over-server-limit", map[string]string{"a": strings.Repeat("x", kube.MaxObjectBytes), "b": "y"}, true},
	} {
		cm := &corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: tc.name, Namespace: ns},
			Data:       tc.data,
		}
		size, err := kube.Size(cm)
		if err != nil {
			t.Fatal(err)
		}
		if !tc.refused && size != kube.MaxObjectBytes || tc.refused && size <= kube.MaxObjectBytes {
			t.Errorf("%s: kube.Size %d (limit %d): render would let through what the server refuses", tc.name, size, kube.MaxObjectBytes)
		}
		doc, err := json.Marshal(cm)
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Apply(context.Background(), doc)
		if tc.refused != (err != nil) || tc.refused && (!apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "Too long: may not be more than 1048576 bytes")) {
			t.Errorf("%s: apply: %v; refused should be %v", tc.name, err, tc.refused)
		}
	}
}

const sentinel = "sk-ant-api03-SENTINEL-5d0c2f81a7e9"

// TestPodReadBack: the Pod as the server stores it (after defaulting and
// admission) holds the Custodian as a native sidecar with its startup and
// readiness probes on /healthz and its security context, mounts no
// service-account token, shares no process namespace; and no object the
// tool wrote, read back, holds a value — while the user's Secrets, which
// the Pod projects, hold them in the same namespace.
func TestPodReadBack(t *testing.T) {
	s := kubetest.Shared(t)
	ns := s.Namespace(t)
	ctx := context.Background()
	dir := t.TempDir()
	held := writeHeld(t, dir, []byte(`{"pod":"ws-s","orchestrator":"o.svc:4000","secrets":[
		{"name":"A_KEY","hosts":["a.example.com"],"valueFrom":{"secretKeyRef":{"name":"user-keys","key":"a"}}},
		{"name":"B_KEY","hosts":["b.example.com","c.example.com:8443"]}]}`))
	// The values, where a user keeps them: a value directory beside the
	// render (the by-hand path), and the Secrets the Pod projects.
	values := filepath.Join(dir, "values")
	if err := os.Mkdir(values, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"A_KEY", "B_KEY", "JR2_SANDBOX_TOKEN"} {
		if err := os.WriteFile(filepath.Join(values, n), []byte(sentinel+n), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	user := map[string]map[string][]byte{
		"user-keys":             {"a": []byte(sentinel + "A_KEY")},
		"jr2-held-secrets-ws-s": {"B_KEY": []byte(sentinel + "B_KEY"), "JR2_SANDBOX_TOKEN": []byte(sentinel + "JR2_SANDBOX_TOKEN")},
	}
	for name, data := range user {
		if _, err := s.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: data}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "pod")
	render(t, held, out, ns, "--values-dir", values)
	applyAll(t, s, out)

	pod, err := s.Client.CoreV1().Pods(ns).Get(ctx, "ws-s", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var side *corev1.Container
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == kube.CustodianContainer {
			side = &pod.Spec.InitContainers[i]
		}
	}
	if side == nil {
		t.Fatalf("no init container %q read back: %+v", kube.CustodianContainer, pod.Spec.InitContainers)
	}
	if side.RestartPolicy == nil || *side.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Errorf("the Custodian's restartPolicy read back %v: not a native sidecar", side.RestartPolicy)
	}
	for what, p := range map[string]*corev1.Probe{"startupProbe": side.StartupProbe, "readinessProbe": side.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" {
			t.Errorf("%s read back: %+v; want an HTTP GET of /healthz", what, p)
		}
	}
	sc := side.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser != kube.CustodianUID ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !reflect.DeepEqual(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) ||
		sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("the Custodian's securityContext read back: %+v", sc)
	}
	if side.Resources.Requests.Cpu().IsZero() || side.Resources.Limits.Memory().IsZero() {
		t.Errorf("the Custodian's resources read back: %+v", side.Resources)
	}
	if a := pod.Spec.AutomountServiceAccountToken; a == nil || *a {
		t.Errorf("automountServiceAccountToken read back %v", a)
	}
	if sp := pod.Spec.ShareProcessNamespace; sp == nil || *sp {
		t.Errorf("shareProcessNamespace read back %v", sp)
	}
	for _, v := range pod.Spec.Volumes {
		if v.Projected != nil {
			for _, src := range v.Projected.Sources {
				if src.ServiceAccountToken != nil {
					t.Errorf("volume %s projects a service-account token", v.Name)
				}
			}
		}
	}
	for _, c := range append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		for _, m := range c.VolumeMounts {
			if strings.HasPrefix(m.MountPath, "/var/run/secrets/kubernetes.io") {
				t.Errorf("%s mounts %s", c.Name, m.MountPath)
			}
		}
	}

	// Every object in the namespace but the user's Secrets, as the server
	// returns it, and each Secret's data decoded: no value, in no form.
	forms := []string{sentinel, "SENTINEL"}
	for i := range 3 { // base64 at each of the three alignments
		forms = append(forms, base64.StdEncoding.EncodeToString([]byte(strings.Repeat("x", i) + sentinel))[4:24])
	}
	scan := func(what string, b []byte) {
		for _, f := range forms {
			if bytes.Contains(b, []byte(f)) {
				t.Errorf("%s holds the sentinel (as %q)", what, f)
			}
		}
	}
	cms, err := s.Client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := s.Client.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, cm := range cms.Items {
		b, _ := json.Marshal(cm)
		scan("ConfigMap "+cm.Name, b)
		n++
	}
	for _, sec := range secrets.Items {
		if user[sec.Name] != nil {
			b, _ := json.Marshal(sec)
			if !bytes.Contains(b, []byte(base64.StdEncoding.EncodeToString(user[sec.Name][sortedKeys(user[sec.Name])[0]]))) {
				t.Errorf("the user's Secret %s read back without its value: the scan would see nothing", sec.Name)
			}
			continue
		}
		b, _ := json.Marshal(sec)
		scan("Secret "+sec.Name, b)
		for k, v := range sec.Data {
			scan("Secret "+sec.Name+" key "+k, v)
		}
		n++
	}
	b, _ := json.Marshal(pod)
	scan("Pod "+pod.Name, b)
	if n < 3 {
		t.Errorf("scanned %d ConfigMaps and Secrets of the tool's; want its Custodian ConfigMap, jr2-ca and the leaves", n)
	}
}

func sortedKeys(m map[string][]byte) []string {
	var k []string
	for s := range m {
		k = append(k, s)
	}
	sort.Strings(k)
	return k
}

// TestPatchedDeploymentIsThePod: docs/kubernetes.md's two lines for a pod
// template of the user's, run as written — the objects but the Pod
// applied, then the strategic-merge patch on a Deployment named my-agent
// — leave the Deployment's template with the same containers, volumes and
// pod settings as the Pod the server stores (the user's image stays).
func TestPatchedDeploymentIsThePod(t *testing.T) {
	s := kubetest.Shared(t)
	ns := s.Namespace(t)
	ctx := context.Background()
	applyLine := docLine(t, "kubectl apply --server-side --field-manager=jr2 -f DIR/kubernetes/ -l ")
	patchLine := docLine(t, "kubectl patch deployment my-agent ")
	const image = "registry.example.com/my-agent:1"
	work := t.TempDir()
	out := filepath.Join(work, "DIR")
	// The agent's image is the user's own, so the Pod and the template
	// differ in nothing the patch does not set.
	render(t, small, out, ns, "--agent-image", image)

	labels := map[string]string{"app": "my-agent"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "my-agent"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: kube.DefaultAgentContainer, Image: image}}},
			},
		},
	}
	if _, err := s.Client.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{applyLine, patchLine} {
		if got, err := s.RunIn(t, work, ns, line); err != nil {
			t.Fatalf("%s: %v\n%s", line, err, got)
		}
	}
	if _, err := s.Client.CoreV1().Pods(ns).Get(ctx, "ws-7f3a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("%s applied the Pod too (%v)", applyLine, err)
	}
	// The Pod, applied now, as the comparison.
	b, err := os.ReadFile(filepath.Join(out, kube.Dir, "pod-ws-7f3a.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	pod, err := s.Client.CoreV1().Pods(ns).Get(ctx, "ws-7f3a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Client.AppsV1().Deployments(ns).Get(ctx, "my-agent", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tmpl := got.Spec.Template.Spec
	if len(tmpl.Containers) != 1 || tmpl.Containers[0].Image != image {
		t.Fatalf("the patched template's containers: %+v; want the user's one, image %s", tmpl.Containers, image)
	}
	for what, eq := range map[string][2]any{
		"initContainers":               {tmpl.InitContainers, pod.Spec.InitContainers},
		"containers":                   {tmpl.Containers, pod.Spec.Containers},
		"volumes":                      {tmpl.Volumes, pod.Spec.Volumes},
		"securityContext":              {tmpl.SecurityContext, pod.Spec.SecurityContext},
		"automountServiceAccountToken": {tmpl.AutomountServiceAccountToken, pod.Spec.AutomountServiceAccountToken},
		"shareProcessNamespace":        {tmpl.ShareProcessNamespace, pod.Spec.ShareProcessNamespace},
		"enableServiceLinks":           {tmpl.EnableServiceLinks, pod.Spec.EnableServiceLinks},
	} {
		if !apiequality.Semantic.DeepEqual(eq[0], eq[1]) {
			a, _ := json.Marshal(eq[0])
			b, _ := json.Marshal(eq[1])
			t.Errorf("%s differ:\n the patched Deployment: %s\n the Pod:                %s", what, a, b)
		}
	}
	if d := got.Spec.Template.Annotations[kube.AnnotationDigest]; d == "" || d != pod.Annotations[kube.AnnotationDigest] {
		t.Errorf("the template's %s %q; the Pod's %q", kube.AnnotationDigest, d, pod.Annotations[kube.AnnotationDigest])
	}
}
