// Package kube builds a pod's Kubernetes objects — and the Effector's —
// as typed k8s.io/api values, from the same render as the pod's files, and
// serialises them as YAML with a writer of its own (yaml.go, from each
// object's JSON form as its tree reader reads it, jsontree.go), read back
// equal by sigs.k8s.io/yaml, which kubectl reads them with. It is the one
// place a Kubernetes object of this repository is made: no object is ever
// written as text by hand. Build lists the objects of one pod;
// PodTemplatePatch adds the same boundary to a pod template the user
// already has.
//
// Invariants:
//   - No object holds a value. Values never pass through render: each held
//     secret's value is projected into the Custodian container's value
//     directory from a Secret of the user's (the manifest's valueFrom, or
//     ConventionSecret), which this package never builds. A private key is
//     only ever in a Secret, never in a ConfigMap.
//   - The agent container mounts only the trust ConfigMap; nothing it
//     mounts holds a value or a private key. Its env is exactly
//     harness.env, in order.
//   - The pod neither mounts a ServiceAccount token nor shares its process
//     namespace; the Custodian runs as a non-root uid distinct from the
//     agent's, read-only root, no privilege escalation, every capability
//     dropped, seccomp RuntimeDefault; its stop works in the Pod (Build).
//   - Every object is at most MaxObjectBytes as written, or the render is
//     refused (Files), naming the object and the fix, before the API server
//     would refuse it. Objects carry no
//     kubectl.kubernetes.io/last-applied-configuration: they are applied
//     server-side (kubectl apply --server-side --field-manager=jr2).
//
// Not covered here: whether the user's Secrets exist (Values); a
// scheduler, a kubelet or a container runtime (docs/kubernetes.md says
// what is proven and what is not).
package kube

