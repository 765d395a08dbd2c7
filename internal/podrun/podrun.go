// Package podrun runs a container of a Pod object, as an API server holds
// it, as a process on this machine: the way a kubelet and a container
// runtime would start it on a node, with no kubelet, runtime or image here.
// Tests use it to prove that what is applied is what works.
//
// # What a container gets
//
//   - Its volumes, laid out from the API server's objects by kubelayout
//     (the atomic writer's ..data, items, modes, fsGroup), once per Pod.
//   - Its mounts, in a mount namespace of its own (private, so nothing
//     propagates back), over a root directory on a fresh tmpfs that holds
//     this machine's /usr, /etc and the other system directories,
//     read-only, in place of an image's; Options.Image bind-mounts the
//     files the image's recipe places (its binaries) at their paths. With
//     readOnlyRootFilesystem the root is made read-only after the mounts.
//   - The Pod's network namespace: one per Pod, loopback up, shared by its
//     containers, so 127.0.0.1 is the pod's own, as in a cluster.
//   - Its command and args, with $(VAR) expanded from its env as the
//     kubelet does; its env (values, secretKeyRef and configMapKeyRef from
//     the objects, fieldRef metadata.name and metadata.namespace), after
//     PATH and HOSTNAME as a runtime sets them; its workingDir.
//   - Its user: runAsUser and runAsGroup (the container's over the Pod's;
//     0 when neither says), the supplementary groups the Pod's fsGroup and
//     supplementalGroups give, and no_new_privs when
//     allowPrivilegeEscalation is false; its stdout and stderr are given
//     to that user, as runc does, so it can open /dev/stdout. A container
//     with runAsNonRoot that would run as uid 0 is refused, as the kubelet
//     refuses it.
//
// # Invariant
//
// Every path, value, mode and identity the process sees comes from the Pod
// and the objects given, except the image files Options names and this
// machine's system directories standing in for the image's. The child
// process is this test binary (Child must run first in TestMain); its
// mount namespace, and everything mounted in it, ends with the process.
//
// # Not modelled
//
// Capabilities beyond what a non-root uid loses at exec, seccomp and
// AppArmor profiles, resource limits, cgroups, a PID namespace, the image's
// own users and groups, the pod's IP (a probe reaches 127.0.0.1 in the
// pod's network namespace), and restarts.
package podrun

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"jr2.dev/boundary/internal/kubelayout"
)

// defaultPath is the PATH a container runtime sets when the image sets
// none (containerd's oci.DefaultUnixEnv).
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Env is the environment the runtime gives container c of pod: PATH and
// HOSTNAME, then c's env in order, each value expanded against those
// before it and read from the objects where it says valueFrom.
func Env(pod *corev1.Pod, c *corev1.Container, objs kubelayout.Objects) ([]string, error) {
	vars := map[string]string{"PATH": defaultPath, "HOSTNAME": pod.Name}
	order := []string{"PATH", "HOSTNAME"}
	for _, e := range c.Env {
		v, err := envValue(pod, c, e, vars, objs)
		if err != nil {
			return nil, err
		}
		if _, ok := vars[e.Name]; !ok {
			order = append(order, e.Name)
		}
		vars[e.Name] = v
	}
	env := make([]string, 0, len(order))
	for _, k := range order {
		env = append(env, k+"="+vars[k])
	}
	return env, nil
}

