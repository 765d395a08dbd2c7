// Package kubelayout lays out a Pod's volumes on this machine's disk the way
// the kubelet does on a node, from the typed objects an API server holds, so
// a test can run a container's own command against the files a cluster
// would give it — there is no kubelet here.
//
// # What it models
//
//   - ConfigMap, Secret and projected (ConfigMap and Secret sources) volumes,
//     through the kubelet's atomic writer (Write): the files live in a
//     timestamped directory ..<UTC time>.<random>, the symlink ..data points
//     at it, and each visible top-level name is a symlink ..data/<name>.
//     Items pick keys and name their paths; an item's mode wins over the
//     volume's defaultMode; an optional source that is missing projects
//     nothing; a missing key of a source that is not optional is an error,
//     as it keeps the kubelet's container from starting.
//   - The pod's fsGroup: the volume goes to that group and each file gains
//     the group read bits (0440), as SetVolumeOwnership does.
//   - emptyDir volumes, as an empty directory (mode 0777).
//   - A container's volumeMounts (Layout): each mount's source on this
//     machine, subPath resolved through the volume's symlinks and kept
//     inside it, and read-only where the Pod says so or the volume kind
//     requires it (ConfigMap, Secret and projected volumes always are);
//     the directories a volume needs for other volumes mounted beneath it
//     (MakeNestedMountpoints); and the mounts in the order a container
//     runtime makes them (containerd's: by depth, stable), a parent first.
//
// Writing again to a laid-out directory is the kubelet's update of a
// mounted ConfigMap or Secret (Write's rotation).
//
// # Invariant
//
// Every byte and mode laid out comes from the Pod and the objects given; a
// default the API server applies (defaultMode 0644) is not re-applied here,
// so a Pod that was not read back from a server is refused, not guessed.
// Errors name the volume, object and key, never a value.
//
// # Not modelled
//
// Other volume kinds and projected sources (downward API, service-account
// tokens, cluster trust bundles, persistent volumes), subPathExpr, mount
// propagation, SELinux labels, the alpha per-file owner fields
// (AtomicWriteVolumeUserFields, off by default in 1.37), and the tmpfs a
// Secret volume lives on: the files are in an ordinary directory.
package kubelayout

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Objects are the ConfigMaps and Secrets of the Pod's namespace, by name,
// as read back from the API server.
type Objects struct {
	ConfigMaps map[string]*corev1.ConfigMap
	Secrets    map[string]*corev1.Secret
}

// Files returns the files the kubelet projects for vol, by path in the
// volume. It returns (nil, nil) for an emptyDir, which holds no files.
func Files(vol corev1.Volume, objs Objects) (map[string]File, error) {
	files := map[string]File{}
	switch s := vol.VolumeSource; {
	case s.ConfigMap != nil:
		if s.ConfigMap.DefaultMode == nil {
			return nil, notDefaulted(vol.Name)
		}
		err := sourceFiles(files, vol.Name, kindConfigMap, s.ConfigMap.Name, s.ConfigMap.Items, *s.ConfigMap.DefaultMode, isTrue(s.ConfigMap.Optional), objs)
		return files, err
	case s.Secret != nil:
		if s.Secret.DefaultMode == nil {
			return nil, notDefaulted(vol.Name)
		}
		err := sourceFiles(files, vol.Name, kindSecret, s.Secret.SecretName, s.Secret.Items, *s.Secret.DefaultMode, isTrue(s.Secret.Optional), objs)
		return files, err
	case s.Projected != nil:
		if s.Projected.DefaultMode == nil {
			return nil, notDefaulted(vol.Name)
		}
		mode := *s.Projected.DefaultMode
		for i, src := range s.Projected.Sources {
			var err error
			switch {
			case src.ConfigMap != nil:
				err = sourceFiles(files, vol.Name, kindConfigMap, src.ConfigMap.Name, src.ConfigMap.Items, mode, isTrue(src.ConfigMap.Optional), objs)
			case src.Secret != nil:
				err = sourceFiles(files, vol.Name, kindSecret, src.Secret.Name, src.Secret.Items, mode, isTrue(src.Secret.Optional), objs)
			default:
				err = fmt.Errorf("kubelayout: volume %q: projected source %d is neither a ConfigMap nor a Secret, which this layout does not model", vol.Name, i)
			}
			if err != nil {
				return nil, err
			}
		}
		return files, nil
	case s.EmptyDir != nil:
		return nil, nil
	default:
		return nil, fmt.Errorf("kubelayout: volume %q: only configMap, secret, projected and emptyDir volumes are modelled", vol.Name)
	}
}

