package kubelayout

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func i32(v int32) *int32 { return &v }
func yes() *bool         { v := true; return &v }

// objs are a namespace's objects as a server returns them.
var objs = Objects{
	ConfigMaps: map[string]*corev1.ConfigMap{
		"pod-custodian": {
			ObjectMeta: metav1.ObjectMeta{Name: "pod-custodian"},
			Data:       map[string]string{"envoy.json": "{}", "custodian.json": `{"a":1}`},
			BinaryData: map[string][]byte{"blob": {0, 1}},
		},
	},
	Secrets: map[string]*corev1.Secret{
		"user-keys": {ObjectMeta: metav1.ObjectMeta{Name: "user-keys"}, Data: map[string][]byte{"openai": []byte("v1"), "other": []byte("v2")}},
		"leaves":    {ObjectMeta: metav1.ObjectMeta{Name: "leaves"}, Data: map[string][]byte{"tls.crt": []byte("c"), "tls.key": []byte("k")}},
	},
}

// show renders files as "path mode data" lines, sorted.
func show(files map[string]File) string {
	var out []string
	for p, f := range files {
		out = append(out, fmt.Sprintf("%s %04o %s", p, f.Mode, f.Data))
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}

// TestFiles holds the payload of each volume kind to the kubelet's rules:
// all keys at the default mode, or only the items at their paths and
// modes; binaryData beside data; a projected volume's defaultMode for
// every source; an optional source that is missing adds nothing.
func TestFiles(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  corev1.VolumeSource
		want string
	}{
		{"configMap, every key", corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "pod-custodian"}, DefaultMode: i32(0o644)}},
			"blob 0644 \x00\x01; custodian.json 0644 {\"a\":1}; envoy.json 0644 {}"},
		{"configMap, items", corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "pod-custodian"}, DefaultMode: i32(0o644),
			Items: []corev1.KeyToPath{{Key: "envoy.json", Path: "etc/envoy.json", Mode: i32(0o444)}, {Key: "custodian.json", Path: "c.json"}}}},
			"c.json 0644 {\"a\":1}; etc/envoy.json 0444 {}"},
		{"secret, every key at its defaultMode", corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: "leaves", DefaultMode: i32(0o400)}},
			"tls.crt 0400 c; tls.key 0400 k"},
		{"projected Secret items, named after the held secret", corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			DefaultMode: i32(0o400),
			Sources: []corev1.VolumeProjection{
				{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "user-keys"},
					Items: []corev1.KeyToPath{{Key: "openai", Path: "OPENAI_API_KEY"}}}},
				{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "leaves"},
					Items: []corev1.KeyToPath{{Key: "tls.key", Path: "tls/x.key", Mode: i32(0o440)}}}},
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "pod-custodian"},
					Items: []corev1.KeyToPath{{Key: "envoy.json", Path: "envoy.json"}}}},
			}}},
			"OPENAI_API_KEY 0400 v1; envoy.json 0400 {}; tls/x.key 0440 k"},
		{"optional sources that are missing", corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			DefaultMode: i32(0o644),
			Sources: []corev1.VolumeProjection{
				{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "nope"}, Optional: yes()}},
				{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "user-keys"}, Optional: yes(),
					Items: []corev1.KeyToPath{{Key: "missing", Path: "M"}, {Key: "other", Path: "O"}}}},
			}}},
			"O 0644 v2"},
		{"emptyDir", corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files, err := Files(corev1.Volume{Name: "v", VolumeSource: tc.src}, objs)
			if err != nil {
				t.Fatal(err)
			}
			if got := show(files); got != tc.want {
				t.Errorf("files:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

// TestFilesRefused: what keeps the kubelet from starting the container is
// an error here, naming the volume, the object and the key.
func TestFilesRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  corev1.VolumeSource
		want string
	}{
		{"no defaultMode", corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "leaves"}},
			`volume "v" has no defaultMode: read the Pod back from the API server`},
		{"missing Secret", corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "nope", DefaultMode: i32(0o644)}},
			`volume "v": Secret "nope" not found`},
		{"missing ConfigMap", corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "nope"}, DefaultMode: i32(0o644)}},
			`volume "v": ConfigMap "nope" not found`},
		{"missing key", corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{DefaultMode: i32(0o400),
			Sources: []corev1.VolumeProjection{{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "user-keys"},
				Items: []corev1.KeyToPath{{Key: "anthropic", Path: "ANTHROPIC_API_KEY"}}}}}}},
			`volume "v": Secret "user-keys" has no key "anthropic"`},
		{"downward API", corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{DefaultMode: i32(0o400),
			Sources: []corev1.VolumeProjection{{DownwardAPI: &corev1.DownwardAPIProjection{}}}}},
			"projected source 0 is neither a ConfigMap nor a Secret"},
		{"hostPath", corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}},
			"only configMap, secret, projected and emptyDir volumes are modelled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Files(corev1.Volume{Name: "v", VolumeSource: tc.src}, objs)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v, want an error with %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "v1") || strings.Contains(err.Error(), "v2") {
				t.Errorf("the error quotes a value: %v", err)
			}
		})
	}
}

