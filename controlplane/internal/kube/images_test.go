package kube_test

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"jr2.dev/boundary/controlplane/internal/kube"
	"jr2.dev/boundary/images"
	"jr2.dev/boundary/internal/hostlimits"
)

// description is images/images.json: every image the objects run, which
// its Dockerfile is held to as well (images TestDockerfilesMatchDescription)
// and which `make images` builds for the tests' node.
func description(t *testing.T) *images.Description {
	t.Helper()
	d, err := images.Load(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestRecipesMatchObjects: each image the Pod runs is, as images.json
// describes it, what the objects run — the command is its entrypoint, the
// default args its cmd, the uid and gid its user, the health port one it
// exposes, every binary or module the objects name a file it holds, and
// its name the tag the docker build line gives (render's default). The
// agent image runs as the Pod's agent uid.
func TestRecipesMatchObjects(t *testing.T) {
	small, _ := os.ReadFile(filepath.Join(manifests, "small.json"))
	d := description(t)
	for _, tc := range []struct {
		sidecar kube.Sidecar
		image   string
		files   []string
	}{
		{kube.SidecarEnvoy, "custodian-envoy", []string{kube.ModulePath, kube.CustodianBinary, kube.EnvoyBinary}},
		{kube.SidecarServe, "custodian-serve", []string{kube.CustodianBinary}},
	} {
		t.Run(tc.image, func(t *testing.T) {
			img := d.Image(tc.image)
			if img == nil {
				t.Fatalf("images.json describes no %s", tc.image)
			}
			set, err := kube.Build(stubInput(t, small, kube.Options{Sidecar: tc.sidecar}))
			if err != nil {
				t.Fatal(err)
			}
			p := pod(t, set)
			c := p.Spec.InitContainers[0]
			checkContainer(t, img, c, tc.files)
			if !slices.Equal(img.Cmd, c.Args) {
				t.Errorf("cmd %q; the Pod's args %q", img.Cmd, c.Args)
			}
			if c.Image != tc.sidecar.Image() || c.Image != "jr2-"+img.Name {
				t.Errorf("the Pod's image %q; the recipe's tag is jr2-%s", c.Image, img.Name)
			}
			// Envoy runs under custodian envoy, which drains it on
			// SIGTERM through the admin socket in /tmp: the documented
			// start command, a writable /tmp, and the pod's grace.
			if tc.sidecar == kube.SidecarEnvoy {
				if want := []string{kube.CustodianBinary, "envoy", "--", kube.EnvoyBinary}; !slices.Equal(c.Command, want) {
					t.Errorf("the Envoy sidecar's command %q; want %q", c.Command, want)
				}
				if src := d.Sources[img.File(kube.EnvoyBinary).Source]; src.Envoy != "1.39.3" || img.DockerFrom != "envoyproxy/envoy-distroless:v1.39.3" {
					t.Errorf("%s is Envoy %q on %s; the proven Envoy is 1.39.3, and its Docker base envoyproxy/envoy-distroless:v1.39.3", kube.EnvoyBinary, src.Envoy, img.DockerFrom)
				}
			}
		})
	}
	// The agent image's user is the uid render gives the agent container
	// by default (--agent-uid).
	agent := d.Image("agent")
	set, err := kube.Build(stubInput(t, small, kube.Options{AgentUID: kube.DefaultAgentUID}))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range pod(t, set).Spec.Containers {
		if c.Name == kube.DefaultAgentContainer && (agent == nil || agent.User != strconv.Itoa(kube.DefaultAgentUID)+":"+strconv.Itoa(kube.DefaultAgentUID) || *c.SecurityContext.RunAsUser != kube.DefaultAgentUID) {
			t.Errorf("the agent container runs as %d; want the agent image's user and render's default %d", *c.SecurityContext.RunAsUser, kube.DefaultAgentUID)
		}
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
				// Envoy's log (the jr2.custodian lines among it) goes
				// through its buffered file writer, flushed every second:
				// a crash loses at most the last second of lines (logs.md).
				if i := slices.Index(side.Args, "--file-flush-interval-msec"); i < 0 || i+1 >= len(side.Args) || side.Args[i+1] != "1000" ||
					!slices.Contains(side.Args, "--log-path") {
					t.Errorf("%s: the Envoy sidecar's args %q; want --log-path with --file-flush-interval-msec 1000", name, side.Args)
				}
			}
		})
	}
}

// checkContainer holds a container to an image: command, user, ports,
// and each file the container runs or loads.
func checkContainer(t *testing.T, img *images.Image, c corev1.Container, files []string) {
	t.Helper()
	if !slices.Equal(img.Entrypoint, c.Command) {
		t.Errorf("entrypoint %q; the container's command %q", img.Entrypoint, c.Command)
	}
	sc := c.SecurityContext
	if want := strconv.FormatInt(*sc.RunAsUser, 10) + ":" + strconv.FormatInt(*sc.RunAsGroup, 10); img.User != want {
		t.Errorf("user %q; the container runs as %s", img.User, want)
	}
	for _, p := range c.Ports {
		if !slices.Contains(img.Expose, int(p.ContainerPort)) {
			t.Errorf("the container's port %d is not exposed (%v)", p.ContainerPort, img.Expose)
		}
	}
	for _, f := range append(files, c.Command[0]) {
		if img.File(f) == nil {
			t.Errorf("%s is not a file of image %s", f, img.Name)
		}
	}
}
