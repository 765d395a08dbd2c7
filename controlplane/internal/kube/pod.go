package kube

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"net"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"jr2.dev/boundary/controlplane/internal/manifest"
	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/internal/contract"
	"jr2.dev/boundary/internal/hostlimits"
)

// Container and volume names.
const (
	CustodianContainer = "custodian"
	VolumeConfig       = "custodian-config"
	VolumeValues       = "custodian-values"
	VolumeTrust        = "jr2-ca"
	// VolumeTmp is the Envoy sidecar's /tmp: Envoy binds its admin socket
	// there (hostlimits.AdminSocketDir; each render names its own file), which custodian envoy's stop drives,
	// and the root filesystem is read-only. An emptyDir in memory, mounted
	// in the Custodian container only (the agent never sees the socket).
	VolumeTmp = "custodian-tmp"
	// TmpDir is where VolumeTmp is mounted: the admin socket's directory.
	TmpDir = "/tmp"
	// HealthPort names the Custodian's health port, which both probes use.
	HealthPort = "health"
	// HealthPath is the health listener's route.
	HealthPath = "/healthz"
)

// tmpSize is VolumeTmp's sizeLimit: it holds one unix socket.
var tmpSize = resource.MustParse("1Mi")

// The pod's terminationGracePeriodSeconds. A native sidecar gets its
// SIGTERM only once the agent container has exited, from what is left of
// the pod's one grace period (at least 2 s, the kubelet's minimum). So the
// grace is the agent's own stop (AgentStopAllowance), then the Custodian's
// (hostlimits.StopGrace: requests in flight finish, then Envoy or custodian
// serve exits), then a margin for Envoy's own exit and the signals.
const (
	AgentStopAllowance = 15 * time.Second
	stopMargin         = 5 * time.Second
)

// TerminationGracePeriod is the Pod's terminationGracePeriodSeconds.
func TerminationGracePeriod() int64 {
	return int64((AgentStopAllowance + hostlimits.StopGrace + stopMargin) / time.Second)
}

// Files of the rendered directory the objects carry (render's names).
const (
	EnvoyFile     = "envoy.json"
	CustodianFile = "custodian.json"
	UpstreamFile  = "ca/upstream.crt"
	tlsDir        = "tls/"
)

// Keys of the trust ConfigMap.
const (
	TrustCA       = "ca.crt"
	TrustExtra    = "extra.crt"
	TrustBundle   = "bundle.crt"
	TrustUpstream = "upstream.crt"
	TrustWgetrc   = "wgetrc"
)

// Modes of the projected files. A value file and a leaf's key are 0400;
// the pod's fsGroup (the Custodian's gid) lets the kubelet give that group
// read too (0440), so the non-root Custodian reads them and no other uid
// in its container can.
const (
	modeSecret int32 = 0o400
	modePublic int32 = 0o444
)

// Leaf is one bound target's leaf and key, as render wrote them.
type Leaf struct {
	Target    string
	Cert, Key []byte
}

// Input is one render's result, as the objects need it.
type Input struct {
	Manifest *manifest.Manifest
	Config   *filter.Config
	// CustodianJSON is custodian.json's bytes, the file render wrote.
	CustodianJSON []byte
	// EnvoyJSON is the pod's envoy.json: the module data plane, loading
	// ModulePath, its files under Options.ConfigDir.
	EnvoyJSON []byte
	// HarnessEnv is harness.env's bytes, the file render wrote.
	HarnessEnv []byte
	// The trust files: CA is the user's --ca-bundle (empty when none).
	CA, Extra, Bundle, Upstream, Wgetrc []byte
	Leaves                              []Leaf
	Options
}

// Set is what Build makes: the objects in apply order, and the patch.
type Set struct {
	Objects []Object
	Patch   *PodTemplatePatch
	// Values are where each held secret's value comes from, the token's
	// last.
	Values []ValueRef
	// Notes are what the operator must know of these objects (a health
	// listener the kubelet cannot reach, local targets); no value.
	Notes []string
}

// ValueRef is where one held secret's value lives in the cluster.
type ValueRef struct {
	Held   string // the held name: the file in the value directory
	Secret string // the Secret's name
	Key    string // its key
	// Convention: the manifest named no valueFrom, so the Secret is the
	// pod's convention Secret, which the user creates.
	Convention bool
}