import (
	"fmt"
	"path"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Object is one typed object this package builds.
type Object interface {
	runtime.Object
	metav1.Object
}

// Labels and names.
const (
	// LabelHeldPod names the pod an object belongs to.
	LabelHeldPod = "jr2.dev/held-pod"
	// LabelComponent says what an object is: ComponentPod (the Pod),
	// ComponentConfig, ComponentLeaves, ComponentTrust or
	// ComponentEffector. A user who adds the boundary to a pod template
	// of their own applies everything but the Pod:
	// kubectl apply … -l jr2.dev/component!=pod.
	LabelComponent = "jr2.dev/component"

	ComponentPod      = "pod"
	ComponentConfig   = "custodian-config"
	ComponentLeaves   = "leaves"
	ComponentTrust    = "trust"
	ComponentEffector = "effector"

	// TrustConfigMap is the trust ConfigMap's name (ADR-0059, "Trust").
	TrustConfigMap = "jr2-ca"
	// FieldManager is the server-side apply field manager the docs name.
	FieldManager = "jr2"
	// MaxObjectBytes is the most an object may be as written: Kubernetes
	// refuses a ConfigMap or Secret whose data is over 1 MiB.
	MaxObjectBytes = 1 << 20
	// LeavesPerSecret is how many bound targets' leaves one Secret holds
	// (about 1 KiB each, PEM): 400 targets are four Secrets, each far
	// under MaxObjectBytes, and a re-render of the same targets puts each
	// leaf in the same Secret.
	LeavesPerSecret = 128
)

// What the image recipes (images/) put where, and who they run as;
// TestRecipesMatchObjects holds each recipe to the objects.
const (
	EnvoyBinary           = "/usr/local/bin/envoy"
	ModulePath            = "/opt/jr2/lib/custodian-module.so"
	CustodianBinary       = "/opt/jr2/bin/custodian"
	EffectorBinary        = "/opt/jr2/bin/effector"
	EffectorConfineBinary = "/opt/jr2/bin/effector-confine"
	// CustodianUID is the Custodian image's user (and group), distroless's
	// nonroot; the agent's uid must differ.
	CustodianUID int64 = 65532
	// EffectorUID is the Effector image's user (and group).
	EffectorUID int64 = 65532
)

// Defaults of the render flags this package reads.
const (
	DefaultConfigDir      = "/etc/jr2/custodian/config"
	DefaultAgentImage     = "jr2-agent"
	DefaultAgentContainer = "agent"
	DefaultAgentUID       = 1000
	// DefaultEnvoyImage and DefaultServeImage are the tags the recipes'
	// docker build lines give.
	DefaultEnvoyImage = "jr2-custodian-envoy"
	DefaultServeImage = "jr2-custodian-serve"
)

// Sidecar is what runs in the Custodian container.
type Sidecar string

const (
	// SidecarEnvoy is core Envoy 1.39.3 loading the module: the default.
	SidecarEnvoy Sidecar = "envoy"
	// SidecarServe is custodian serve, the Go host of the same engine.
	SidecarServe Sidecar = "serve"
)

// ParseSidecar reads --sidecar; empty is envoy.
func ParseSidecar(s string) (Sidecar, error) {
	switch Sidecar(s) {
	case "", SidecarEnvoy:
		return SidecarEnvoy, nil
	case SidecarServe:
		return SidecarServe, nil
	}
	return "", fmt.Errorf("--sidecar %q: want envoy (core Envoy with the module, images/custodian-envoy.Dockerfile) or serve (custodian serve, images/custodian-serve.Dockerfile)", s)
}

// Image is the default image of the sidecar.
func (s Sidecar) Image() string {
	if s == SidecarServe {
		return DefaultServeImage
	}
	return DefaultEnvoyImage
}

// Options are the pod's side of a render: where things are in the pod's
// containers, which images run, and the namespace. Paths are the pod's,
// never this machine's.
type Options struct {
	// Namespace of every object; empty leaves it to kubectl's context.
	Namespace string
	// Sidecar is what runs in the Custodian container; empty is envoy.
	Sidecar Sidecar
	// CustodianImage is the sidecar's image; empty is Sidecar.Image().
	CustodianImage string
	// AgentImage and AgentContainer are the agent container's image and
	// name (the patch merges into the user's container of that name).
	AgentImage, AgentContainer string
	// AgentUID is the agent container's uid; it must differ from
	// CustodianUID.
	AgentUID int64
	// ConfigDir is where the Custodian container sees its files:
	// custodian.json, envoy.json, tls/ and ca/upstream.crt (the layout of
	// the rendered directory). envoy.json names its files under it.
	ConfigDir string
	// ValuesDir is custodian.json's valuesDir: the value files' mount.
	ValuesDir string
	// HarnessCADir is where the agent container mounts jr2-ca, which
	// harness.env's trust variables name.
	HarnessCADir string
}

// withDefaults fills the empty fields and checks the rest.
func (o Options) withDefaults() (Options, error) {
	if o.Sidecar == "" {
		o.Sidecar = SidecarEnvoy
	}
	if o.CustodianImage == "" {
		o.CustodianImage = o.Sidecar.Image()
	}
	if o.AgentImage == "" {
		o.AgentImage = DefaultAgentImage
	}
	if o.AgentContainer == "" {
		o.AgentContainer = DefaultAgentContainer
	}
	if o.ConfigDir == "" {
		o.ConfigDir = DefaultConfigDir
	}
	if o.Namespace != "" && !dnsLabel(o.Namespace) {
		return o, fmt.Errorf("--namespace %q is not a namespace name; use lowercase letters, digits and '-' (at most 63)", o.Namespace)
	}
	if !dnsLabel(o.AgentContainer) {
		return o, fmt.Errorf("--agent-container %q is not a container name; use lowercase letters, digits and '-' (at most 63)", o.AgentContainer)
	}
	if o.AgentContainer == CustodianContainer {
		return o, fmt.Errorf("--agent-container %q is the Custodian's container; name the agent's container another way", o.AgentContainer)
	}
	if o.AgentUID < 0 || o.AgentUID == CustodianUID {
		return o, fmt.Errorf("--agent-uid %d: the agent needs a uid of its own, not negative and not the Custodian's %d; choose another (default %d)", o.AgentUID, CustodianUID, DefaultAgentUID)
	}
	for _, p := range []struct{ flag, dir string }{{"--pod-config-dir", o.ConfigDir}, {"--values-dir", o.ValuesDir}, {"--harness-ca-dir", o.HarnessCADir}} {
		if !path.IsAbs(p.dir) || path.Clean(p.dir) != p.dir || p.dir == "/" {
			return o, fmt.Errorf("%s %q: the pod's objects mount a volume there; write a clean absolute path in the container, not /", p.flag, p.dir)
		}
	}
	for _, pair := range [][2]string{{"--pod-config-dir", "--values-dir"}} {
		a, b := o.ConfigDir, o.ValuesDir
		if a == b || under(a, b) || under(b, a) {
			return o, fmt.Errorf("%s %q and %s %q nest or coincide: one volume would be mounted over or inside the other, hiding it or mixing the value files into the config the Custodian reads as its rendered directory; give the values a directory beside the config (defaults %s and %s)", pair[0], a, pair[1], b, DefaultConfigDir, "/etc/jr2/custodian/values")
		}
	}
	return o, nil
}

// under reports whether p is strictly below dir.
func under(p, dir string) bool {
	return len(p) > len(dir) && p[:len(dir)] == dir && p[len(dir)] == '/'
}

// dnsLabel: 1–63 lowercase letters, digits and '-', starting and ending
// with a letter or digit.
func dnsLabel(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && (c != '-' || i == 0 || i == len(s)-1) {
			return false
		}
	}
	return true
}

// meta is an object's metadata: its name, the namespace, and labels.
func (o Options) meta(name string, labels map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: o.Namespace, Labels: labels}
}

// typeMeta of a core/v1 kind.
func coreType(kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: corev1.SchemeGroupVersion.String(), Kind: kind}
}