func envValue(pod *corev1.Pod, c *corev1.Container, e corev1.EnvVar, vars map[string]string, objs kubelayout.Objects) (string, error) {
	from := e.ValueFrom
	if from == nil {
		return Expand(e.Value, vars), nil
	}
	switch {
	case from.SecretKeyRef != nil:
		s, ok := objs.Secrets[from.SecretKeyRef.Name]
		if !ok {
			return "", fmt.Errorf("podrun: container %q, env %s: Secret %q not found", c.Name, e.Name, from.SecretKeyRef.Name)
		}
		v, ok := s.Data[from.SecretKeyRef.Key]
		if !ok {
			return "", fmt.Errorf("podrun: container %q, env %s: Secret %q has no key %q", c.Name, e.Name, from.SecretKeyRef.Name, from.SecretKeyRef.Key)
		}
		return string(v), nil
	case from.ConfigMapKeyRef != nil:
		cm, ok := objs.ConfigMaps[from.ConfigMapKeyRef.Name]
		if !ok {
			return "", fmt.Errorf("podrun: container %q, env %s: ConfigMap %q not found", c.Name, e.Name, from.ConfigMapKeyRef.Name)
		}
		v, ok := cm.Data[from.ConfigMapKeyRef.Key]
		if !ok {
			return "", fmt.Errorf("podrun: container %q, env %s: ConfigMap %q has no key %q", c.Name, e.Name, from.ConfigMapKeyRef.Name, from.ConfigMapKeyRef.Key)
		}
		return v, nil
	case from.FieldRef != nil && from.FieldRef.FieldPath == "metadata.name":
		return pod.Name, nil
	case from.FieldRef != nil && from.FieldRef.FieldPath == "metadata.namespace":
		return pod.Namespace, nil
	}
	return "", fmt.Errorf("podrun: container %q, env %s: only secretKeyRef, configMapKeyRef and fieldRef metadata.name or metadata.namespace are modelled", c.Name, e.Name)
}

// Expand is the kubelet's expansion of a command, an arg or an env value:
// $(NAME) becomes NAME's value when NAME is defined and stays as written
// when not; $$ is one $; any other $ is itself.
func Expand(s string, vars map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := vars[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// Argv is the process a container starts: its command and args, each
// expanded against env (Env's result). A container without a command
// runs its image's entrypoint, which podrun does not know.
func Argv(c *corev1.Container, env []string) ([]string, error) {
	if len(c.Command) == 0 {
		return nil, fmt.Errorf("podrun: container %q has no command; its image's entrypoint is not known here", c.Name)
	}
	vars := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	var argv []string
	for _, a := range append(append([]string(nil), c.Command...), c.Args...) {
		argv = append(argv, Expand(a, vars))
	}
	return argv, nil
}

// Identity is the uid, gid and supplementary groups a container runs as,
// and whether it may gain privileges.
type Identity struct {
	UID, GID   uint32
	Groups     []uint32
	NoNewPrivs bool
}

// checkNonRoot is the kubelet's runAsNonRoot check: a container that must
// not run as root and would run as uid 0 is not started.
func checkNonRoot(pod *corev1.Pod, c *corev1.Container, id Identity) error {
	var nonRoot *bool
	if psc := pod.Spec.SecurityContext; psc != nil {
		nonRoot = psc.RunAsNonRoot
	}
	if sc := c.SecurityContext; sc != nil && sc.RunAsNonRoot != nil {
		nonRoot = sc.RunAsNonRoot
	}
	if nonRoot != nil && *nonRoot && id.UID == 0 {
		return fmt.Errorf("podrun: container %q has runAsNonRoot and would run as root (uid 0): the kubelet does not start it", c.Name)
	}
	return nil
}

// identityOf reads the container's and the Pod's security contexts.
func identityOf(pod *corev1.Pod, c *corev1.Container) Identity {
	var id Identity
	var uid, gid *int64
	if psc := pod.Spec.SecurityContext; psc != nil {
		uid, gid = psc.RunAsUser, psc.RunAsGroup
		for _, g := range psc.SupplementalGroups {
			id.Groups = append(id.Groups, uint32(g))
		}
		if psc.FSGroup != nil {
			id.Groups = append(id.Groups, uint32(*psc.FSGroup))
		}
	}
	if sc := c.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			uid = sc.RunAsUser
		}
		if sc.RunAsGroup != nil {
			gid = sc.RunAsGroup
		}
		id.NoNewPrivs = sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation
	}
	if uid != nil {
		id.UID = uint32(*uid)
	}
	if gid != nil {
		id.GID = uint32(*gid)
	}
	return id
}

// Container finds the container called name among the Pod's init
// containers (a native sidecar is one) and its containers.
func Container(pod *corev1.Pod, name string) (*corev1.Container, error) {
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i], nil
		}
	}
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i], nil
		}
	}
	return nil, fmt.Errorf("podrun: pod %q has no container %q", pod.Name, name)
}
