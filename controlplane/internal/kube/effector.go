package kube

import (
	"bytes"
	"encoding/pem"
	"errors"
	"fmt"
	"path"
	"strconv"

	"jr2.dev/boundary/controlplane/internal/pki"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"jr2.dev/boundary/effector/effectorconf"
)

// The Effector's paths in its container, and its port.
const (
	EffectorPort       = 8082
	effectorKeyDir     = "/etc/jr2/effector/key"
	effectorKeyFile    = "effector-key"
	effectorConfigDir  = "/etc/jr2/effector/config"
	effectorConfigFile = "effector.json"
	effectorSecrets    = "/etc/jr2/effector/secrets"
	effectorCADir      = "/etc/jr2/effector/ca"
	effectorTmp        = "/tmp"
	DefaultEffectorImg = "jr2-effector"
	DefaultDrain       = 30
)

// EffectorOptions are the Effector's objects' inputs beside effector.json.
type EffectorOptions struct {
	Namespace string
	Image     string // default DefaultEffectorImg
	// KeySecret and KeyKey name the user's Secret and key holding the
	// placement key (controlplane key's output); default
	// <name>-key / effector-key.
	KeySecret, KeyKey string
	// SecretsSecret is the user's Secret whose keys are the effect
	// secrets effector.json names; default <name>-secrets.
	SecretsSecret string
	// Drain is JR2_EFFECTOR_DRAIN_SECONDS; 0 is DefaultDrain.
	Drain int
	// CA is --ca-file's PEM bundle: the roots the Effector trusts for its
	// https targets beside the image's system roots (JR2_CA_FILE). nil
	// renders neither the CA ConfigMap nor JR2_CA_FILE.
	CA []byte
}

// EffectorCAConfigMap is the name of the Effector's CA ConfigMap: its
// own, not the pods' jr2-ca, which one render of a namespace's pods owns
// and whose last apply wins.
func EffectorCAConfigMap(placement string) string { return EffectorName(placement) + "-ca" }