func notDefaulted(vol string) error {
	return fmt.Errorf("kubelayout: volume %q has no defaultMode: read the Pod back from the API server, which sets it (0644)", vol)
}

func isTrue(b *bool) bool { return b != nil && *b }

// Kinds of the objects a volume projects.
const (
	kindConfigMap = "ConfigMap"
	kindSecret    = "Secret"
)

// sourceFiles adds what one ConfigMap or Secret projects to files; a
// missing object projects nothing if optional, else it is an error.
func sourceFiles(files map[string]File, vol, kind, name string, items []corev1.KeyToPath, mode int32, optional bool, objs Objects) error {
	data, ok := objectData(objs, kind, name)
	if !ok {
		if optional {
			return nil
		}
		return fmt.Errorf("kubelayout: volume %q: %s %q not found", vol, kind, name)
	}
	return project(files, vol, kind, name, data, items, mode, optional)
}

// objectData is a ConfigMap's data and binaryData, or a Secret's data.
func objectData(objs Objects, kind, name string) (map[string][]byte, bool) {
	if kind == kindSecret {
		s, ok := objs.Secrets[name]
		if !ok {
			return nil, false
		}
		return s.Data, true
	}
	cm, ok := objs.ConfigMaps[name]
	if !ok {
		return nil, false
	}
	data := map[string][]byte{}
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return data, true
}

// project adds one object's keys to files: every key at its own name with
// the default mode, or only the items, each at its path with its mode.
func project(files map[string]File, vol, kind, name string, data map[string][]byte, items []corev1.KeyToPath, mode int32, optional bool) error {
	if len(items) == 0 {
		for k, v := range data {
			files[k] = File{Data: v, Mode: os.FileMode(mode)}
		}
		return nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			if optional {
				continue
			}
			return fmt.Errorf("kubelayout: volume %q: %s %q has no key %q", vol, kind, name, it.Key)
		}
		m := mode
		if it.Mode != nil {
			m = *it.Mode
		}
		files[it.Path] = File{Data: v, Mode: os.FileMode(m)}
	}
	return nil
}

// Mount is one of a container's volumeMounts on this machine.
type Mount struct {
	// Source is the directory (or, with a subPath, the file or directory)
	// on this machine.
	Source string
	// Target is the absolute path in the container.
	Target string
	// ReadOnly: the Pod's readOnly, or a ConfigMap, Secret or projected
	// volume, which the kubelet always mounts read-only.
	ReadOnly bool
}

// Layout lays out under dir (one directory per volume, by name) every
// volume that container c of pod mounts, with the pod's fsGroup, and
// returns c's mounts in the order a runtime makes them: by the depth of
// the target, in c's order among equals. dir must exist. A volume already
// under dir (laid out for another container of the Pod) is mounted as it
// is: the kubelet sets a volume up once per Pod.
func Layout(dir string, pod *corev1.Pod, c *corev1.Container, objs Objects) ([]Mount, error) {
	var fsGroup *int64
	if sc := pod.Spec.SecurityContext; sc != nil {
		fsGroup = sc.FSGroup
	}
	vols := map[string]corev1.Volume{}
	for _, v := range pod.Spec.Volumes {
		vols[v.Name] = v
	}
	done := map[string]bool{}
	var mounts []Mount
	for _, vm := range c.VolumeMounts {
		vol, ok := vols[vm.Name]
		if !ok {
			return nil, fmt.Errorf("kubelayout: container %q mounts volume %q, which the Pod does not define", c.Name, vm.Name)
		}
		if !filepath.IsAbs(vm.MountPath) {
			return nil, fmt.Errorf("kubelayout: container %q: mountPath %q is not absolute", c.Name, vm.MountPath)
		}
		if vm.SubPathExpr != "" {
			return nil, fmt.Errorf("kubelayout: container %q: volumeMount %q uses subPathExpr, which this layout does not model", c.Name, vm.Name)
		}
		vdir := filepath.Join(dir, vol.Name)
		if _, err := os.Lstat(vdir); err == nil {
			done[vol.Name] = true // laid out for another container of the Pod
		}
		if !done[vol.Name] {
			if err := layoutVolume(vdir, vol, nestedMountpoints(pod, vol.Name), objs, fsGroup); err != nil {
				return nil, err
			}
			done[vol.Name] = true
		}
		src := vdir
		if vm.SubPath != "" {
			var err error
			if src, err = subPath(vdir, vm.SubPath); err != nil {
				return nil, fmt.Errorf("kubelayout: container %q, volume %q: %w", c.Name, vm.Name, err)
			}
		}
		ro := vm.ReadOnly || vol.ConfigMap != nil || vol.Secret != nil || vol.Projected != nil
		mounts = append(mounts, Mount{Source: src, Target: filepath.Clean(vm.MountPath), ReadOnly: ro})
	}
	sort.SliceStable(mounts, func(i, j int) bool {
		return strings.Count(mounts[i].Target, "/") < strings.Count(mounts[j].Target, "/")
	})
	return mounts, nil
}

