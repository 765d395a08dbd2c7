package kubetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// TestFindToolsMissing: a binary that is not there is ErrMissing, and the
// error names where it looked and `make kube-tools`.
func TestFindToolsMissing(t *testing.T) {
	dir := t.TempDir()
	for _, env := range []string{EnvEtcd, EnvAPIServer, EnvKubectl} {
		t.Setenv(env, filepath.Join(dir, "nothing"))
	}
	_, err := FindTools()
	if !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), "no etcd at "+filepath.Join(dir, "nothing")+" ($"+EnvEtcd+")") || !strings.Contains(err.Error(), "run `make kube-tools` (it builds") {
		t.Fatalf("FindTools: %v", err)
	}
}

// TestFindToolsRefusesAnotherRelease: a binary that reports another
// release is refused, naming it and the fix; it is not ErrMissing, so
// JR2_KUBE_TESTS=skip does not skip it.
func TestFindToolsRefusesAnotherRelease(t *testing.T) {
	dir := t.TempDir()
	fake := func(name, out string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\nprintf '%s\\n' '"+out+"'\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	etcd := fake("etcd", "etcd Version: "+Etcd)
	api := fake("kube-apiserver", "Kubernetes "+Kubernetes)
	for _, tc := range []struct {
		env, bin, want string
	}{
		{EnvEtcd, fake("etcd-old", "etcd Version: 3.5.0"), "etcd-old is not the pinned release"},
		{EnvAPIServer, fake("apiserver-dev", "Kubernetes v0.0.0-master+$Format:%H$"), "apiserver-dev is not the pinned release"},
		{EnvKubectl, fake("kubectl-old", "Client Version: v1.36.0"), "kubectl-old is not the pinned release"},
	} {
		t.Run(tc.env, func(t *testing.T) {
			t.Setenv(EnvEtcd, etcd)
			t.Setenv(EnvAPIServer, api)
			t.Setenv(EnvKubectl, fake("kubectl", "Client Version: "+Kubernetes))
			t.Setenv(tc.env, tc.bin)
			_, err := FindTools()
			if err == nil || errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), Build) {
				t.Fatalf("FindTools: %v", err)
			}
		})
	}
}

const sidecarPod = `apiVersion: v1
kind: Pod
metadata:
  name: agent
  namespace: %s
spec:
  automountServiceAccountToken: false
  shareProcessNamespace: false
  initContainers:
  - name: custodian
    image: example.invalid/custodian:1
    restartPolicy: Always
    startupProbe:
      httpGet: {path: /healthz, port: 15021}
    readinessProbe:
      httpGet: {path: /healthz, port: 15021}
    securityContext:
      runAsUser: 1337
      runAsNonRoot: true
      readOnlyRootFilesystem: true
      allowPrivilegeEscalation: false
      capabilities: {drop: [ALL]}
      seccompProfile: {type: RuntimeDefault}
    volumeMounts:
    - {name: values, mountPath: /var/run/jr2/values, readOnly: true}
  containers:
  - name: agent
    image: example.invalid/agent:1
  volumes:
  - name: values
    projected:
      sources:
      - secret:
          name: user-secrets
          items:
          - {key: token, path: GITHUB_TOKEN, mode: 0400}
`

const configMap = `apiVersion: v1
kind: ConfigMap
metadata:
  name: agent-custodian
  namespace: %s
  labels: {jr2.dev/held-pod: agent}
data:
  custodian.json: '{"listen": "127.0.0.1:8081"}'
`

