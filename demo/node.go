package demo

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"jr2.dev/boundary/internal/contract"
)

// NodeOptions are what the demo on a real node (`make node-demo`) runs
// with: the node is already up, and this process reaches it and is
// reached by its pods.
type NodeOptions struct {
	// Controlplane is the built command; Kubectl the kubectl binary, run
	// with KUBECONFIG set to Kubeconfig for every line.
	Controlplane, Kubectl, Kubeconfig string
	// ListenIP is where the pods reach this process (the node's address):
	// the upstreams listen there.
	ListenIP string
	// CustodianImage and AgentImage are the refs of the images imported
	// into the node: the Custodian's (custodian-envoy) and the agent's.
	CustodianImage, AgentImage string
}

// The example pod on the node: DEMO_API_KEY bound to one upstream,
// otherKey to another, both values in the pod's convention Secret.
const (
	nodePod   = "demo"
	otherKey  = "OTHER_API_KEY"
	agentName = "agent"
)

// NodeLines are the kubectl lines the node demo runs, as
// docs/kubernetes.md shows them (a test holds the two together): DIR is
// the rendered directory, values/ the value directory.
var NodeLines = []string{
	"kubectl create secret generic jr2-held-secrets-" + nodePod + " --from-file=" + secretName + "=values/" + secretName +
		" --from-file=" + otherKey + "=values/" + otherKey + " --from-file=" + contract.TokenName + "=values/" + contract.TokenName,
	"kubectl apply --server-side --field-manager=jr2 -f DIR/kubernetes/",
	"kubectl wait --for=condition=Ready pod/" + nodePod + " --timeout=180s",
}

