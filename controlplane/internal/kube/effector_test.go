package kube_test

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"jr2.dev/boundary/controlplane/internal/kube"
	"jr2.dev/boundary/internal/testkit/testpki"
)

// exampleEffector is examples/effector.json's objects, namespace agents,
// a drain of 40 s.
func exampleEffector(t *testing.T) *kube.Set {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "examples", "effector.json"))
	if err != nil {
		t.Fatal(err)
	}
	set, err := kube.Effector(raw, kube.EffectorOptions{Namespace: "agents", Drain: 40})
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// goldenEffector holds each file but skip to its golden file under
// testdata/golden/dir (rewritten with -update).
func goldenEffector(t *testing.T, dir string, files map[string][]byte, skip string) {
	t.Helper()
	for name, b := range files {
		if name == skip {
			continue
		}
		p := filepath.Join("testdata", "golden", dir, name)
		if *update {
			os.MkdirAll(filepath.Dir(p), 0o755)
			os.WriteFile(p, b, 0o644)
		}
		if w, _ := os.ReadFile(p); !bytes.Equal(w, b) {
			t.Errorf("%s differs from its golden file (run with -update after checking the change)", name)
		}
	}
}

// TestEffectorObjects: examples/effector.json's objects, byte for byte
// (golden, -update), and the contract stated field by field: the downward
// API, the key and secrets as 0400 projected items (never env values or
// argv), readiness on /healthz, a grace above the drain, the security
// context, a headless Service that publishes replicas not ready.
func TestEffectorObjects(t *testing.T) {
	set := exampleEffector(t)
	files, err := kube.Files(set)
	if err != nil {
		t.Fatal(err)
	}
	goldenEffector(t, "effector", files, "")
	dep := set.Objects[1].(*appsv1.Deployment)
	svc := set.Objects[2].(*corev1.Service)
	ps := dep.Spec.Template.Spec
	c := ps.Containers[0]
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
		if strings.Contains(e.Value, "EXAMPLE_API_KEY") {
			t.Errorf("env %s names a secret's place by value", e.Name)
		}
	}
	for name, field := range map[string]string{"POD_NAME": "metadata.name", "POD_IP": "status.podIP", "NODE_NAME": "spec.nodeName"} {
		if e := env[name]; e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != field {
			t.Errorf("%s is not the downward API's %s", name, field)
		}
	}
	if strings.Contains(strings.Join(append(c.Command, c.Args...), " "), "key") {
		t.Error("argv names the key")
	}
	var items []string
	for _, v := range ps.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, src := range v.Projected.Sources {
			for _, it := range src.Secret.Items {
				if *it.Mode != 0o400 {
					t.Errorf("%s is not 0400", it.Path)
				}
				items = append(items, src.Secret.Name+"/"+it.Key)
			}
		}
	}
	if w := []string{"jr2-instance-effector-key/effector-key", "jr2-instance-effector-secrets/EXAMPLE_API_KEY"}; !slices.Equal(items, w) {
		t.Errorf("projected %v; want %v", items, w)
	}
	if *ps.TerminationGracePeriodSeconds <= 40 || env["JR2_EFFECTOR_DRAIN_SECONDS"].Value != "40" {
		t.Errorf("grace %d for a drain of %s", *ps.TerminationGracePeriodSeconds, env["JR2_EFFECTOR_DRAIN_SECONDS"].Value)
	}
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet.Path != "/healthz" {
		t.Error("no readiness on /healthz")
	}
	sc := c.SecurityContext
	if *sc.AllowPrivilegeEscalation || !*sc.ReadOnlyRootFilesystem || !*sc.RunAsNonRoot || len(sc.Capabilities.Drop) != 1 || *ps.AutomountServiceAccountToken {
		t.Errorf("security context %+v", sc)
	}
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || !svc.Spec.PublishNotReadyAddresses || svc.Spec.Ports[0].Port != kube.EffectorPort {
		t.Errorf("service %+v; want headless, publishing replicas not ready, on %d", svc.Spec, kube.EffectorPort)
	}
	// The image, as images.json describes it.
	img := description(t).Image("effector")
	checkContainer(t, img, c, []string{kube.EffectorBinary, kube.EffectorConfineBinary})
	if c.Image != kube.DefaultEffectorImg || c.Image != "jr2-"+img.Name {
		t.Errorf("image %q; the recipe's tag is %q", c.Image, kube.DefaultEffectorImg)
	}
	// Refusals: what the Effector itself refuses, and the kinds a
	// Deployment cannot serve.
	for _, tc := range []struct{ raw, want string }{
		{`{"placement":"instance","commands":true}`, "commands or pushes need the agent's worktree"},
		{`{"placement":"Not_A_Label"}`, "names the objects"},
		{`{"placement":"instance","targets":[{"scheme":"ftp","host":"a","port":1}]}`, `effector.json: targets[0].scheme: "ftp": want https or http`},
		{`{"placement":"instance","extra":1}`, "effector.json:"},
	} {
		if _, err := kube.Effector([]byte(tc.raw), kube.EffectorOptions{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want %q", tc.raw, err, tc.want)
		}
	}
}