// ConventionSecret is the per-pod Secret a held secret without valueFrom
// is projected from (ADR-0059's jr2-held-secrets-<pod>); its key is the
// held name. Render never writes it: the user creates it, and this
// package never builds it.
func ConventionSecret(pod string) string { return "jr2-held-secrets-" + pod }

// CustodianConfigMap is the name of the pod's Custodian ConfigMap.
func CustodianConfigMap(pod string) string { return pod + "-custodian" }

// EnvoyConfigMap is the name of the ConfigMap that holds envoy.json alone
// when it and custodian.json do not fit in one (custodianConfigMaps).
func EnvoyConfigMap(pod string) string { return pod + "-custodian-envoy" }

// custodianConfigMaps holds custodian.json and envoy.json in the pod's
// Custodian ConfigMap while their data fits in MaxObjectBytes (what the
// API server allows a ConfigMap); beyond that (hundreds of targets),
// envoy.json moves to a ConfigMap of its own, EnvoyConfigMap, and the
// Custodian's volume projects both. Each is still held to the limit
// (Files).
func custodianConfigMaps(o Options, pod string, custodianJSON, envoyJSON []byte) []*corev1.ConfigMap {
	mk := func(name string, data map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{TypeMeta: coreType("ConfigMap"), ObjectMeta: o.meta(name, heldLabels(pod, ComponentConfig)), Data: data}
	}
	both := map[string]string{EnvoyFile: string(envoyJSON), CustodianFile: string(custodianJSON)}
	if dataSize(both, nil) <= MaxObjectBytes {
		return []*corev1.ConfigMap{mk(CustodianConfigMap(pod), both)}
	}
	return []*corev1.ConfigMap{
		mk(CustodianConfigMap(pod), map[string]string{CustodianFile: string(custodianJSON)}),
		mk(EnvoyConfigMap(pod), map[string]string{EnvoyFile: string(envoyJSON)}),
	}
}

// LeavesSecret is the name of the pod's i-th leaves Secret.
func LeavesSecret(pod string, i int) string { return pod + "-custodian-tls-" + strconv.Itoa(i) }

// Values is where each held secret's value comes from: the manifest's
// valueFrom, else the convention Secret; the Sandbox token last. Whether
// those Secrets exist is not checked here: the kubelet does not start a
// pod whose projected Secret is missing.
func Values(m *manifest.Manifest) []ValueRef {
	ref := func(held string, from *manifest.SecretKeyRef) ValueRef {
		if from != nil {
			return ValueRef{Held: held, Secret: from.Name, Key: from.Key}
		}
		return ValueRef{Held: held, Secret: ConventionSecret(m.Pod), Key: held, Convention: true}
	}
	var out []ValueRef
	for _, s := range m.Secrets {
		for _, n := range s.ValueNames() {
			if s.OAuth != nil || len(s.ValueNames()) > 1 {
				// one file per part, each a key of the convention Secret
				out = append(out, ref(n, nil))
				continue
			}
			out = append(out, ref(n, s.From))
		}
	}
	return append(out, ref(contract.TokenName, m.TokenFrom))
}

