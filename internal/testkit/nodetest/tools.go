package nodetest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"jr2.dev/boundary/internal/testkit/kubetest"
)

// Pinned releases of the node's parts (scripts/kube-tools.sh).
const (
	Containerd = "v2.4.2"
	Runc       = "1.5.3"
)

// EnvCNI names the directory of the CNI plugins (Debian's
// containernetworking-plugins puts them in /usr/lib/cni).
const EnvCNI = "JR2_CNI_BIN"

// Tools are the node's binaries.
type Tools struct {
	Kubelet, ControllerManager, Scheduler string
	Containerd, Shim, Ctr, Runc           string
	// CNI is the directory holding the bridge, host-local and loopback
	// plugins.
	CNI string
}

// FindTools finds the node's binaries in .cache/kube/bin and checks each
// reports its pinned release (runc also that it was built with seccomp).
// Its error names the binary and the fix.
func FindTools() (Tools, error) {
	dir, err := kubetest.CacheDir()
	if err != nil {
		return Tools{}, err
	}
	var tt Tools
	fix := fmt.Sprintf("run `%s` (it builds the node's parts from Go modules into %s; minutes, once)", kubetest.Build, dir)
	for _, b := range []struct {
		name    string
		dst     *string
		version []string
		want    *regexp.Regexp
	}{
		{"kubelet", &tt.Kubelet, []string{"--version"}, regexp.MustCompile(`(?m)^Kubernetes ` + regexp.QuoteMeta(kubetest.Kubernetes) + `$`)},
		{"kube-controller-manager", &tt.ControllerManager, []string{"--version"}, regexp.MustCompile(`(?m)^Kubernetes ` + regexp.QuoteMeta(kubetest.Kubernetes) + `$`)},
		{"kube-scheduler", &tt.Scheduler, []string{"--version"}, regexp.MustCompile(`(?m)^Kubernetes ` + regexp.QuoteMeta(kubetest.Kubernetes) + `$`)},
		{"containerd", &tt.Containerd, []string{"--version"}, regexp.MustCompile(`containerd \S+ ` + regexp.QuoteMeta(Containerd) + `\b`)},
		{"containerd-shim-runc-v2", &tt.Shim, []string{"-v"}, regexp.MustCompile(`Version:\s+` + regexp.QuoteMeta(Containerd) + `\b`)},
		{"ctr", &tt.Ctr, []string{"--version"}, regexp.MustCompile(`ctr \S+ ` + regexp.QuoteMeta(Containerd) + `\b`)},
		{"runc", &tt.Runc, []string{"--version"}, regexp.MustCompile(`(?s)^runc version ` + regexp.QuoteMeta(Runc) + `\b.*\nlibseccomp: \d`)},
	} {
		path := filepath.Join(dir, b.name)
		if _, err := os.Stat(path); err != nil {
			return Tools{}, missing(fmt.Sprintf("no %s at %s: %s", b.name, path, fix))
		}
		out, err := exec.Command(path, b.version...).CombinedOutput()
		if err != nil || !b.want.Match(out) {
			return Tools{}, fmt.Errorf("%s %s printed %q (%v); want %s: rebuild it, %s", path, strings.Join(b.version, " "), clip(out), err, b.want, fix)
		}
		*b.dst = path
	}
	tt.CNI = os.Getenv(EnvCNI)
	if tt.CNI == "" {
		tt.CNI = "/usr/lib/cni"
	}
	for _, p := range []string{"bridge", "host-local", "loopback"} {
		if _, err := os.Stat(filepath.Join(tt.CNI, p)); err != nil {
			return Tools{}, missing(fmt.Sprintf("no CNI plugin %s in %s: apt-get install containernetworking-plugins, or set %s to a directory holding bridge, host-local and loopback", p, tt.CNI, EnvCNI))
		}
	}
	return tt, nil
}

// missing is an error a run may skip on (kubetest.EnvSkip), as a missing
// API server is.
type missing string

func (e missing) Error() string        { return string(e) }
func (e missing) Is(target error) bool { return target == kubetest.ErrMissing }

func clip(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}