// TestEffectorCA: with --ca-file's bundle the Effector gets a fourth
// object, <name>-ca, holding its certificates as ca.crt (encoded again,
// so nothing else of the file), projected read-only where JR2_CA_FILE
// points; the other objects byte for byte (golden, -update; the CA
// ConfigMap's bytes are the CA's, made here, so it is checked by value).
// A bundle with no certificate, or with any block but certificates — a
// private key above all — is refused naming --ca-file and the fix, and no
// error carries a line of the key.
func TestEffectorCA(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "examples", "effector.json"))
	if err != nil {
		t.Fatal(err)
	}
	a, b := testpki.NewCA(t, "corp-root"), testpki.NewCA(t, "corp-root-2")
	// Text between PEM blocks is skipped by PEM, and so it must never
	// reach the ConfigMap: here, a's key unarmoured.
	loose := strings.Join(strings.Split(string(a.KeyPEM), "\n")[1:3], "\n")
	bundle := string(a.CertPEM) + "\n" + loose + "\n" + string(b.CertPEM)
	set, err := kube.Effector(raw, kube.EffectorOptions{Namespace: "agents", Drain: 40, CA: []byte(bundle)})
	if err != nil {
		t.Fatal(err)
	}
	if len(set.Objects) != 4 {
		t.Fatalf("%d objects; want the three and the CA ConfigMap", len(set.Objects))
	}
	cm := set.Objects[3].(*corev1.ConfigMap)
	if cm.Name != "jr2-instance-effector-ca" || cm.Name != kube.EffectorCAConfigMap("instance") || cm.Namespace != "agents" || cm.Labels[kube.LabelComponent] != kube.ComponentEffector {
		t.Errorf("CA ConfigMap %s/%s labels %v", cm.Namespace, cm.Name, cm.Labels)
	}
	if want := map[string]string{"ca.crt": string(a.CertPEM) + string(b.CertPEM)}; !maps.Equal(cm.Data, want) || cm.BinaryData != nil {
		t.Errorf("CA ConfigMap data %q; want ca.crt, the two certificates alone", cm.Data)
	}
	files, err := kube.Files(set)
	if err != nil {
		t.Fatal(err)
	}
	caFile := path.Join(kube.Dir, kube.FileName(cm))
	goldenEffector(t, "effector-ca", files, caFile)
	names := slices.Sorted(maps.Keys(files))
	if w := []string{"kubernetes/configmap-jr2-instance-effector-ca.yaml", "kubernetes/configmap-jr2-instance-effector.yaml", "kubernetes/deployment-jr2-instance-effector.yaml", "kubernetes/service-jr2-instance-effector.yaml"}; !slices.Equal(names, w) {
		t.Errorf("files %v; want %v", names, w)
	}
	for _, line := range strings.Split(string(a.KeyPEM), "\n") {
		if len(line) > 16 && !strings.HasPrefix(line, "-----") && strings.Contains(string(files[caFile]), line) {
			t.Error("the CA ConfigMap holds a line of the key")
		}
	}
	// Without the flag, the objects are the three of TestEffectorObjects.
	if plain := exampleEffector(t); len(plain.Objects) != 3 {
		t.Errorf("without a CA: %d objects; want 3", len(plain.Objects))
	}
	c := set.Objects[1].(*appsv1.Deployment).Spec.Template.Spec
	var env []string
	for _, e := range c.Containers[0].Env {
		if e.Name == "JR2_CA_FILE" {
			env = append(env, e.Value)
		}
	}
	if !slices.Equal(env, []string{"/etc/jr2/effector/ca/ca.crt"}) {
		t.Errorf("JR2_CA_FILE %v; want /etc/jr2/effector/ca/ca.crt once", env)
	}
	var mounted bool
	for _, m := range c.Containers[0].VolumeMounts {
		mounted = mounted || m.Name == "ca" && m.MountPath == "/etc/jr2/effector/ca" && m.ReadOnly
	}
	var projected []string
	for _, v := range c.Volumes {
		if v.Name == "ca" && v.Projected != nil {
			for _, src := range v.Projected.Sources {
				for _, it := range src.ConfigMap.Items {
					projected = append(projected, fmt.Sprintf("%s/%s->%s %o", src.ConfigMap.Name, it.Key, it.Path, *it.Mode))
				}
			}
		}
	}
	if !mounted || !slices.Equal(projected, []string{"jr2-instance-effector-ca/ca.crt->ca.crt 444"}) {
		t.Errorf("CA volume: mounted read-only %v, projected %v", mounted, projected)
	}

	cert := string(a.CertPEM)
	for _, tc := range []struct{ name, bundle, want string }{
		{"empty", "", "--ca-file: no PEM certificate found; pass a PEM file of the certificates your https targets chain to, or drop --ca-file"},
		{"not PEM", "hello\n", "--ca-file: no PEM certificate found; pass a PEM file of the certificates your https targets chain to, or drop --ca-file"},
		{"a key alone", string(a.KeyPEM), `--ca-file: block 1 is a "EC PRIVATE KEY" block; a ConfigMap holds public certificates only: pass the CA's certificates, never its key`},
		{"a certificate and its key", cert + string(a.KeyPEM), `--ca-file: block 2 is a "EC PRIVATE KEY" block; a ConfigMap holds public certificates only: pass the CA's certificates, never its key`},
		{"a PKCS #8 key", cert + strings.ReplaceAll(string(a.KeyPEM), "EC PRIVATE KEY", "PRIVATE KEY"), `--ca-file: block 2 is a "PRIVATE KEY" block; a ConfigMap holds public certificates only: pass the CA's certificates, never its key`},
		{"a certificate that does not parse", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", "--ca-file: certificate 1 does not parse; pass the PEM certificates your https targets chain to"},
		{"text after", cert + "trailing\n", "--ca-file: text after the last PEM block is not PEM; pass a PEM file of certificates only"},
	} {
		set, err := kube.Effector(raw, kube.EffectorOptions{CA: []byte(tc.bundle)})
		if set != nil || err == nil || err.Error() != tc.want {
			t.Errorf("%s: %v; want %q", tc.name, err, tc.want)
			continue
		}
		for _, line := range strings.Split(string(a.KeyPEM), "\n") {
			if len(line) > 16 && strings.Contains(err.Error(), line) {
				t.Errorf("%s: the error holds a line of the key", tc.name)
			}
		}
	}
}
