package kube_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"jr2.dev/boundary/controlplane/internal/kube"
	"jr2.dev/boundary/controlplane/internal/manifest"
	"jr2.dev/boundary/controlplane/internal/render"
	"jr2.dev/boundary/internal/contract"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

const manifests = "../../testdata/manifests"

// stubInput is a render's result for a manifest with the real
// custodian.json and harness.env and stand-ins for the bytes other tests
// hold (envoy.json: the bootstrap goldens; the trust files and leaves: pki),
// so a golden file changes only when an object does.
func stubInput(t testing.TB, held []byte, o kube.Options) kube.Input {
	t.Helper()
	m, err := manifest.Parse(held)
	if err != nil {
		t.Fatal(err)
	}
	if o.ValuesDir == "" {
		o.ValuesDir = render.DefaultValuesDir
	}
	if o.HarnessCADir == "" {
		o.HarnessCADir = render.DefaultHarnessCADir
	}
	cfg := render.Config(m, o.ValuesDir)
	cfgJSON, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	in := kube.Input{
		Manifest: m, Config: cfg, CustodianJSON: append(cfgJSON, '\n'),
		EnvoyJSON: []byte("{\"stub\": \"envoy.json\"}\n"), HarnessEnv: render.HarnessEnv(cfg, len(m.Secrets) > 0, o.HarnessCADir),
		CA: []byte("stub ca.crt\n"), Extra: []byte("stub extra.crt\n"), Bundle: []byte("stub bundle.crt\n"),
		Upstream: []byte("stub upstream.crt\n"), Wgetrc: render.Wgetrc(o.HarnessCADir), Options: o,
	}
	for _, s := range cfg.Secrets {
		for _, tg := range s.Targets {
			in.Leaves = append(in.Leaves, kube.Leaf{Target: tg, Cert: []byte("stub cert " + tg + "\n"), Key: []byte("stub key " + tg + "\n")})
		}
	}
	return in
}

// TestGolden: every object file and the patch of each case, byte for byte.
// Refresh with: go test ./controlplane/internal/kube -run TestGolden -update
func TestGolden(t *testing.T) {
	valueFrom := []byte(`{"pod":"ws-refs","orchestrator":"jr2-orchestrator.jr2.svc:4000","sandbox":"ws-refs","secrets":[
		{"name":"ANTHROPIC_API_KEY","hosts":["api.anthropic.com"],"headers":["x-api-key"],"valueFrom":{"secretKeyRef":{"name":"llm-keys","key":"anthropic"}}},
		{"name":"OPENAI_API_KEY","hosts":["api.openai.com"],"valueFrom":{"secretKeyRef":{"name":"llm-keys","key":"openai"}}},
		{"name":"GITHUB_TOKEN","hosts":["github.com"]},
		{"name":"JR2_SANDBOX_TOKEN","valueFrom":{"secretKeyRef":{"name":"ws-refs-token","key":"token"}}}]}`)
	small, err := os.ReadFile(filepath.Join(manifests, "small.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		held []byte
		o    kube.Options
	}{
		{"small", small, kube.Options{}},
		{"serve", small, kube.Options{Namespace: "agents", Sidecar: kube.SidecarServe, CustodianImage: "registry.example/jr2-custodian-serve@sha256:0123", AgentImage: "registry.example/agent:1", AgentContainer: "harness", AgentUID: 2000}},
		{"valuefrom", valueFrom, kube.Options{Namespace: "agents"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set, err := kube.Build(stubInput(t, tc.held, tc.o))
			if err != nil {
				t.Fatal(err)
			}
			files, err := kube.Files(set)
			if err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join("testdata", "golden", tc.name)
			if *update {
				os.RemoveAll(dir)
				for name, b := range files {
					os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755)
					if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			var want []string
			filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					rel, _ := filepath.Rel(dir, p)
					want = append(want, filepath.ToSlash(rel))
				}
				return nil
			})
			sort.Strings(want)
			got := make([]string, 0, len(files))
			for name := range files {
				got = append(got, name)
			}
			sort.Strings(got)
			if !slices.Equal(got, want) {
				t.Fatalf("files %v; golden %v", got, want)
			}
			for name, b := range files {
				w, _ := os.ReadFile(filepath.Join(dir, name))
				if !bytes.Equal(b, w) {
					t.Errorf("%s differs from its golden file (run with -update after checking the change)", name)
				}
			}
		})
	}
}

