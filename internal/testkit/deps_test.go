package testkit_test

import (
	"os/exec"
	"strings"
	"testing"
)

// shipped are the main packages that become what a user runs: the three
// commands, the Effector's confine helper, and the two filters Envoy loads.
var shipped = []string{
	"jr2.dev/boundary/custodian",
	"jr2.dev/boundary/controlplane",
	"jr2.dev/boundary/effector",
	"jr2.dev/boundary/effector/cmd/effector-confine",
	"jr2.dev/boundary/filter/module/custodian-module",
	"jr2.dev/boundary/filter/plugin",
	"jr2.dev/boundary/internal/pause",
}

// TestShippedBinariesLinkNoKit: `go list -deps` of each shipped binary
// holds no package of testkit, no test helper package and no client-go.
func TestShippedBinariesLinkNoKit(t *testing.T) {
	for _, pkg := range shipped {
		t.Run(pkg[strings.LastIndexByte(pkg, '/')+1:], func(t *testing.T) {
			out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
			if err != nil {
				t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
			}
			deps := strings.Fields(string(out))
			if len(deps) < 2 || deps[len(deps)-1] != pkg {
				t.Fatalf("go list -deps %s printed %d packages, not ending in it: %.200s", pkg, len(deps), out)
			}
			for _, d := range deps {
				if bad(d) {
					t.Errorf("%s links %s, a test or bench helper; move what it needs out of the helper", pkg, d)
				}
			}
		})
	}
}

// bad says whether a dependency is one no shipped binary may link.
func bad(dep string) bool {
	if strings.HasPrefix(dep, "k8s.io/client-go") {
		return true
	}
	if !strings.HasPrefix(dep, "jr2.dev/boundary/") {
		return false
	}
	return strings.Contains(dep, "/internal/testkit") || strings.HasSuffix(dep, "test")
}

// TestBadSeesEachKind: the rule above names every kind it is meant to.
func TestBadSeesEachKind(t *testing.T) {
	for dep, want := range map[string]bool{
		"jr2.dev/boundary/internal/testkit/testpki":       true,
		"jr2.dev/boundary/filter/standintest":             true,
		"jr2.dev/boundary/internal/valuedir/valuedirtest": true,
		"k8s.io/client-go/kubernetes":                     true,
		"jr2.dev/boundary/internal/contract":              false,
		"k8s.io/api/core/v1":                              false,
		"net/http/httptest":                               false,
	} {
		if bad(dep) != want {
			t.Errorf("bad(%s) = %v, want %v", dep, !want, want)
		}
	}
}
