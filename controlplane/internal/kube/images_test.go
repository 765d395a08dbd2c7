package kube_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"time"

	corev1 "k8s.io/api/core/v1"

	"jr2.dev/boundary/controlplane/internal/kube"
	"jr2.dev/boundary/internal/hostlimits"
)

// recipe is the last stage of a Dockerfile: what the image runs, as whom,
// what it exposes and where it copies its files.
type recipe struct {
	from       string
	user       string
	expose     []int32
	entrypoint []string
	cmd        []string
	copies     []string // destination paths
}

// parseRecipe reads a Dockerfile's instructions (comments dropped,
// continuation lines joined) and keeps those of its final stage.
// ENTRYPOINT and CMD must be in exec (JSON) form: a shell form would run
// /bin/sh, which distroless has not.
func parseRecipe(t *testing.T, file string) recipe {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	cont := ""
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "#") || l == "" && cont == "" {
			continue
		}
		if strings.HasSuffix(l, "\\") {
			cont += strings.TrimSuffix(l, "\\") + " "
			continue
		}
		lines = append(lines, cont+l)
		cont = ""
	}
	var r recipe
	for _, l := range lines {
		op, arg, _ := strings.Cut(l, " ")
		arg = strings.TrimSpace(arg)
		switch strings.ToUpper(op) {
		case "FROM":
			r = recipe{from: arg}
		case "USER":
			r.user = arg
		case "EXPOSE":
			for _, p := range strings.Fields(arg) {
				n, err := strconv.Atoi(strings.TrimSuffix(p, "/tcp"))
				if err != nil {
					t.Fatalf("%s: EXPOSE %s", file, p)
				}
				r.expose = append(r.expose, int32(n))
			}
		case "ENTRYPOINT", "CMD":
			var v []string
			if err := json.Unmarshal([]byte(arg), &v); err != nil {
				t.Fatalf("%s: %s %s is not in exec form (distroless has no shell): %v", file, op, arg, err)
			}
			if strings.ToUpper(op) == "CMD" {
				r.cmd = v
			} else {
				r.entrypoint = v
			}
		case "COPY":
			f := strings.Fields(arg)
			r.copies = append(r.copies, f[len(f)-1])
		}
	}
	return r
}

// TestRecipesMatchObjects: each image recipe under images/ is what the
// objects run — the command is its ENTRYPOINT, the default args its CMD,
// the uid and gid its USER, the health port one it EXPOSEs, and every
// binary or module the objects name is a file it COPYs.
func TestRecipesMatchObjects(t *testing.T) {
	small, _ := os.ReadFile(filepath.Join(manifests, "small.json"))
	for _, tc := range []struct {
		sidecar kube.Sidecar
		file    string
		files   []string
	}{
		{kube.SidecarEnvoy, "custodian-envoy.Dockerfile", []string{kube.ModulePath, kube.CustodianBinary}},
		{kube.SidecarServe, "custodian-serve.Dockerfile", []string{kube.CustodianBinary}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			r := parseRecipe(t, filepath.Join("..", "..", "..", "images", tc.file))
			set, err := kube.Build(stubInput(t, small, kube.Options{Sidecar: tc.sidecar}))
			if err != nil {
				t.Fatal(err)
			}
			c := pod(t, set).Spec.InitContainers[0]
			checkContainer(t, r, c, tc.files)
			if !slices.Equal(r.cmd, c.Args) {
				t.Errorf("CMD %q; the Pod's args %q", r.cmd, c.Args)
			}
			if set.Objects[0].GetName() == "" || c.Image != tc.sidecar.Image() {
				t.Errorf("the Pod's image %q; the recipe's tag is %q", c.Image, tc.sidecar.Image())
			}
			// Envoy runs under custodian envoy, which drains it on
			// SIGTERM through the admin socket in /tmp: the documented
			// start command, a writable /tmp, and the pod's grace.
			if tc.sidecar == kube.SidecarEnvoy {
				if want := []string{kube.CustodianBinary, "envoy", "--", kube.EnvoyBinary}; !slices.Equal(c.Command, want) {
					t.Errorf("the Envoy sidecar's command %q; want %q", c.Command, want)
				}
				if !strings.HasPrefix(r.from, "envoyproxy/envoy") {
					t.Errorf("FROM %s; %s comes from the Envoy image", r.from, kube.EnvoyBinary)
				}
			}
		})
	}
}

