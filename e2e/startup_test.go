//go:build linux

package e2e

import (
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/internal/contract"
	"jr2.dev/boundary/internal/testkit/testpki"
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

// TestOneAddressOneCustodian: against each host, a second pod's Custodian
// started on the addresses a running one listens on does not start — it
// exits naming the address in use — and the first keeps answering. Envoy
// sets SO_REUSEPORT by default, under which the second would bind
// beside the first and take some of its agent's requests, with its own
// values.
func TestOneAddressOneCustodian(t *testing.T) {
	for _, host := range hostsToRun(t) {
		t.Run(host.Name(), func(t *testing.T) {
			upCA := testpki.NewCA(t, "e2e one-address upstream CA")
			target := serveTLS(t, upCA, "127.0.0.1", http.NotFoundHandler())
			orch := serveLoopback(t, http.NotFoundHandler())
			m := manifest{Pod: podName, Orchestrator: orch, Sandbox: podName,
				Secrets: []manifestSecret{{Name: hopName, Hosts: []string{target}, Headers: []string{"x-api-key"}, Paths: []string{keyPaths}}}}
			var dirs [2]string
			for i := range dirs {
				dirs[i], _ = renderLocalPod(t, t.TempDir(), host, m, upCA, map[string]string{hopName: sentinel(t, hopName), contract.TokenName: sentinel(t, contract.TokenName)})
			}
			cfg, err := filter.LoadConfig(filepath.Join(dirs[0], "custodian.json"))
			if err != nil {
				t.Fatal(err)
			}
			argv := func(dir string) []string {
				switch h := host.(type) {
				case serveHost:
					return []string{bins.custodian, "serve", "--config", filepath.Join(dir, "custodian.json"),
						"--control", cfg.Listeners.Control, "--egress", cfg.Listeners.Egress, "--health", "127.0.0.1:" + portOf(cfg.Listeners.Health)}
				case envoyHost:
					return append([]string{bins.custodian, "envoy", "--", h.bin}, envoyArgs(dir)...)
				}
				t.Fatalf("no start argv for %s", host.Name())
				return nil
			}
			prefix := "stderr: " // custodian serve's log is its stdout; Envoy's is on stderr
			if _, ok := host.(envoyHost); ok {
				prefix = ""
			}
			first := startProcess(t, "", prefix, argv(dirs[0])...)
			health := "http://127.0.0.1:" + portOf(cfg.Listeners.Health) + "/healthz"
			waitHealthy(t, health) // Envoy's ready line comes at the first probe
			first.out.waitPrefix(t, "jr2.custodian ready ", 30*time.Second, first.exited)

			second := startProcess(t, "", prefix, argv(dirs[1])...)
			select {
			case <-second.exited:
			case <-time.After(30 * time.Second):
				t.Fatalf("a second %s started on the addresses of a running one:\n%s", host.Name(), second.out.String())
			}
			out := second.out.String()
			if second.exitErr == nil || !strings.Contains(strings.ToLower(out), "address already in use") {
				t.Errorf("the second %s did not refuse naming the address in use (exit %v):\n%s", host.Name(), second.exitErr, out)
			}
			named := false
			for _, a := range []string{cfg.Listeners.Control, cfg.Listeners.Egress, portOf(cfg.Listeners.Health)} {
				named = named || strings.Contains(out, a)
			}
			if !named {
				t.Errorf("the second %s's refusal names none of its addresses:\n%s", host.Name(), out)
			}
			for i := 0; i < 20; i++ {
				resp, err := http.Get(health)
				if err != nil || resp.StatusCode != 200 {
					t.Fatalf("the first %s stopped answering: %v", host.Name(), err)
				}
				resp.Body.Close()
			}
			select {
			case <-first.exited:
				t.Fatalf("the first %s exited:\n%s", host.Name(), first.out.String())
			default:
			}
		})
	}
}

func portOf(hostport string) string {
	_, p, _ := net.SplitHostPort(hostport)
	return p
}

// waitHealthy waits up to 30 s for url to answer 200.
func waitHealthy(t *testing.T, url string) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer 200: %v", url, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