// Build makes the pod's objects and the patch. The objects of one pod, in
// apply order:
//
//	ConfigMap <pod>-custodian          envoy.json (core Envoy with the module, the pod's
//	                                   paths) and custodian.json; names, bindings, no value
//	                                   (envoy.json alone in <pod>-custodian-envoy when the
//	                                   two would pass MaxObjectBytes of data)
//	ConfigMap jr2-ca                   ca.crt, extra.crt, bundle.crt, upstream.crt, wgetrc
//	Secret    <pod>-custodian-tls-<i>  the bound targets' leaves and keys, at most
//	                                   LeavesPerSecret targets each (Opaque)
//	Pod       <pod>                    the agent container and the Custodian, a native
//	                                   sidecar (an init container, restartPolicy Always)
//
// The Custodian's stop works in the Pod: the envoy sidecar runs Envoy
// under custodian envoy (the documented start command), with an emptyDir
// in memory at /tmp in its container only for Envoy's admin socket;
// terminationGracePeriodSeconds is TerminationGracePeriod (the agent's
// stop, then hostlimits.StopGrace, then a margin).
func Build(in Input) (*Set, error) {
	o, err := in.Options.withDefaults()
	if err != nil {
		return nil, err
	}
	in.Options = o
	env, err := harnessEnv(in.HarnessEnv)
	if err != nil {
		return nil, err
	}
	health, note, err := healthPort(in.Config.Listeners.Health)
	if err != nil {
		return nil, err
	}
	pod := in.Manifest.Pod
	set := &Set{Values: Values(in.Manifest)}
	if note != "" {
		set.Notes = append(set.Notes, note)
	}
	if in.Config.LocalTargets {
		set.Notes = append(set.Notes, "custodian.json accepts local targets (--allow-local-targets): the objects in "+Dir+"/ are for a test on one machine, never for a cluster, where the agent shares the pod's loopback")
	}
	configs := custodianConfigMaps(o, pod, in.CustodianJSON, in.EnvoyJSON)
	if err := checkKeys(set.Values, in.Leaves); err != nil {
		return nil, err
	}
	leaves := leafSecrets(o, pod, in.Leaves)
	trust := &corev1.ConfigMap{
		TypeMeta:   coreType("ConfigMap"),
		ObjectMeta: o.meta(TrustConfigMap, map[string]string{LabelComponent: ComponentTrust}),
		Data: map[string]string{
			TrustCA: string(in.CA), TrustExtra: string(in.Extra), TrustBundle: string(in.Bundle),
			TrustUpstream: string(in.Upstream), TrustWgetrc: string(in.Wgetrc),
		},
	}
	spec := podSpec(in, env, health, configs, leaves)
	digest := configDigest(configs, trust, leaves)
	p := &corev1.Pod{
		TypeMeta:   coreType("Pod"),
		ObjectMeta: o.meta(pod, heldLabels(pod, ComponentPod)),
		Spec:       spec,
	}
	p.Annotations = map[string]string{AnnotationDigest: digest}
	for _, cm := range configs {
		set.Objects = append(set.Objects, cm)
	}
	set.Objects = append(set.Objects, trust)
	for _, s := range leaves {
		set.Objects = append(set.Objects, s)
	}
	set.Objects = append(set.Objects, p)
	set.Patch = patchOf(pod, spec, digest)
	return set, nil
}

func heldLabels(pod, component string) map[string]string {
	return map[string]string{LabelHeldPod: pod, LabelComponent: component}
}

// leafSecrets puts the leaves, in target order, LeavesPerSecret to a
// Secret: keys <base>.crt and <base>.key (contract.LeafBase without tls/).
func leafSecrets(o Options, pod string, leaves []Leaf) []*corev1.Secret {
	var out []*corev1.Secret
	for i := 0; i < len(leaves); i += LeavesPerSecret {
		s := &corev1.Secret{
			TypeMeta:   coreType("Secret"),
			ObjectMeta: o.meta(LeavesSecret(pod, len(out)), heldLabels(pod, ComponentLeaves)),
			Type:       corev1.SecretTypeOpaque,
			Data:       map[string][]byte{},
		}
		for _, l := range leaves[i:min(i+LeavesPerSecret, len(leaves))] {
			cert, key := leafKeys(l.Target)
			s.Data[cert] = l.Cert
			s.Data[key] = l.Key
		}
		out = append(out, s)
	}
	return out
}

// checkKeys refuses a Secret key the API server would refuse (more than
// 253 characters): a held name is up to 256 (manifest), and a leaf's key
// is its host and port.
func checkKeys(values []ValueRef, leaves []Leaf) error {
	for _, v := range values {
		if v.Convention && !manifest.SecretKey(v.Key) {
			return fmt.Errorf("held secret %s: its name is the key of %s, and a Secret key has at most 253 characters; shorten the name, or give it a valueFrom", v.Held, v.Secret)
		}
	}
	for _, l := range leaves {
		if cert, _ := leafKeys(l.Target); !manifest.SecretKey(cert) {
			return fmt.Errorf("bound target %s: its leaf's key in the leaves Secret would be %d characters, and a Secret key has at most 253; bind a shorter host name", l.Target, len(cert))
		}
	}
	return nil
}

// leafKeys are a target's keys in its leaves Secret; under tls/ they are
// the files render writes and both hosts read.
func leafKeys(target string) (cert, key string) {
	base := path.Base(filepathToSlash(contract.LeafBase(target)))
	return base + ".crt", base + ".key"
}