// TestStopNeeds: the Custodian's stop works in the Pod. The Envoy sidecar
// has a writable /tmp for Envoy's admin socket (under hostlimits.AdminSocketDir), an
// emptyDir in memory mounted in that container only; the Pod's grace
// period holds the agent's stop, then hostlimits.StopGrace and a margin,
// for either sidecar (a native sidecar gets its SIGTERM after the agent
// has exited).
func TestStopNeeds(t *testing.T) {
	small, _ := os.ReadFile(filepath.Join(manifests, "small.json"))
	for _, sidecar := range []kube.Sidecar{kube.SidecarEnvoy, kube.SidecarServe} {
		t.Run(string(sidecar), func(t *testing.T) {
			set, err := kube.Build(stubInput(t, small, kube.Options{Sidecar: sidecar}))
			if err != nil {
				t.Fatal(err)
			}
			for name, spec := range map[string]corev1.PodSpec{"the Pod": pod(t, set).Spec, "the patch": set.Patch.Spec.Template.Spec} {
				g := spec.TerminationGracePeriodSeconds
				min := int64((kube.AgentStopAllowance + hostlimits.StopGrace) / time.Second)
				if g == nil || *g <= min || *g != kube.TerminationGracePeriod() {
					t.Errorf("%s: terminationGracePeriodSeconds %v; want %d, more than the agent's %v and the stop's %v", name, g, kube.TerminationGracePeriod(), kube.AgentStopAllowance, hostlimits.StopGrace)
				}
				var tmp *corev1.Volume
				for i, v := range spec.Volumes {
					if v.Name == kube.VolumeTmp {
						tmp = &spec.Volumes[i]
					}
				}
				side := spec.InitContainers[0]
				mounted := slices.ContainsFunc(side.VolumeMounts, func(m corev1.VolumeMount) bool {
					return m.Name == kube.VolumeTmp && m.MountPath == hostlimits.AdminSocketDir && !m.ReadOnly
				})
				for _, c := range spec.Containers {
					if slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == kube.VolumeTmp }) {
						t.Errorf("%s: container %s mounts the Custodian's /tmp", name, c.Name)
					}
				}
				if sidecar == kube.SidecarServe {
					if tmp != nil || mounted {
						t.Errorf("%s: custodian serve has no admin socket, yet the Pod gives it %s", name, kube.VolumeTmp)
					}
					continue
				}
				if tmp == nil || tmp.EmptyDir == nil || tmp.EmptyDir.Medium != corev1.StorageMediumMemory || tmp.EmptyDir.SizeLimit == nil || tmp.EmptyDir.SizeLimit.IsZero() {
					t.Errorf("%s: volume %s %+v; want an emptyDir, medium Memory, with a sizeLimit", name, kube.VolumeTmp, tmp)
				}
				if !mounted || !*side.SecurityContext.ReadOnlyRootFilesystem {
					t.Errorf("%s: the Envoy sidecar's mounts %+v; want %s writable at %s over a read-only root", name, side.VolumeMounts, kube.VolumeTmp, hostlimits.AdminSocketDir)
				}
			}
		})
	}
}

// checkContainer holds a container to a recipe: command, user, ports,
// and each file the container runs or loads.
func checkContainer(t *testing.T, r recipe, c corev1.Container, files []string) {
	t.Helper()
	if !slices.Equal(r.entrypoint, c.Command) {
		t.Errorf("ENTRYPOINT %q; the container's command %q", r.entrypoint, c.Command)
	}
	sc := c.SecurityContext
	if want := strconv.FormatInt(*sc.RunAsUser, 10) + ":" + strconv.FormatInt(*sc.RunAsGroup, 10); r.user != want {
		t.Errorf("USER %q; the container runs as %s", r.user, want)
	}
	for _, p := range c.Ports {
		if !slices.Contains(r.expose, p.ContainerPort) {
			t.Errorf("the container's port %d is not EXPOSEd (%v)", p.ContainerPort, r.expose)
		}
	}
	for _, f := range append(files, c.Command[0]) {
		if !slices.Contains(r.copies, f) && !strings.HasPrefix(r.from, "envoyproxy/envoy") {
			t.Errorf("%s is not a file the recipe copies (%v)", f, r.copies)
		}
	}
	if strings.HasPrefix(r.from, "envoyproxy/envoy") && !strings.HasSuffix(r.from, ":v1.39.3") {
		t.Errorf("FROM %s; the proven Envoy is 1.39.3", r.from)
	}
	for _, f := range files {
		if !slices.Contains(r.copies, f) {
			t.Errorf("%s is not a file the recipe copies (%v)", f, r.copies)
		}
	}
}