// effectorCA reads --ca-file's bundle with pki.ReadCerts, the reader of
// render's --ca-bundle, and words each fault for this flag; what the
// ConfigMap holds is the certificates encoded
// again, so no byte of the file but theirs (text between blocks, which
// PEM skips) can reach it.
func effectorCA(b []byte) ([]byte, error) {
	certs, err := pki.ReadCerts(b)
	var ce *pki.CertsError
	if errors.As(err, &ce) {
		switch ce.Fault {
		case pki.NotCertificate:
			return nil, fmt.Errorf("--ca-file: block %d is a %q block; a ConfigMap holds public certificates only: pass the CA's certificates, never its key", ce.Block, ce.Type)
		case pki.NotParsed:
			return nil, fmt.Errorf("--ca-file: certificate %d does not parse; pass the PEM certificates your https targets chain to", ce.Block)
		case pki.NoCertificate:
			return nil, errors.New("--ca-file: no PEM certificate found; pass a PEM file of the certificates your https targets chain to, or drop --ca-file")
		}
		return nil, errors.New("--ca-file: text after the last PEM block is not PEM; pass a PEM file of certificates only")
	}
	if err != nil {
		return nil, fmt.Errorf("--ca-file: %v", err)
	}
	var out bytes.Buffer
	for _, c := range certs {
		pem.Encode(&out, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return out.Bytes(), nil
}

// EffectorName is the objects' name: jr2-instance-effector for the
// instance placement (ADR-0068), else <placement>-effector.
func EffectorName(placement string) string {
	if placement == "instance" {
		return "jr2-instance-effector"
	}
	return placement + "-effector"
}

// Effector builds the Effector's objects from effector.json: a ConfigMap
// holding it, a Deployment running effector, and a headless Service for
// the signed wire; with o.CA, a ConfigMap of its certificates (ca.crt,
// public, as the pods' jr2-ca) mounted read-only where JR2_CA_FILE points. Its placement key and effect secrets are 0400 projected
// items of the user's Secrets, never env values or argv; POD_NAME, POD_IP
// and NODE_NAME come from the downward API; readiness is GET /healthz;
// terminationGracePeriodSeconds is the drain plus 5 s.
//
// The security context, and why it suits the confinement: a credentialed
// command's child is confined by effector-confine with Landlock, which an
// unprivileged process may apply once no_new_privs is set — which
// allowPrivilegeEscalation: false sets, and the confiner sets again — so
// the Effector needs no capability (all dropped), no root (65532) and no
// writable root (the scratch is an emptyDir); RuntimeDefault seccomp
// admits the Landlock system calls on the kernels ADR-0068 measured.
//
// Refused: "commands": true or "pushes", which need the agent's worktree
// (JR2_EFFECTOR_WORK), which only a container in the agent's own pod
// can see; render that Effector into the agent's pod by hand.
func Effector(raw []byte, o EffectorOptions) (*Set, error) {
	f, err := effectorconf.Parse(raw)
	if err != nil {
		return nil, err
	}
	if f.Commands || len(f.Pushes) > 0 {
		return nil, fmt.Errorf("effector.json: commands or pushes need the agent's worktree (%s), which a Deployment of its own never sees; these objects serve http effects only: write commands false and no pushes, or run the Effector in the agent's pod", "JR2_EFFECTOR_WORK")
	}
	if !dnsLabel(f.Placement) || len(EffectorName(f.Placement)) > 63 {
		return nil, fmt.Errorf("effector.json: placement %q names the objects; use lowercase letters, digits and '-' (at most 54)", f.Placement)
	}
	if o.Namespace != "" && !dnsLabel(o.Namespace) {
		return nil, fmt.Errorf("--namespace %q is not a namespace name; use lowercase letters, digits and '-' (at most 63)", o.Namespace)
	}
	var ca []byte
	if o.CA != nil {
		if ca, err = effectorCA(o.CA); err != nil {
			return nil, err
		}
	}
	name := EffectorName(f.Placement)
	if o.Image == "" {
		o.Image = DefaultEffectorImg
	}
	if o.KeySecret == "" {
		o.KeySecret = name + "-key"
	}
	if o.KeyKey == "" {
		o.KeyKey = effectorKeyFile
	}
	if o.SecretsSecret == "" {
		o.SecretsSecret = name + "-secrets"
	}
	if o.Drain <= 0 {
		o.Drain = DefaultDrain
	}
	labels := map[string]string{LabelComponent: ComponentEffector, "jr2.dev/effector": name}
	meta := func(n string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: n, Namespace: o.Namespace, Labels: labels}
	}
	cm := &corev1.ConfigMap{TypeMeta: coreType("ConfigMap"), ObjectMeta: meta(name), Data: map[string]string{effectorConfigFile: string(raw)}}
	var items []corev1.KeyToPath
	for _, s := range f.Secrets {
		items = append(items, corev1.KeyToPath{Key: s, Path: s, Mode: ptr(modeSecret)})
	}
	volumes := []corev1.Volume{
		{Name: "key", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{DefaultMode: ptr(modeSecret), Sources: []corev1.VolumeProjection{{Secret: &corev1.SecretProjection{
			LocalObjectReference: corev1.LocalObjectReference{Name: o.KeySecret},
			Items:                []corev1.KeyToPath{{Key: o.KeyKey, Path: effectorKeyFile, Mode: ptr(modeSecret)}},
		}}}}}},
		{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}, DefaultMode: ptr(modePublic)}}},
		{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	mounts := []corev1.VolumeMount{
		{Name: "key", MountPath: effectorKeyDir, ReadOnly: true},
		{Name: "config", MountPath: effectorConfigDir, ReadOnly: true},
		{Name: "tmp", MountPath: effectorTmp},
	}
	env := []corev1.EnvVar{
		{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
		{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
		{Name: "JR2_EFFECTOR_PORT", Value: strconv.Itoa(EffectorPort)},
		{Name: "JR2_EFFECTOR_KEY", Value: path.Join(effectorKeyDir, effectorKeyFile)},
		{Name: "JR2_EFFECTOR_CONFIG", Value: path.Join(effectorConfigDir, effectorConfigFile)},
		{Name: "JR2_EFFECTOR_DRAIN_SECONDS", Value: strconv.Itoa(o.Drain)},
		{Name: "HOME", Value: effectorTmp},
		{Name: "TMPDIR", Value: effectorTmp},
	}
	if len(items) > 0 {
		volumes = append(volumes, corev1.Volume{Name: "secrets", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			DefaultMode: ptr(modeSecret),
			Sources:     []corev1.VolumeProjection{{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: o.SecretsSecret}, Items: items}}},
		}}})
		mounts = append(mounts, corev1.VolumeMount{Name: "secrets", MountPath: effectorSecrets, ReadOnly: true})
		env = append(env, corev1.EnvVar{Name: "JR2_EFFECTOR_SECRETS", Value: effectorSecrets})
	}
	var caMap *corev1.ConfigMap
	if ca != nil {
		caMap = &corev1.ConfigMap{TypeMeta: coreType("ConfigMap"), ObjectMeta: meta(EffectorCAConfigMap(f.Placement)), Data: map[string]string{TrustCA: string(ca)}}
		volumes = append(volumes, corev1.Volume{Name: "ca", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			DefaultMode: ptr(modePublic),
			Sources: []corev1.VolumeProjection{{ConfigMap: &corev1.ConfigMapProjection{
				LocalObjectReference: corev1.LocalObjectReference{Name: caMap.Name},
				Items:                []corev1.KeyToPath{{Key: TrustCA, Path: TrustCA, Mode: ptr(modePublic)}},
			}}},
		}}})
		mounts = append(mounts, corev1.VolumeMount{Name: "ca", MountPath: effectorCADir, ReadOnly: true})
		env = append(env, corev1.EnvVar{Name: "JR2_CA_FILE", Value: path.Join(effectorCADir, TrustCA)})
	}
	uid := EffectorUID
	grace := int64(o.Drain + 5)
	surge, unavailable := intstr.FromInt32(1), intstr.FromInt32(0)
	dep := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: appsv1.SchemeGroupVersion.String(), Kind: "Deployment"},
		ObjectMeta: meta(name),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"jr2.dev/effector": name}},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &surge, MaxUnavailable: &unavailable}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					AutomountServiceAccountToken:  ptr(false),
					EnableServiceLinks:            ptr(false),
					TerminationGracePeriodSeconds: &grace,
					SecurityContext: &corev1.PodSecurityContext{
						FSGroup:        &uid,
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Containers: []corev1.Container{{
						Name:    "effector",
						Image:   o.Image,
						Command: []string{EffectorBinary},
						Env:     env,
						Ports:   []corev1.ContainerPort{{Name: "wire", ContainerPort: EffectorPort, Protocol: corev1.ProtocolTCP}},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: HealthPath, Port: intstr.FromString("wire"), Scheme: corev1.URISchemeHTTP}},
							PeriodSeconds: 1, TimeoutSeconds: 1, FailureThreshold: 3,
						},
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
							Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("256Mi")},
						},
						VolumeMounts:    mounts,
						SecurityContext: hardened(uid),
					}},
					Volumes: volumes,
				},
			},
		},
	}
	svc := &corev1.Service{
		TypeMeta:   coreType("Service"),
		ObjectMeta: meta(name),
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			PublishNotReadyAddresses: true,
			Selector:                 map[string]string{"jr2.dev/effector": name},
			Ports:                    []corev1.ServicePort{{Name: "wire", Port: EffectorPort, TargetPort: intstr.FromString("wire"), Protocol: corev1.ProtocolTCP}},
		},
	}
	set := &Set{Objects: []Object{cm, dep, svc}}
	if caMap != nil {
		set.Objects = append(set.Objects, caMap)
	}
	set.Values = append(set.Values, ValueRef{Held: effectorKeyFile, Secret: o.KeySecret, Key: o.KeyKey})
	for _, s := range f.Secrets {
		set.Values = append(set.Values, ValueRef{Held: s, Secret: o.SecretsSecret, Key: s})
	}
	return set, nil
}
