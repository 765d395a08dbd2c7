package noderun

import (
	"bytes"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"

	"jr2.dev/boundary/internal/testkit/imagestest"
	"jr2.dev/boundary/internal/testkit/kubetest"
	"jr2.dev/boundary/internal/testkit/nodetest"
)

// built builds jr2-node and controlplane as the Makefile does, into a
// directory of the test's.
func built(t *testing.T) (node, bin string) {
	t.Helper()
	if _, err := nodetest.FindTools(); err != nil {
		if errors.Is(err, kubetest.ErrMissing) && os.Getenv(kubetest.EnvSkip) == "skip" && os.Getenv(kubetest.EnvRequireAll) != "1" {
			t.Skipf("NOT RUN on a real node: %v (%s=skip says so on purpose)", err, kubetest.EnvSkip)
		}
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		if os.Getenv(kubetest.EnvRequireAll) == "1" {
			t.Fatal("NOT RUN: a node needs root, and JR2_REQUIRE_ALL=1")
		}
		t.Skip("NOT RUN: a node needs root")
	}
	imagestest.Find(t) // every image: up imports them all
	bin = t.TempDir()
	cmd := exec.Command("go", "build", "-o", bin+"/", "./controlplane", "./internal/testkit/noderun/cmd/jr2-node")
	cmd.Dir = "../../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return filepath.Join(bin, "jr2-node"), bin
}

// run runs the built jr2-node from the repository root, as make does.
func run(t *testing.T, node string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	cmd := exec.Command(node, args...)
	cmd.Dir = "../../.."
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); err != nil && cmd.ProcessState == nil {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), o.String(), e.String()
}

var fingerprintRe = regexp.MustCompile(`fingerprint (sha256:[0-9a-f]{16})`)

// TestNodeDemo: `make node-demo`'s program, end to end on a real node,
// prints the story and checks it: the fingerprint of the value the
// upstream got is the held value's, the agent's echo is scrubbed, the
// stand-in toward another secret's host is refused 403 with nothing
// reaching an upstream, no value is printed, the documented kubectl lines
// ran, and the node is removed with the host unchanged (nodetest's own
// check, which the program reports).
func TestNodeDemo(t *testing.T) {
	node, bin := built(t)
	code, out, stderr := run(t, node, "demo", "--bin", bin)
	if code != 0 {
		t.Fatalf("jr2-node demo: exit %d\n%s\n%s", code, out, stderr)
	}
	t.Logf("jr2-node demo:\n%s", out)
	fps := fingerprintRe.FindAllStringSubmatch(out, -1)
	if len(fps) != 2 || fps[0][1] != fps[1][1] {
		t.Errorf("fingerprints %v: want the held value's and the one the upstream received, equal", fps)
	}
	for _, want := range []string{
		"$ kubectl create secret generic jr2-held-secrets-demo --from-file=DEMO_API_KEY=values/DEMO_API_KEY",
		"$ kubectl apply --server-side --field-manager=jr2 -f DIR/kubernetes/\n",
		"pod/demo serverside-applied",
		"pod/demo condition met",
		"the upstream received x-api-key with fingerprint",
		`"error": "invalid x-api-key: [secret:DEMO_API_KEY]"`,
		`"base64": "[secret:DEMO_API_KEY]"`,
		"refused, and nothing reached either upstream; the agent saw 403:",
		"jr2.custodian action=intercept ",
		"jr2.custodian action=refuse ",
		hostUnchanged + "\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the demo's output lacks %q", want)
		}
	}
	if strings.Contains(out+stderr, "sk-demo-") {
		t.Error("the demo printed a value")
	}
}

