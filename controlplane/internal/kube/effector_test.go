package kube_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"jr2.dev/boundary/controlplane/internal/kube"
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
	dir := filepath.Join("testdata", "golden", "effector")
	for name, b := range files {
		p := filepath.Join(dir, name)
		if *update {
			os.MkdirAll(filepath.Dir(p), 0o755)
			os.WriteFile(p, b, 0o644)
		}
		if w, _ := os.ReadFile(p); !bytes.Equal(w, b) {
			t.Errorf("%s differs from its golden file (run with -update after checking the change)", name)
		}
	}
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