// pod is a sidecar and an agent sharing a trust volume; the sidecar alone
// mounts its values.
func pod(fsGroup *int64) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: corev1.PodSpec{
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "pod-custodian"}, DefaultMode: i32(0o644)}}},
				{Name: "values", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{DefaultMode: i32(0o400),
					Sources: []corev1.VolumeProjection{{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "user-keys"},
						Items: []corev1.KeyToPath{{Key: "openai", Path: "OPENAI_API_KEY"}}}}}}}},
				{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
			Containers: []corev1.Container{{Name: "custodian", VolumeMounts: []corev1.VolumeMount{
				{Name: "config", MountPath: "/etc/jr2/custodian/"},
				{Name: "values", MountPath: "/etc/jr2/custodian/values"},
				{Name: "config", MountPath: "/etc/envoy.json", SubPath: "envoy.json"},
				{Name: "tmp", MountPath: "/tmp"},
			}}},
		},
	}
	if fsGroup != nil {
		p.Spec.SecurityContext = &corev1.PodSecurityContext{FSGroup: fsGroup}
	}
	return p
}

// TestLayout: each mounted volume is laid out once under its name, with a
// directory for the volume mounted beneath it; the mounts are ordered by
// depth, the container's order among equals; a subPath is the resolved file in
// the timestamped directory, and ConfigMap, Secret and projected volumes
// are read-only though the Pod did not say so.
func TestLayout(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	dir := t.TempDir()
	p := pod(nil)
	mounts, err := Layout(dir, p, &p.Spec.Containers[0], objs)
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "config")
	ts := readlink(t, filepath.Join(cfg, DataLink))
	realDir, err := filepath.EvalSymlinks(cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := []Mount{
		{Source: filepath.Join(dir, "tmp"), Target: "/tmp", ReadOnly: false},
		{Source: filepath.Join(realDir, ts, "envoy.json"), Target: "/etc/envoy.json", ReadOnly: true},
		{Source: cfg, Target: "/etc/jr2/custodian", ReadOnly: true},
		{Source: filepath.Join(dir, "values"), Target: "/etc/jr2/custodian/values", ReadOnly: true},
	}
	if fmt.Sprint(mounts) != fmt.Sprint(want) {
		t.Errorf("mounts:\n%v\nwant:\n%v", mounts, want)
	}
	if got, want := strings.Join(entries(t, dir), " "), "config tmp values"; got != want {
		t.Errorf("volumes laid out: %s, want %s", got, want)
	}
	if got, want := strings.Join(entries(t, cfg), " "), "..TS ..data blob custodian.json envoy.json values"; got != want {
		t.Errorf("the config volume: %s, want %s (values: the mount point of the volume beneath it)", got, want)
	}
	if m := mode(t, filepath.Join(cfg, "values")); m != os.ModeDir|0o755 {
		t.Errorf("the nested mount point: %v, want drwxr-xr-x", m)
	}
	if m := mode(t, filepath.Join(dir, "values")); m != os.ModeDir|os.ModeSticky|0o777 {
		t.Errorf("a projected volume's directory: %v, want a fresh tmpfs root's drwxrwxrwt", m)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "values", "OPENAI_API_KEY")); err != nil || string(b) != "v1" {
		t.Errorf("values/OPENAI_API_KEY: %q, %v", b, err)
	}
	if m := mode(t, filepath.Join(dir, "values", DataLink, "OPENAI_API_KEY")); m != 0o400 {
		t.Errorf("values/OPENAI_API_KEY: mode %v, want 0400", m)
	}
}

