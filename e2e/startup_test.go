//go:build linux

package e2e

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"jr2.dev/boundary/internal/contract"
	"jr2.dev/boundary/internal/testpki"
)

// TestBadValueRefusesStart: against each host, a pod whose value file
// holds a value too short to hold does not start — custodian serve exits,
// Envoy refuses its configuration (the module's config fails) and exits —
// naming the secret and the fix, never the value.
func TestBadValueRefusesStart(t *testing.T) {
	for _, host := range hostsToRun(t) {
		t.Run(host.Name(), func(t *testing.T) {
			tmp := t.TempDir()
			upCA := testpki.NewCA(t, "e2e start-up upstream CA")
			target := serveTLS(t, upCA, "127.0.0.1", http.NotFoundHandler())
			const weak = "zq7"
			m := manifest{Pod: podName, Orchestrator: serveLoopback(t, http.NotFoundHandler()), Sandbox: podName,
				Secrets: []manifestSecret{{Name: hopName, Hosts: []string{target}, Headers: []string{"x-api-key"}, Paths: []string{keyPaths}}}}
			dir, _ := renderLocalPod(t, tmp, host, m, upCA, map[string]string{hopName: weak, contract.TokenName: sentinel(t, contract.TokenName)})
			var argv []string
			switch h := host.(type) {
			case serveHost:
				argv = []string{bins.custodian, "serve", "--config", filepath.Join(dir, "custodian.json"),
					"--control", "127.0.0.1:0", "--egress", "127.0.0.1:0", "--health", "127.0.0.1:0"}
			case envoyHost:
				argv = append([]string{bins.custodian, "envoy", "--", h.bin}, envoyArgs(dir)...)
			default:
				t.Fatalf("no start-up argv for %s", host.Name())
			}
			r := startProcess(t, "", "stderr: ", argv...)
			select {
			case <-r.exited:
			case <-time.After(30 * time.Second):
				t.Fatalf("%s started on a value too short to hold:\n%s", host.Name(), r.out.String())
			}
			if r.exitErr == nil {
				t.Errorf("%s exited 0 on a value too short to hold", host.Name())
			}
			out := r.out.String()
			if want := "held secret " + hopName + ": the value is shorter than"; !strings.Contains(out, want) {
				t.Errorf("the output does not say %q:\n%s", want, out)
			}
			if strings.Contains(out, weak) {
				t.Error("the output holds the value")
			}
		})
	}
}