// pod is the set's Pod.
func pod(t *testing.T, set *kube.Set) *corev1.Pod {
	t.Helper()
	for _, o := range set.Objects {
		if p, ok := o.(*corev1.Pod); ok {
			return p
		}
	}
	t.Fatal("no Pod")
	return nil
}

// TestPodInvariants: the Pod's boundary, stated field by field, for both
// sidecars.
func TestPodInvariants(t *testing.T) {
	small, _ := os.ReadFile(filepath.Join(manifests, "small.json"))
	for _, sc := range []kube.Sidecar{kube.SidecarEnvoy, kube.SidecarServe} {
		t.Run(string(sc), func(t *testing.T) {
			in := stubInput(t, small, kube.Options{Sidecar: sc})
			set, err := kube.Build(in)
			if err != nil {
				t.Fatal(err)
			}
			p := pod(t, set)
			s := p.Spec
			if s.AutomountServiceAccountToken == nil || *s.AutomountServiceAccountToken || s.ShareProcessNamespace == nil || *s.ShareProcessNamespace {
				t.Error("the pod must set automountServiceAccountToken: false and shareProcessNamespace: false")
			}
			if s.EnableServiceLinks == nil || *s.EnableServiceLinks {
				t.Error("service links would add variables to the agent's env beyond harness.env")
			}
			if len(s.InitContainers) != 1 || len(s.Containers) != 1 {
				t.Fatalf("%d init containers, %d containers; want the Custodian and the agent", len(s.InitContainers), len(s.Containers))
			}
			c, a := s.InitContainers[0], s.Containers[0]
			if c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
				t.Error("the Custodian is not a native sidecar (restartPolicy Always)")
			}
			for what, pr := range map[string]*corev1.Probe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe} {
				if pr == nil || pr.HTTPGet == nil || pr.HTTPGet.Path != "/healthz" || pr.HTTPGet.Port.String() != kube.HealthPort {
					t.Errorf("%s probe %+v; want GET /healthz on the health port", what, pr)
				}
			}
			if len(c.Ports) != 1 || c.Ports[0].ContainerPort != 15021 {
				t.Errorf("health port %+v; want 15021 (custodian.json's)", c.Ports)
			}
			sec := c.SecurityContext
			if sec == nil || *sec.RunAsUser == 0 || *sec.RunAsUser == *a.SecurityContext.RunAsUser || !*sec.RunAsNonRoot ||
				!*sec.ReadOnlyRootFilesystem || *sec.AllowPrivilegeEscalation || !slices.Equal(sec.Capabilities.Drop, []corev1.Capability{"ALL"}) ||
				sec.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
				t.Errorf("the Custodian's security context %+v", sec)
			}
			if c.Resources.Requests.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
				t.Error("the Custodian has no resource requests and limits")
			}
			// The agent's env is exactly harness.env, in order.
			var env []string
			for _, e := range a.Env {
				if e.ValueFrom != nil {
					t.Errorf("agent env %s is a reference", e.Name)
				}
				env = append(env, e.Name+"="+e.Value)
			}
			if want := strings.Split(strings.TrimSuffix(string(in.HarnessEnv), "\n"), "\n"); !slices.Equal(env, want) {
				t.Errorf("agent env\n got %q\nwant %q", env, want)
			}
			if len(a.EnvFrom) != 0 {
				t.Error("the agent takes envFrom")
			}
			// The agent mounts the trust ConfigMap alone, where harness.env points.
			if len(a.VolumeMounts) != 1 || a.VolumeMounts[0].Name != kube.VolumeTrust || a.VolumeMounts[0].MountPath != render.DefaultHarnessCADir {
				t.Errorf("agent mounts %+v; want jr2-ca at %s only", a.VolumeMounts, render.DefaultHarnessCADir)
			}
			for _, v := range s.Volumes {
				if v.Name == kube.VolumeTrust && (v.ConfigMap == nil || v.ConfigMap.Name != kube.TrustConfigMap) {
					t.Errorf("the agent's volume is %+v; want the jr2-ca ConfigMap", v)
				}
			}
		})
	}
}

