package kube_test

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"jr2.dev/boundary/controlplane/internal/bootstrap"
	"jr2.dev/boundary/controlplane/internal/kube"
	"jr2.dev/boundary/controlplane/internal/manifesttest"
	"jr2.dev/boundary/controlplane/internal/pki"
	"jr2.dev/boundary/controlplane/internal/render"
	"jr2.dev/boundary/internal/contract"
	"jr2.dev/boundary/internal/testkit/testpki"
)

// renderPod runs a whole render of held into a fresh DIR with a CA made
// in code, and returns DIR and the result.
func renderPod(t *testing.T, held []byte, edit func(*render.Options)) (string, *render.Result, error) {
	t.Helper()
	now := time.Now()
	ca := filepath.Join(t.TempDir(), "ca")
	if err := pki.InitCA(ca, now); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "pod")
	o := render.Options{
		Manifest: held, CADir: ca, OutDir: out, SystemRoots: testpki.NewCA(t, "system-root").CertPEM,
		CABundle: testpki.NewCA(t, "corp-root").CertPEM, ValuesDir: render.DefaultValuesDir,
		DataPlane: bootstrap.DataPlaneModule, Module: kube.ModulePath, HarnessCADir: render.DefaultHarnessCADir, Now: now,
		Rand: bytes.NewReader([]byte{0x01, 0x23, 0x45, 0x67, 0x89, 0xab}), // goldens byte for byte
	}
	if edit != nil {
		edit(&o)
	}
	res, err := render.Render(o)
	return out, res, err
}

// objectFiles reads DIR/kubernetes and DIR/kubernetes-patch.
func objectFiles(t *testing.T, out string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	for _, d := range []string{kube.Dir, kube.PatchDir} {
		entries, err := os.ReadDir(filepath.Join(out, d))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join(out, d, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			files[d+"/"+e.Name()] = b
		}
	}
	return files
}

// TestObjectsAreTheRender: the objects carry the bytes of the render's own
// files: custodian.json, harness.env (the agent's env), the trust files,
// each leaf; and the pod's envoy.json is DIR's when DIR is rendered for
// the module at the pod's config directory.
func TestObjectsAreTheRender(t *testing.T) {
	small, _ := os.ReadFile(filepath.Join(manifests, "small.json"))
	out, res, err := renderPod(t, small, func(o *render.Options) { o.MountDir = kube.DefaultConfigDir })
	if err != nil {
		t.Fatal(err)
	}
	file := func(p string) []byte { b, _ := os.ReadFile(filepath.Join(out, p)); return b }
	var cm, trust *corev1.ConfigMap
	var leaves []*corev1.Secret
	for _, o := range res.Kube.Objects {
		switch v := o.(type) {
		case *corev1.ConfigMap:
			if v.Name == kube.TrustConfigMap {
				trust = v
			} else {
				cm = v
			}
		case *corev1.Secret:
			leaves = append(leaves, v)
		}
	}
	if cm.Data[kube.CustodianFile] != string(file(render.CustodianFile)) || cm.Data[kube.EnvoyFile] != string(file(render.EnvoyFile)) {
		t.Error("the Custodian ConfigMap is not DIR's custodian.json and envoy.json")
	}
	if cm.Labels[kube.LabelHeldPod] != "ws-7f3a" || cm.Name != "ws-7f3a-custodian" {
		t.Errorf("ConfigMap %s labels %v", cm.Name, cm.Labels)
	}
	if trust.Data[kube.TrustExtra] != string(file(render.ExtraCAFile)) || trust.Data[kube.TrustBundle] != string(file(render.BundleCAFile)) ||
		trust.Data[kube.TrustUpstream] != string(file(render.UpstreamFile)) || trust.Data[kube.TrustWgetrc] != string(file(render.WgetrcFile)) ||
		trust.Data[kube.TrustCA] == "" {
		t.Error("jr2-ca is not DIR's trust files and the --ca-bundle")
	}
	if len(leaves) != 1 {
		t.Fatalf("%d leaves Secrets for 3 targets", len(leaves))
	}
	for _, tg := range []string{"api.anthropic.com:443", "api.github.com:443", "github.com:443"} {
		cert, key := bootstrap.LeafFiles(tg)
		if !bytes.Equal(leaves[0].Data[filepath.Base(cert)], file(cert)) || !bytes.Equal(leaves[0].Data[filepath.Base(key)], file(key)) {
			t.Errorf("%s: the Secret's leaf is not DIR's", tg)
		}
	}
	// What is on disk is what Build made, and it reads back strictly (no
	// field the API types do not know) into the same object.
	for _, o := range res.Kube.Objects {
		b, err := kube.Marshal(o)
		if err != nil || !bytes.Equal(b, file(kube.Dir+"/"+kube.FileName(o))) {
			t.Errorf("%s on disk is not the object: %v", kube.FileName(o), err)
		}
		back := o.DeepCopyObject().(kube.Object)
		reflectZero(back)
		if err := yaml.UnmarshalStrict(b, back); err != nil {
			t.Errorf("%s does not read back strictly: %v", kube.FileName(o), err)
			continue
		}
		if again, _ := kube.Marshal(back); !bytes.Equal(again, b) {
			t.Errorf("%s does not round-trip", kube.FileName(o))
		}
	}
}