// RunOnNode is the demo on a real node: it renders the example pod for
// the node's images, creates its value Secret and applies its objects with
// the documented kubectl lines, waits for the kubelet to run it, and runs
// curl in the agent container (kubectl exec) holding only the stand-in:
// once toward the bound upstream, once toward another secret's host. It
// writes the same story as Run and checks the same outcomes; the value is
// never printed, only its fingerprint.
func RunOnNode(ctx context.Context, o NodeOptions, w io.Writer) (err error) {
	start := time.Now()
	var vs [2]string
	for i := range vs {
		if vs[i], err = newValue(); err != nil {
			return err
		}
	}
	value, other := vs[0], vs[1]
	tmp, err := os.MkdirTemp("", "jr2-node-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	ups, err := startUpstreams(ctx, o.Controlplane, filepath.Join(tmp, "upstream"), o.ListenIP, 2)
	if err != nil {
		return err
	}
	defer func() {
		for _, u := range ups {
			u.close()
		}
	}()
	up, otherUp := ups[0], ups[1]

	values := filepath.Join(tmp, "values")
	if err := os.MkdirAll(values, 0o700); err != nil {
		return err
	}
	for name, v := range map[string]string{secretName: value, otherKey: other, contract.TokenName: "demo-sandbox-token-unused"} {
		if err := os.WriteFile(filepath.Join(values, name), []byte(v), 0o600); err != nil {
			return err
		}
	}
	m := fmt.Sprintf(`{"pod":%q,"orchestrator":"127.0.0.1:9","secrets":[`+
		`{"name":%q,"hosts":[%q],"headers":["x-api-key"],"paths":["/v1/"]},`+
		`{"name":%q,"hosts":[%q],"headers":["x-api-key"],"paths":["/v1/"]}]}`,
		nodePod, secretName, up.target, otherKey, otherUp.target)
	if err := os.WriteFile(filepath.Join(tmp, "held.json"), []byte(m), 0o600); err != nil {
		return err
	}
	if _, err := tool(ctx, o.Controlplane, "ca", "init", "--dir", filepath.Join(tmp, "ca")); err != nil {
		return err
	}
	summary, err := tool(ctx, o.Controlplane, "render", "--manifest", filepath.Join(tmp, "held.json"), "--ca", filepath.Join(tmp, "ca"),
		"--out", filepath.Join(tmp, "DIR"), "--ca-bundle", up.caPEM, "--allow-local-targets",
		"--sidecar", "envoy", "--custodian-image", o.CustodianImage, "--agent-image", o.AgentImage,
		"--data-plane", "module", "--module", "/opt/jr2/lib/custodian-module.so", "--module-in-pod")
	if err != nil {
		return err
	}

	fmt.Fprintf(w, "jr2 boundary demo on a real node: kubelet, containerd and runc on this machine, in namespaces of their own\n\n")
	fmt.Fprintf(w, "controlplane render: %s\n", strings.TrimSpace(summary))
	fmt.Fprintf(w, "the value is values/%s, fingerprint %s (never printed); the cluster gets it as a Secret:\n", secretName, fingerprint(value))
	kubectl := func(line string) (string, error) { return o.kubectl(ctx, tmp, line) }
	for _, line := range NodeLines {
		fmt.Fprintf(w, "  $ %s\n", line)
		out, err := kubectl(line)
		if err != nil {
			return err
		}
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			fmt.Fprintf(w, "    %s\n", l)
		}
	}
	fmt.Fprintf(w, "the kubelet runs pod %s: the Custodian (%s) as a native sidecar; the agent (%s) holds only %s=%s (its env)\n\n",
		nodePod, o.CustodianImage, o.AgentImage, secretName, contract.StandIn(secretName))

	curl := func(target string) (int, string, error) {
		out, err := kubectl(curlLine(target))
		if err != nil {
			return 0, "", err
		}
		out = strings.TrimRight(out, "\n")
		i := strings.LastIndexByte(out, '\n')
		var code int
		fmt.Sscan(out[i+1:], &code)
		return code, out[:max(i, 0)], nil
	}
	fmt.Fprintf(w, "1. %s\n", curlLine(up.target))
	status, body, err := curl(up.target)
	if err != nil {
		return err
	}
	if err := swapped(w, up, "agent", status, body, value, other); err != nil {
		return err
	}

	fmt.Fprintf(w, "\n2. %s   (%s's host, not %s's)\n", curlLine(otherUp.target), otherKey, secretName)
	status, body, err = curl(otherUp.target)
	if err != nil {
		return err
	}
	if n := len(up.take()) + len(otherUp.take()); n != 0 || status != 403 {
		return fmt.Errorf("the refusal: %d, and %d requests reached an upstream", status, n)
	}
	if leaks(body, value) || leaks(body, other) {
		return fmt.Errorf("the refusal holds a value")
	}
	fmt.Fprintf(w, "   refused, and nothing reached either upstream; the agent saw %d:\n     %s\n", status, strings.TrimSpace(body))

	fmt.Fprintf(w, "\nthe Custodian's log, its jr2.custodian lines (kubectl logs %s -c custodian):\n", nodePod)
	lines, err := o.custodianLines(ctx, tmp, 3)
	if err != nil {
		return err
	}
	for _, l := range lines {
		if leaks(l, value) || leaks(l, other) {
			return fmt.Errorf("the Custodian's log holds a value")
		}
		fmt.Fprintf(w, "  %s\n", l)
	}
	fmt.Fprintf(w, "\ndone in %.1fs on the node.\n", time.Since(start).Seconds())
	return nil
}

// curlLine is the kubectl exec line that runs curl in the agent container
// with its own env: the stand-in of DEMO_API_KEY toward target.
func curlLine(target string) string {
	return fmt.Sprintf(`kubectl exec %s -c %s -- sh -c 'curl -sS -X POST -H "x-api-key: $%s" -w "\n%%{http_code}" https://%s/v1/messages'`,
		nodePod, agentName, secretName, target)
}

// custodianLines are the jr2.custodian lines of the Custodian's log once
// it holds n of them (its log is flushed every second), or those it holds
// after ten seconds.
func (o NodeOptions) custodianLines(ctx context.Context, dir string, n int) ([]string, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, err := o.kubectl(ctx, dir, "kubectl logs "+nodePod+" -c custodian")
		if err != nil {
			return nil, err
		}
		var lines []string
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "jr2.custodian ") {
				lines = append(lines, l)
			}
		}
		if len(lines) >= n || time.Now().After(deadline) {
			return lines, nil
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// kubectl runs line as a shell runs it, in dir, with kubectl first on PATH
// and KUBECONFIG the node's: the line a user types.
func (o NodeOptions) kubectl(ctx context.Context, dir, line string) (string, error) {
	cmd := exec.CommandContext(ctx, "sh", "-c", line)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(o.Kubectl)+":"+os.Getenv("PATH"), "KUBECONFIG="+o.Kubeconfig)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s: %v: %s", line, err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}