func filepathToSlash(p string) string { return strings.ReplaceAll(p, "\\", "/") }

// harnessEnv reads harness.env into the agent's env, in order. A value
// with "$(" or "$$" would be expanded by the kubelet, so the env would not
// be harness.env: render never writes one, and Build refuses it.
func harnessEnv(b []byte) ([]corev1.EnvVar, error) {
	var env []corev1.EnvVar
	for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("harness.env: a line without '=' (a bug in render)")
		}
		if strings.Contains(v, "$(") || strings.Contains(v, "$$") {
			return nil, fmt.Errorf("harness.env: %s holds \"$(\" or \"$$\", which the kubelet would expand (a bug in render)", k)
		}
		env = append(env, corev1.EnvVar{Name: k, Value: v})
	}
	return env, nil
}

// healthPort is the health listener's port, and a note when its address
// is one the kubelet cannot reach (not every interface): the probes would
// then never pass.
func healthPort(addr string) (port int32, note string, err error) {
	host, p, err := net.SplitHostPort(addr)
	n, perr := strconv.Atoi(p)
	if err != nil || perr != nil || n < 1 || n > 65535 {
		return 0, "", fmt.Errorf("custodian.json's health listener %q is not host:port (a bug in render)", addr)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsUnspecified() {
		note = fmt.Sprintf("the health listener is on %s, which the kubelet's probes of the pod's IP never reach, so the Pod in %s/ would never be ready; render it with --health 0.0.0.0:%d (the default) for a cluster", addr, Dir, n)
	}
	return int32(n), note, nil
}

// podSpec is the pod: the Custodian as a native sidecar, the agent, their
// volumes. The patch takes its parts from here, so the two cannot drift.
func podSpec(in Input, env []corev1.EnvVar, health int32, configs []*corev1.ConfigMap, leaves []*corev1.Secret) corev1.PodSpec {
	o := in.Options
	always := corev1.ContainerRestartPolicyAlways
	gid := CustodianUID
	mounts := []corev1.VolumeMount{
		{Name: VolumeConfig, MountPath: o.ConfigDir, ReadOnly: true},
		{Name: VolumeValues, MountPath: o.ValuesDir, ReadOnly: true},
	}
	var tmp []corev1.Volume
	if o.Sidecar != SidecarServe {
		mounts = append(mounts, corev1.VolumeMount{Name: VolumeTmp, MountPath: TmpDir})
		tmp = []corev1.Volume{{Name: VolumeTmp, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
			Medium: corev1.StorageMediumMemory, SizeLimit: &tmpSize,
		}}}}
	}
	return corev1.PodSpec{
		AutomountServiceAccountToken:  ptr(false),
		ShareProcessNamespace:         ptr(false),
		EnableServiceLinks:            ptr(false),
		TerminationGracePeriodSeconds: ptr(TerminationGracePeriod()),
		SecurityContext: &corev1.PodSecurityContext{
			FSGroup:        &gid,
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		InitContainers: []corev1.Container{{
			Name:           CustodianContainer,
			Image:          o.CustodianImage,
			Command:        sidecarCommand(o),
			Args:           sidecarArgs(o),
			RestartPolicy:  &always,
			Ports:          []corev1.ContainerPort{{Name: HealthPort, ContainerPort: health, Protocol: corev1.ProtocolTCP}},
			StartupProbe:   probe(1, 120),
			ReadinessProbe: probe(5, 3),
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("512Mi")},
			},
			VolumeMounts:    mounts,
			SecurityContext: hardened(CustodianUID),
		}},
		Containers: []corev1.Container{agentContainer(o, env)},
		Volumes: append([]corev1.Volume{
			{Name: VolumeConfig, VolumeSource: corev1.VolumeSource{Projected: configVolume(in, configs, leaves)}},
			{Name: VolumeValues, VolumeSource: corev1.VolumeSource{Projected: valuesVolume(in.Manifest)}},
			{Name: VolumeTrust, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: TrustConfigMap},
				DefaultMode:          ptr(modePublic),
			}}},
		}, tmp...),
	}
}