// TestLayoutFSGroup: with the pod's fsGroup, a 0400 value is 0440 and the
// group's, so a container running under that group can read it.
func TestLayoutFSGroup(t *testing.T) {
	dir := t.TempDir()
	gid := int64(os.Getgid())
	p := pod(&gid)
	if _, err := Layout(dir, p, &p.Spec.Containers[0], objs); err != nil {
		t.Fatal(err)
	}
	if m := mode(t, filepath.Join(dir, "values", DataLink, "OPENAI_API_KEY")); m != 0o440 {
		t.Errorf("mode %v with fsGroup, want 0440", m)
	}
}

// TestLayoutRefused: mounts the kubelet would not make.
func TestLayoutRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		vm   corev1.VolumeMount
		want string
	}{
		{"undefined volume", corev1.VolumeMount{Name: "nope", MountPath: "/x"}, `mounts volume "nope", which the Pod does not define`},
		{"relative mountPath", corev1.VolumeMount{Name: "tmp", MountPath: "x"}, `mountPath "x" is not absolute`},
		{"subPath out of the volume", corev1.VolumeMount{Name: "config", MountPath: "/x", SubPath: "../values"}, `must not contain '..'`},
		{"subPath absent", corev1.VolumeMount{Name: "config", MountPath: "/x", SubPath: "nope.json"}, `subPath "nope.json" does not exist`},
		{"subPathExpr", corev1.VolumeMount{Name: "config", MountPath: "/x", SubPathExpr: "$(POD)"}, "subPathExpr"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := pod(nil)
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{tc.vm}
			_, err := Layout(t.TempDir(), p, &p.Spec.Containers[0], objs)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v, want an error with %q", err, tc.want)
			}
		})
	}
}

// TestSubPathEscape: a key whose link leads out of the volume is refused
// as a subPath, as the kubelet's safe subpath does.
func TestSubPathEscape(t *testing.T) {
	dir := t.TempDir()
	vdir := filepath.Join(dir, "v")
	if err := os.Mkdir(vdir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(dir, filepath.Join(vdir, "out")); err != nil {
		t.Fatal(err)
	}
	if _, err := subPath(vdir, "out"); err == nil || !strings.Contains(err.Error(), "leaves the volume") {
		t.Fatalf("%v, want: leaves the volume", err)
	}
}

// TestNestedMountpoints: only the nearest mount point beneath each place
// the volume is mounted, over every container, sidecars included; a
// sibling that merely shares a prefix is not beneath it.
func TestNestedMountpoints(t *testing.T) {
	p := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "side", VolumeMounts: []corev1.VolumeMount{
			{Name: "dir", MountPath: "/dir"}, {Name: "a", MountPath: "/dir/nested"}, {Name: "b", MountPath: "/dir/nested/other"},
			{Name: "c", MountPath: "/dir-sibling"}, {Name: "d", MountPath: "/dir/nested2/"},
		}}},
		Containers: []corev1.Container{{Name: "main", VolumeMounts: []corev1.VolumeMount{
			{Name: "dir", MountPath: "/elsewhere"}, {Name: "e", MountPath: "/elsewhere/x/y"},
		}}},
	}}
	if got, want := strings.Join(nestedMountpoints(p, "dir"), " "), "nested nested2 x/y"; got != want {
		t.Errorf("nested mount points of dir: %q, want %q", got, want)
	}
	if got := nestedMountpoints(p, "b"); len(got) != 0 {
		t.Errorf("nested mount points of b: %q, want none", got)
	}
}