// TestValuesProjected: each held secret's value, the token's included, is
// a 0400 item of the Custodian's value volume named after the held secret,
// from its valueFrom or the convention Secret; nothing else of the pod
// names those Secrets.
func TestValuesProjected(t *testing.T) {
	held := []byte(`{"pod":"p1","orchestrator":"o.svc:4000","secrets":[
		{"name":"A_KEY","hosts":["a.example.com"],"valueFrom":{"secretKeyRef":{"name":"user-keys","key":"a"}}},
		{"name":"B_KEY","hosts":["b.example.com"]}]}`)
	set, err := kube.Build(stubInput(t, held, kube.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	want := []kube.ValueRef{{Held: "A_KEY", Secret: "user-keys", Key: "a"}, {Held: "B_KEY", Secret: "jr2-held-secrets-p1", Key: "B_KEY", Convention: true}, {Held: contract.TokenName, Secret: "jr2-held-secrets-p1", Key: contract.TokenName, Convention: true}}
	if !slices.Equal(set.Values, want) {
		t.Errorf("values %+v; want %+v", set.Values, want)
	}
	p := pod(t, set)
	var got []string
	for _, v := range p.Spec.Volumes {
		if v.Name != kube.VolumeValues {
			continue
		}
		for _, src := range v.Projected.Sources {
			for _, it := range src.Secret.Items {
				if it.Mode == nil || *it.Mode != 0o400 {
					t.Errorf("%s is not mode 0400", it.Path)
				}
				got = append(got, src.Secret.Name+"/"+it.Key+"->"+it.Path)
			}
		}
	}
	if w := []string{"user-keys/a->A_KEY", "jr2-held-secrets-p1/B_KEY->B_KEY", "jr2-held-secrets-p1/JR2_SANDBOX_TOKEN->JR2_SANDBOX_TOKEN"}; !slices.Equal(got, w) {
		t.Errorf("value items %q; want %q", got, w)
	}
	for _, o := range set.Objects {
		if o.GetName() == "user-keys" || o.GetName() == kube.ConventionSecret("p1") {
			t.Errorf("render wrote the user's Secret %s", o.GetName())
		}
	}
	mounts := p.Spec.InitContainers[0].VolumeMounts
	if mounts[1].Name != kube.VolumeValues || mounts[1].MountPath != render.DefaultValuesDir || !mounts[1].ReadOnly {
		t.Errorf("the Custodian mounts %+v; want the values at %s", mounts, render.DefaultValuesDir)
	}
}

// TestPatchIsThePod: the patch's sidecar, volumes and pod settings are the
// Pod's, and its agent container is the Pod's but for the image (the
// user's own).
func TestPatchIsThePod(t *testing.T) {
	small, _ := os.ReadFile(filepath.Join(manifests, "small.json"))
	set, err := kube.Build(stubInput(t, small, kube.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	p := pod(t, set).Spec
	ps := set.Patch.Spec.Template.Spec
	j := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	if j(ps.InitContainers) != j(p.InitContainers) || j(ps.Volumes) != j(p.Volumes) || j(ps.SecurityContext) != j(p.SecurityContext) ||
		*ps.AutomountServiceAccountToken || *ps.ShareProcessNamespace {
		t.Error("the patch's sidecar, volumes or pod settings differ from the Pod's")
	}
	agent := p.Containers[0]
	agent.Image = ""
	if len(ps.Containers) != 1 || j(ps.Containers[0]) != j(agent) {
		t.Errorf("the patch's agent container differs from the Pod's but for the image")
	}
	// The digest: the same on the Pod and the template, the same for the
	// same inputs, another when what the Custodian reads changes.
	d := pod(t, set).Annotations[kube.AnnotationDigest]
	if !strings.HasPrefix(d, "sha256:") || set.Patch.Spec.Template.Annotations[kube.AnnotationDigest] != d {
		t.Errorf("digest %q on the Pod, %q on the template", d, set.Patch.Spec.Template.Annotations[kube.AnnotationDigest])
	}
	in := stubInput(t, small, kube.Options{})
	if again, _ := kube.Build(in); pod(t, again).Annotations[kube.AnnotationDigest] != d {
		t.Error("the same inputs give another digest")
	}
	in.Upstream = []byte("another upstream.crt\n")
	if other, _ := kube.Build(in); pod(t, other).Annotations[kube.AnnotationDigest] == d {
		t.Error("a changed trust file keeps the digest")
	}
	in = stubInput(t, small, kube.Options{})
	in.Leaves[0].Key = []byte("another key, same certificate\n")
	if other, _ := kube.Build(in); pod(t, other).Annotations[kube.AnnotationDigest] != d {
		t.Error("the digest hashes a private key")
	}
	b, err := kube.Marshal(set.Patch)
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := yaml.Unmarshal(b, &back); err != nil || back["spec"] == nil || back["kind"] != nil {
		t.Errorf("the patch is not a spec.template patch: %v", err)
	}
}

// TestRefusals: options that would make a pod the boundary cannot hold.
func TestRefusals(t *testing.T) {
	small, _ := os.ReadFile(filepath.Join(manifests, "small.json"))
	for _, tc := range []struct {
		name string
		o    kube.Options
		want string
	}{
		{"agent as the Custodian's uid", kube.Options{AgentUID: kube.CustodianUID}, "--agent-uid 65532: the agent needs a uid of its own"},
		{"relative values", kube.Options{ValuesDir: "values"}, `--values-dir "values": the pod's objects mount a volume there`},
		{"relative trust", kube.Options{HarnessCADir: "pod/ca"}, `--harness-ca-dir "pod/ca": the pod's objects mount a volume there`},
		{"values inside config", kube.Options{ConfigDir: "/etc/jr2/custodian", ValuesDir: "/etc/jr2/custodian/values"}, "nest or coincide"},
		{"bad namespace", kube.Options{Namespace: "Agents"}, `--namespace "Agents" is not a namespace name`},
		{"agent named custodian", kube.Options{AgentContainer: "custodian"}, "is the Custodian's container"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := kube.Build(stubInput(t, small, tc.o))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v; want one holding %q", err, tc.want)
			}
		})
	}
	long := strings.Repeat("K", 254)
	held := []byte(`{"pod":"p","orchestrator":"o:1","secrets":[{"name":"` + long + `","hosts":["a.example.com"]}]}`)
	if _, err := kube.Build(stubInput(t, held, kube.Options{})); err == nil || !strings.Contains(err.Error(), "a Secret key has at most 253 characters; shorten the name, or give it a valueFrom") {
		t.Errorf("a 254-character held name by convention: %v", err)
	}
	held = []byte(`{"pod":"p","orchestrator":"o:1","secrets":[{"name":"K","hosts":["a.example.com"],"valueFrom":{"secretKeyRef":{"name":"s","key":"k"}}},
		{"name":"L","hosts":["` + strings.Repeat("a", 60) + "." + strings.Repeat("b", 60) + "." + strings.Repeat("c", 60) + "." + strings.Repeat("d", 60) + `.io"]}]}`)
	if _, err := kube.Build(stubInput(t, held, kube.Options{})); err == nil || !strings.Contains(err.Error(), "bind a shorter host name") {
		t.Errorf("a 246-character host: %v", err)
	}
	if _, err := kube.ParseSidecar("golang"); err == nil || !strings.Contains(err.Error(), "want envoy") {
		t.Errorf("--sidecar golang: %v", err)
	}
}

// TestOAuthPartsProjected: an OAuth secret has no value of its own: each
// of its grant's parts is a 0400 item of the value volume, a key of the
// convention Secret named as the file the Custodian reads (<name>.<part>).
func TestOAuthPartsProjected(t *testing.T) {
	held := []byte(`{"pod":"p1","orchestrator":"o.svc:4000","secrets":[
		{"name":"API","hosts":["api.example.com"],"oauth":{"grant":"refresh-token","tokenURL":"https://auth.example.com/token"}},
		{"name":"SA","hosts":["sa.example.com"],"oauth":{"grant":"service-account","tokenURL":"https://oauth2.googleapis.com/token"}}]}`)
	set, err := kube.Build(stubInput(t, held, kube.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	conv := kube.ConventionSecret("p1")
	var want []kube.ValueRef
	for _, f := range []string{"API.client-id", "API.client-secret", "API.refresh-token", "SA.key.json", contract.TokenName} {
		want = append(want, kube.ValueRef{Held: f, Secret: conv, Key: f, Convention: true})
	}
	if !slices.Equal(set.Values, want) {
		t.Errorf("values %+v; want %+v", set.Values, want)
	}
}