// agentContainer is the user's agent: its env exactly harness.env, the
// trust ConfigMap where those variables point, and nothing else mounted.
func agentContainer(o Options, env []corev1.EnvVar) corev1.Container {
	return corev1.Container{
		Name:         o.AgentContainer,
		Image:        o.AgentImage,
		Env:          env,
		VolumeMounts: []corev1.VolumeMount{{Name: VolumeTrust, MountPath: o.HarnessCADir, ReadOnly: true}},
		SecurityContext: &corev1.SecurityContext{
			RunAsUser:    ptr(o.AgentUID),
			RunAsNonRoot: ptr(o.AgentUID != 0),
		},
	}
}

// SidecarCommand and sidecarArgs start the sidecar as the recipes do:
// Envoy under custodian envoy (the documented start command,
// envoy/README.md, which gives Envoy custodian serve's stop through the
// admin socket in VolumeTmp) on the pod's envoy.json (one worker, no hot
// restart, log lines that are the message alone on stdout, the drain
// custodian envoy drives), or custodian serve on its custodian.json
// (leaves and ca/ beside it).
func sidecarCommand(o Options) []string {
	if o.Sidecar == SidecarServe {
		return []string{CustodianBinary}
	}
	return []string{CustodianBinary, "envoy", "--", EnvoyBinary}
}

// LogFlushMillis bounds how long a line waits in Envoy's log buffer: with
// --log-path Envoy writes its log (the module's jr2.custodian lines among
// it) through its buffered file writer, one write per flush rather than
// one per line (a write per line measured 5 to 17 µs per intercepted
// request);
// Envoy's own default flush interval is 10 s.
const LogFlushMillis = 1000

func sidecarArgs(o Options) []string {
	if o.Sidecar == SidecarServe {
		return []string{"serve", "--config", path.Join(o.ConfigDir, CustodianFile)}
	}
	return []string{"-c", path.Join(o.ConfigDir, EnvoyFile), "--concurrency", "1", "--disable-hot-restart",
		"--log-format", "%v", "--log-path", "/dev/stdout", "--file-flush-interval-msec", strconv.Itoa(LogFlushMillis),
		"--drain-strategy", "immediate", "--drain-time-s", strconv.Itoa(int(hostlimits.StopGrace / time.Second))}
}

// probe is a GET of the health listener's /healthz.
func probe(period, failures int32) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: HealthPath, Port: intstr.FromString(HealthPort), Scheme: corev1.URISchemeHTTP,
		}},
		PeriodSeconds:    period,
		TimeoutSeconds:   1,
		FailureThreshold: failures,
	}
}

// configVolume lays out the rendered directory's Custodian side at
// ConfigDir: custodian.json and envoy.json from the pod's ConfigMap, each
// leaf under tls/ from its Secret (keys 0400), and ca/upstream.crt from
// the trust ConfigMap.
func configVolume(in Input, configs []*corev1.ConfigMap, leaves []*corev1.Secret) *corev1.ProjectedVolumeSource {
	var src []corev1.VolumeProjection
	for _, cm := range configs {
		var items []corev1.KeyToPath
		for _, k := range []string{CustodianFile, EnvoyFile} {
			if _, ok := cm.Data[k]; ok {
				items = append(items, corev1.KeyToPath{Key: k, Path: k})
			}
		}
		src = append(src, corev1.VolumeProjection{ConfigMap: &corev1.ConfigMapProjection{
			LocalObjectReference: corev1.LocalObjectReference{Name: cm.Name}, Items: items,
		}})
	}
	for i, s := range leaves {
		var items []corev1.KeyToPath
		for _, l := range in.Leaves[i*LeavesPerSecret : min((i+1)*LeavesPerSecret, len(in.Leaves))] {
			cert, key := leafKeys(l.Target)
			items = append(items,
				corev1.KeyToPath{Key: cert, Path: tlsDir + cert},
				corev1.KeyToPath{Key: key, Path: tlsDir + key, Mode: ptr(modeSecret)})
		}
		src = append(src, corev1.VolumeProjection{Secret: &corev1.SecretProjection{
			LocalObjectReference: corev1.LocalObjectReference{Name: s.Name}, Items: items,
		}})
	}
	src = append(src, corev1.VolumeProjection{ConfigMap: &corev1.ConfigMapProjection{
		LocalObjectReference: corev1.LocalObjectReference{Name: TrustConfigMap},
		Items:                []corev1.KeyToPath{{Key: TrustUpstream, Path: UpstreamFile}},
	}})
	return &corev1.ProjectedVolumeSource{Sources: src, DefaultMode: ptr(modePublic)}
}