// TestServerSideApply: a ConfigMap and a Pod with a native sidecar are
// accepted by server-side apply with field manager jr2, read back as
// applied (the sidecar's restartPolicy Always, no service-account token
// mounted), owned by jr2's Apply; applied again, their resourceVersion
// does not move.
func TestServerSideApply(t *testing.T) {
	s := Shared(t)
	ns := s.Namespace(t)
	ctx := context.Background()
	for _, doc := range []string{configMap, sidecarPod} {
		doc := fmt.Sprintf(doc, ns)
		first, err := s.Apply(ctx, []byte(doc))
		if err != nil {
			t.Fatalf("apply refused: %v\n%s", err, doc)
		}
		assertManagedByJR2(t, first)
		again, err := s.Apply(ctx, []byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		if first.GetResourceVersion() == "" || again.GetResourceVersion() != first.GetResourceVersion() {
			t.Errorf("%s %s: resourceVersion %q, then %q applied again: want unchanged", first.GetKind(), first.GetName(), first.GetResourceVersion(), again.GetResourceVersion())
		}
	}
	pod, err := s.Client.CoreV1().Pods(ns).Get(ctx, "agent", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ic := pod.Spec.InitContainers
	if len(ic) != 1 || ic[0].RestartPolicy == nil || *ic[0].RestartPolicy != "Always" || ic[0].StartupProbe == nil || ic[0].ReadinessProbe == nil {
		t.Fatalf("init containers read back: %+v", ic)
	}
	if a := pod.Spec.AutomountServiceAccountToken; a == nil || *a {
		t.Errorf("automountServiceAccountToken read back %v", a)
	}
	for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
		for _, m := range c.VolumeMounts {
			if strings.Contains(m.MountPath, "serviceaccount") {
				t.Errorf("%s mounts %s", c.Name, m.MountPath)
			}
		}
	}
	if pod.Spec.ServiceAccountName != "default" {
		t.Errorf("serviceAccountName %q: the admission plugin defaults it to the namespace's default, which Namespace made", pod.Spec.ServiceAccountName)
	}
}

func assertManagedByJR2(t *testing.T, u *unstructured.Unstructured) {
	t.Helper()
	for _, f := range u.GetManagedFields() {
		if f.Manager == FieldManager && f.Operation == metav1.ManagedFieldsOperationApply {
			return
		}
	}
	t.Errorf("%s %s: no field of it is owned by an Apply of manager %q: %+v", u.GetKind(), u.GetName(), FieldManager, u.GetManagedFields())
}

// TestConfigMapOver1MiBRefused: the server refuses a ConfigMap whose data
// exceed 1 MiB (what render must refuse first), with its own reason.
func TestConfigMapOver1MiBRefused(t *testing.T) {
	s := Shared(t)
	ns := s.Namespace(t)
	doc := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: big, namespace: %s}\ndata:\n  big: %s\n", ns, strings.Repeat("x", 1<<20-1))
	doc += "  b: xy\n" // 1,048,577 bytes of values in all (keys do not count)
	_, err := s.Apply(context.Background(), []byte(doc))
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), `ConfigMap "big" is invalid: []: Too long: may not be more than 1048576 bytes`) {
		t.Fatalf("apply of 1 MiB + 1 byte: %v", err)
	}
	// One byte less is accepted: the limit is the one refused above.
	doc = strings.Replace(doc, "b: xy", "b: x", 1)
	if _, err := s.Apply(context.Background(), []byte(doc)); err != nil {
		t.Fatalf("apply of exactly 1 MiB: %v", err)
	}
}

// TestKubectlApplyDir: `kubectl apply --server-side --field-manager=jr2 -f
// kubernetes/` runs as written with the real kubectl, applies every file
// of the directory, and run again changes nothing.
func TestKubectlApplyDir(t *testing.T) {
	s := Shared(t)
	ns := s.Namespace(t)
	dir := t.TempDir()
	k := filepath.Join(dir, "kubernetes")
	if err := os.Mkdir(k, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, doc := range map[string]string{"configmap-agent-custodian.yaml": configMap, "pod-agent.yaml": sidecarPod} {
		if err := os.WriteFile(filepath.Join(k, name), []byte(fmt.Sprintf(doc, ns)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const line = "kubectl apply --server-side --field-manager=jr2 -f kubernetes/"
	out, err := s.Run(t, dir, line)
	if err != nil {
		t.Fatalf("%s: %v\n%s", line, err, out)
	}
	want := "configmap/agent-custodian serverside-applied\npod/agent serverside-applied\n"
	if out != want {
		t.Fatalf("%s printed:\n%s\nwant:\n%s", line, out, want)
	}
	ctx := context.Background()
	var rv []string
	for _, f := range []string{"configmap-agent-custodian.yaml", "pod-agent.yaml"} {
		b, err := os.ReadFile(filepath.Join(k, f))
		if err != nil {
			t.Fatal(err)
		}
		u, err := Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		live, err := s.Get(ctx, u)
		if err != nil {
			t.Fatalf("%s not stored: %v", f, err)
		}
		assertManagedByJR2(t, live)
		rv = append(rv, live.GetResourceVersion())
	}
	if out, err := s.Run(t, dir, line); err != nil || out != want {
		t.Fatalf("%s again: %v\n%s", line, err, out)
	}
	out, err = s.Run(t, dir, "kubectl get -n "+ns+" configmap/agent-custodian pod/agent -o jsonpath='{range .items[*]}{.metadata.resourceVersion} {end}'")
	if err != nil || strings.Fields(out)[0] != rv[0] || strings.Fields(out)[1] != rv[1] {
		t.Fatalf("resourceVersions after the second apply: %q (%v); want %v", out, err, rv)
	}
}

// TestStartStop: a server of a test's own (Start) serves, and Stop kills
// its processes and removes its directory.
func TestStartStop(t *testing.T) {
	s := Start(t)
	v, err := s.Client.Discovery().ServerVersion()
	if err != nil || v.GitVersion != Kubernetes {
		t.Fatalf("server version %v, %v; want %s", v, err, Kubernetes)
	}
	dir, procs := s.dir, s.procs
	if len(procs) != 2 || !regexp.MustCompile(`^jr2-kubetest-`).MatchString(filepath.Base(dir)) {
		t.Fatalf("procs %d, dir %s", len(procs), dir)
	}
	s.Stop()
	for _, p := range procs {
		if err := p.cmd.Process.Signal(syscall.Signal(0)); err == nil {
			t.Errorf("%s (pid %d) still runs after Stop", p.name, p.cmd.Process.Pid)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s after Stop: %v", dir, err)
	}
}