// TestNodeUpDown: `make node-up`'s program leaves a node running that the
// host's kubectl reaches through the printed kubeconfig (a pod run and
// kubectl exec in it included); a second up
// refuses, naming make node-down; down stops it and leaves nothing: the
// runner's process and its forwarding port are gone, its cgroupRoot is
// removed, the state directory is gone, and the host check passed.
func TestNodeUpDown(t *testing.T) {
	node, _ := built(t)
	state := filepath.Join(t.TempDir(), "node")
	code, out, stderr := run(t, node, "up", "--state", state)
	if code != 0 {
		log, _ := os.ReadFile(filepath.Join(state, logFile))
		t.Fatalf("jr2-node up: exit %d\n%s\n%s\n%s", code, out, stderr, log)
	}
	downed := false
	t.Cleanup(func() {
		if !downed {
			run(t, node, "down", "--state", state)
		}
	})
	kc := filepath.Join(state, kubeconfig)
	if !strings.Contains(out, "--kubeconfig "+kc+" get nodes") || !strings.Contains(out, "make node-down") {
		t.Errorf("up printed no kubectl line for %s, or no make node-down:\n%s", kc, out)
	}
	pid := readPid(t, state)
	log, _ := os.ReadFile(filepath.Join(state, logFile))
	m := regexp.MustCompile(`cgroupRoot is /(jr2-node-[0-9a-f]+)`).FindSubmatch(log)
	if m == nil {
		t.Fatalf("the runner's log names no cgroupRoot:\n%s", log)
	}
	cgroup := string(m[1])

	tools, err := kubetest.FindTools()
	if err != nil {
		t.Fatal(err)
	}
	get, err := exec.Command(tools.Kubectl, "--kubeconfig", kc, "get", "nodes", "-o", "name").CombinedOutput()
	if err != nil || strings.TrimSpace(string(get)) != "node/"+nodetest.NodeName {
		t.Errorf("kubectl --kubeconfig %s get nodes: %v %q; want node/%s", kc, err, get, nodetest.NodeName)
	}
	// kubectl exec is an upgraded connection, through the same forward.
	kubectl := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(tools.Kubectl, append([]string{"--kubeconfig", kc}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	agent := imagestest.Find(t, "agent")["agent"].Ref
	kubectl("run", "probe", "--image="+agent, "--image-pull-policy=Never", "--restart=Never")
	kubectl("wait", "--for=condition=Ready", "pod/probe", "--timeout=180s")
	if out := kubectl("exec", "probe", "--", "sh", "-c", "echo exec-through-the-forward"); strings.TrimSpace(out) != "exec-through-the-forward" {
		t.Errorf("kubectl exec through the forward printed %q", out)
	}
	cfg, err := clientcmd.LoadFromFile(kc)
	if err != nil {
		t.Fatal(err)
	}
	var server string
	for _, c := range cfg.Clusters {
		server = strings.TrimPrefix(c.Server, "https://")
	}

	code, out, stderr = run(t, node, "up", "--state", state)
	if code == 0 || !strings.Contains(stderr, "already running (pid "+strconv.Itoa(pid)) || !strings.Contains(stderr, "make node-down") {
		t.Errorf("a second up: exit %d %q %q; want a refusal naming the running pid and make node-down", code, out, stderr)
	}

	code, out, stderr = run(t, node, "down", "--state", state)
	downed = true
	if code != 0 || !strings.Contains(out, hostUnchanged) {
		t.Errorf("jr2-node down: exit %d\n%s\n%s", code, out, stderr)
	}
	if !gone(pid) {
		t.Errorf("the runner (pid %d) is still there after down", pid)
	}
	if c, err := net.Dial("tcp", server); err == nil {
		c.Close()
		t.Errorf("the node's API server is still forwarded at %s after down", server)
	}
	if _, err := os.Stat(state); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s is still there after down: %v", state, err)
	}
	left, _ := filepath.Glob("/sys/fs/cgroup/*/" + cgroup)
	if len(left) != 0 {
		t.Errorf("the node's cgroupRoot is left: %v", left)
	}
	code, out, _ = run(t, node, "down", "--state", state)
	if code != 0 || !strings.Contains(out, "no node is running") {
		t.Errorf("down with no node: exit %d %q; want 0 and no node is running", code, out)
	}
}

func readPid(t *testing.T, state string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(state, pidFile))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}