// reflectZero empties a typed object in place.
func reflectZero(o kube.Object) {
	v := reflect.ValueOf(o).Elem()
	v.Set(reflect.Zero(v.Type()))
}

// TestSentinelInNoObject: with a sentinel in every value file of the value
// directory, no object file or the patch carries it; no ConfigMap, no
// annotation, no argv and no env holds a value or a private key; the
// agent's container mounts nothing that holds one.
func TestSentinelInNoObject(t *testing.T) {
	const sentinel = "sk-ant-api03-SENTINEL-77c1e0d94b2a"
	held := []byte(`{"pod":"ws-s","orchestrator":"o.svc:4000","secrets":[
		{"name":"A_KEY","hosts":["a.example.com"],"valueFrom":{"secretKeyRef":{"name":"user-keys","key":"a"}}},
		{"name":"B_KEY","hosts":["b.example.com","c.example.com:8443"]}]}`)
	values := t.TempDir()
	for _, n := range []string{"A_KEY", "B_KEY", contract.TokenName} {
		os.WriteFile(filepath.Join(values, n), []byte(sentinel+n+"\n"), 0o600)
	}
	out, res, err := renderPod(t, held, func(o *render.Options) { o.ValuesDir = values })
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range objectFiles(t, out) {
		if bytes.Contains(b, []byte("SENTINEL")) {
			t.Errorf("%s holds the sentinel", name)
		}
		var obj struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(b, &obj); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for k := range obj.Metadata.Annotations {
			if k != kube.AnnotationDigest {
				t.Errorf("%s carries the annotation %s (last-applied-configuration among them would copy a Secret)", name, k)
			}
		}
		if obj.Kind == "Secret" && len(obj.Metadata.Annotations) != 0 {
			t.Errorf("%s, a Secret, carries annotations", name)
		}
		if obj.Kind != "Secret" && bytes.Contains(b, []byte("PRIVATE KEY")) {
			t.Errorf("%s, a %s, holds a private key", name, obj.Kind)
		}
	}
	p := pod(t, res.Kube)
	for _, c := range append(p.Spec.InitContainers, p.Spec.Containers...) {
		argv := strings.Join(append(c.Command, c.Args...), " ")
		for _, e := range c.Env {
			argv += " " + e.Value
		}
		if strings.Contains(argv, "SENTINEL") || strings.Contains(argv, "PRIVATE") {
			t.Errorf("%s: argv or env holds a value", c.Name)
		}
	}
	agent := p.Spec.Containers[0]
	for _, m := range agent.VolumeMounts {
		for _, v := range p.Spec.Volumes {
			if v.Name == m.Name && (v.ConfigMap == nil || v.ConfigMap.Name != kube.TrustConfigMap) {
				t.Errorf("the agent mounts %s, which is not the trust ConfigMap", v.Name)
			}
		}
	}
	// A value in the manifest itself is refused, unquoted, and nothing is
	// written.
	withValue := []byte(`{"pod":"ws-s","orchestrator":"o.svc:4000","secrets":[{"name":"A_KEY","hosts":["a.example.com"],"value":"` + sentinel + `"}]}`)
	out2, _, err := renderPod(t, withValue, nil)
	if err == nil || strings.Contains(err.Error(), "SENTINEL") {
		t.Errorf("a manifest holding a value: %v", err)
	}
	if _, serr := os.Stat(out2); !os.IsNotExist(serr) {
		t.Error("a manifest holding a value wrote DIR")
	}
	// The values volume names only references; the leaves' keys are only
	// in the leaves Secrets, items of the Custodian's volume.
	for _, v := range p.Spec.Volumes {
		if v.Name == kube.VolumeValues {
			for _, src := range v.Projected.Sources {
				if src.Secret == nil || src.ConfigMap != nil {
					t.Errorf("value source %+v is not a Secret of the user's", src)
				}
			}
		}
	}
}