// layoutVolume makes the volume's directory with the mode the kubelet's
// wrapped emptyDir gives it (0777 on disk; 01777, a fresh tmpfs's root,
// for Secret and projected volumes), the directories other volumes mount
// on inside it (0755 under the umask, beside ..data), and writes its
// files.
func layoutVolume(vdir string, vol corev1.Volume, nested []string, objs Objects, fsGroup *int64) error {
	files, err := Files(vol, objs)
	if err != nil {
		return err
	}
	if err := os.Mkdir(vdir, 0o777); err != nil {
		return fmt.Errorf("kubelayout: volume %q: %w", vol.Name, err)
	}
	mode := os.FileMode(0o777)
	if vol.Secret != nil || vol.Projected != nil {
		mode |= os.ModeSticky
	}
	if err := os.Chmod(vdir, mode); err != nil {
		return fmt.Errorf("kubelayout: volume %q: %w", vol.Name, err)
	}
	if vol.EmptyDir != nil {
		if fsGroup != nil {
			return setOwnership(vdir, *fsGroup)
		}
		return nil
	}
	for _, n := range nested {
		if err := os.MkdirAll(filepath.Join(vdir, n), 0o755); err != nil {
			return fmt.Errorf("kubelayout: volume %q: the mount point %s in it: %w", vol.Name, n, err)
		}
	}
	if err := Write(vdir, files, fsGroup); err != nil {
		return fmt.Errorf("volume %q: %w", vol.Name, err)
	}
	return nil
}

// nestedMountpoints are the mount points of other volumes beneath where
// any container of pod mounts volume name, relative to that mount, the
// nearest only (a mount point under another nested one is that one's).
// The kubelet makes them as directories in the volume before its files
// (MakeNestedMountpoints), so a container runtime can mount on them
// through a volume it mounts read-only.
func nestedMountpoints(pod *corev1.Pod, name string) []string {
	var out []string
	seen := map[string]bool{}
	var cs []corev1.Container
	cs = append(cs, pod.Spec.InitContainers...)
	cs = append(cs, pod.Spec.Containers...)
	for _, c := range cs {
		var all []string
		for _, vm := range c.VolumeMounts {
			all = append(all, filepath.Clean(vm.MountPath))
		}
		sort.Strings(all)
		for _, vm := range c.VolumeMounts {
			if vm.Name != name {
				continue
			}
			mine := filepath.Clean(vm.MountPath) + "/"
			var prev []string
		next:
			for _, mp := range all {
				if !strings.HasPrefix(mp, mine) {
					continue
				}
				for _, p := range prev {
					if strings.HasPrefix(mp, p) {
						continue next
					}
				}
				prev = append(prev, mp+"/")
				if rel := mp[len(mine):]; !seen[rel] {
					seen[rel] = true
					out = append(out, rel)
				}
			}
		}
	}
	return out
}

// subPath is the kubelet's subPath: the path in the volume with its
// symlinks resolved (a subPath mount sees the file of that moment and no
// later rotation), refused if it leaves the volume or does not exist.
func subPath(vdir, sub string) (string, error) {
	if filepath.IsAbs(sub) {
		return "", fmt.Errorf("subPath %q must be relative", sub)
	}
	for _, part := range strings.Split(sub, "/") {
		if part == ".." {
			return "", fmt.Errorf("subPath %q must not contain '..'", sub)
		}
	}
	base, err := filepath.EvalSymlinks(vdir)
	if err != nil {
		return "", err
	}
	p, err := filepath.EvalSymlinks(filepath.Join(vdir, sub))
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("subPath %q does not exist in the volume", sub)
	}
	if err != nil {
		return "", err
	}
	if p != base && !strings.HasPrefix(p, base+string(filepath.Separator)) {
		return "", fmt.Errorf("subPath %q leaves the volume", sub)
	}
	return p, nil
}