// valuesVolume projects each held secret's value, the token's included,
// from the user's Secret as the file named after the held secret, 0400.
// Items of one Secret share one source, in the order first named.
func valuesVolume(m *manifest.Manifest) *corev1.ProjectedVolumeSource {
	var src []corev1.VolumeProjection
	at := map[string]int{}
	for _, v := range Values(m) {
		i, ok := at[v.Secret]
		if !ok {
			i = len(src)
			at[v.Secret] = i
			src = append(src, corev1.VolumeProjection{Secret: &corev1.SecretProjection{
				LocalObjectReference: corev1.LocalObjectReference{Name: v.Secret},
			}})
		}
		s := src[i].Secret
		s.Items = append(s.Items, corev1.KeyToPath{Key: v.Key, Path: v.Held, Mode: ptr(modeSecret)})
	}
	return &corev1.ProjectedVolumeSource{Sources: src, DefaultMode: ptr(modeSecret)}
}

// PodTemplatePatch is a strategic-merge patch of a Deployment, StatefulSet
// or Job: spec.template gains the Custodian sidecar, its volumes, the
// agent container's env, trust mount and uid (merged by the container's
// name), and the pod-level settings — the same values as the Pod, built
// by the same functions (podSpec).
type PodTemplatePatch struct {
	Spec PatchSpec `json:"spec"`
}

// PatchSpec is the patch's spec.
type PatchSpec struct {
	Template corev1.PodTemplateSpec `json:"template"`
}

func patchOf(pod string, spec corev1.PodSpec, digest string) *PodTemplatePatch {
	agent := spec.Containers[0]
	agent.Image = "" // the user's own
	spec.Containers = []corev1.Container{agent}
	return &PodTemplatePatch{Spec: PatchSpec{Template: corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{
			Labels:      map[string]string{LabelHeldPod: pod},
			Annotations: map[string]string{AnnotationDigest: digest},
		},
		Spec: spec,
	}}}
}

// AnnotationDigest is the Pod's (and the patched template's) digest of
// what its Custodian reads once at start from the objects: its ConfigMaps,
// jr2-ca, and the leaves' certificates (a new key comes with a new
// certificate). A re-render that changes any of them changes the
// template, so a Deployment patched with it rolls. Public bytes only: no
// key and no value is hashed, and a value is never seen here.
const AnnotationDigest = "jr2.dev/config-digest"

func configDigest(configs []*corev1.ConfigMap, trust *corev1.ConfigMap, leaves []*corev1.Secret) string {
	h := sha256.New()
	// Each of k and v as its length, ':' and itself: the bytes
	// fmt.Fprintf(h, "%d:%s%d:%s", …) wrote, without its copy of each
	// value (envoy.json's megabyte among them) into a buffer of its own.
	put := func(k, v string) {
		for _, s := range [2]string{k, v} {
			io.WriteString(h, strconv.Itoa(len(s)))
			io.WriteString(h, ":")
			io.WriteString(h, s)
		}
	}
	for _, cm := range append(append([]*corev1.ConfigMap(nil), configs...), trust) {
		put("configmap", cm.Name)
		for _, k := range slices.Sorted(maps.Keys(cm.Data)) {
			put(k, cm.Data[k])
		}
	}
	for _, s := range leaves {
		put("secret", s.Name)
		for _, k := range slices.Sorted(maps.Keys(s.Data)) {
			if strings.HasSuffix(k, ".crt") {
				put(k, string(s.Data[k]))
			}
		}
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

func ptr[T any](v T) *T { return &v }

// hardened is the security context of every container this package runs
// (the Custodian, the Effector): uid and gid uid, never root, a read-only
// root file system, no privilege escalation, every capability dropped and
// the runtime's default seccomp profile.
func hardened(uid int64) *corev1.SecurityContext {
	return &corev1.SecurityContext{
		RunAsUser:                ptr(uid),
		RunAsGroup:               ptr(uid),
		RunAsNonRoot:             ptr(true),
		ReadOnlyRootFilesystem:   ptr(true),
		AllowPrivilegeEscalation: ptr(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}