// TestLimits: 200 secrets over 400 targets render every object under 1
// MiB, the leaves in four Secrets (LeavesPerSecret each); an object that
// would pass the limit is refused by render, naming the object and the
// fix, and nothing is written.
func TestLimits(t *testing.T) {
	out, res, err := renderPod(t, manifesttest.Generate(400), nil)
	if err != nil {
		t.Fatal(err)
	}
	leaves := 0
	for name, b := range objectFiles(t, out) {
		if strings.HasPrefix(name, kube.Dir+"/secret-") {
			leaves++
		}
		if len(b) > kube.MaxObjectBytes {
			t.Errorf("%s is %d bytes as written", name, len(b))
		}
		t.Logf("%s: %d bytes", name, len(b))
	}
	if leaves != 4 {
		t.Errorf("%d leaves Secrets; want 4", leaves)
	}
	for _, o := range res.Kube.Objects {
		if n, err := kube.Size(o); err != nil || n > kube.MaxObjectBytes {
			t.Errorf("%s: %d bytes as the API server counts them, %v", kube.FileName(o), n, err)
		}
	}
	// A --ca-bundle of ~300 KiB is in jr2-ca four times: over the limit.
	var big []byte
	for i := 0; len(big) < 300<<10; i++ {
		big = append(big, testpki.NewCA(t, "corp-root-"+strings.Repeat("x", i%7)).CertPEM...)
	}
	out, _, err = renderPod(t, manifesttest.Generate(2), func(o *render.Options) { o.CABundle = big })
	want := "kubernetes/configmap-jr2-ca.yaml would be "
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "pass a smaller --ca-bundle") {
		t.Fatalf("error %v; want one naming %q and the fix", err, want)
	}
	if _, serr := os.Stat(out); !os.IsNotExist(serr) {
		t.Error("a refused render wrote DIR")
	}
}

// TestTargetCeiling: what sets how many targets one pod holds is
// envoy.json's own ConfigMap (about 1.2 KiB per target of a 20-character
// name): 800 targets fit, every object under the limit; 900 are refused,
// naming that ConfigMap. docs/kubernetes.md ("Limits") states the ceiling.
func TestTargetCeiling(t *testing.T) {
	if testing.Short() {
		t.Skip("renders 1,700 leaves")
	}
	_, res, err := renderPod(t, manifesttest.Generate(800), nil)
	if err != nil {
		t.Fatalf("800 targets: %v", err)
	}
	for _, o := range res.Kube.Objects {
		if n, err := kube.Size(o); err != nil || n > kube.MaxObjectBytes {
			t.Errorf("800 targets: %s: %d bytes, %v", kube.FileName(o), n, err)
		}
	}
	out, _, err := renderPod(t, manifesttest.Generate(900), nil)
	// Nothing was written: no DIR, and nothing left beside it (its
	// leaves went into a temporary directory there before the objects
	// were refused).
	if left, rerr := os.ReadDir(filepath.Dir(out)); rerr != nil || len(left) != 0 {
		t.Errorf("900 targets, refused: %v beside DIR (%v)", left, rerr)
	}
	for _, want := range []string{"kubernetes/configmap-ws-bench-custodian-envoy.yaml would be ", "over Kubernetes' 1048576-byte object limit", "bind fewer hosts (split the secrets across pods)"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("900 targets: error %v; want one naming %q", err, want)
		}
	}
}

// TestStaleObjectsRemoved: a render that makes fewer objects removes the
// files of the others (a pod that no longer holds enough targets for a
// second leaves Secret).
func TestStaleObjectsRemoved(t *testing.T) {
	var opts render.Options
	out, _, err := renderPod(t, manifesttest.Generate(LeavesPerSecretTimes2()), func(o *render.Options) { opts = *o })
	if err != nil {
		t.Fatal(err)
	}
	third := filepath.Join(out, kube.Dir, "secret-ws-bench-custodian-tls-2.yaml")
	if _, err := os.Stat(third); err != nil {
		t.Fatal(err)
	}
	opts.Manifest = manifesttest.Generate(2)
	if _, err := render.Render(opts); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(third); !os.IsNotExist(err) {
		t.Errorf("the third leaves Secret's file is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, kube.Dir, "secret-ws-bench-custodian-tls-0.yaml")); err != nil {
		t.Error(err)
	}
}

// LeavesPerSecretTimes2 is enough targets for three leaves Secrets.
func LeavesPerSecretTimes2() int { return 2*kube.LeavesPerSecret + 2 }
