//go:build linux

package readmewalk

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"jr2.dev/boundary/filter/scrub"
	"jr2.dev/boundary/internal/testkit/landlocktest"
)

// root is the repository, two directories up.
const root = "../../.."

// blocks returns the README's marked shell blocks by name, and the toml
// block of its `custodian run` section (the policy it shows).
func blocks(t *testing.T) (map[string]string, string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	var toml, section, name, fence string
	var text strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case fence != "" && line == "```":
			if fence == "sh" {
				out[name] = text.String()
			} else if toml == "" {
				toml = text.String()
			}
			fence, name = "", ""
			text.Reset()
		case fence != "":
			text.WriteString(line + "\n")
		case strings.HasPrefix(line, "## "):
			section = line
		case strings.HasPrefix(line, "<!-- readme-walk: "):
			name = strings.Fields(strings.TrimPrefix(line, "<!-- readme-walk: "))[0]
		case line == "```sh" && name != "":
			fence = "sh"
		case line == "```toml" && strings.Contains(section, "custodian run"):
			fence = "toml"
		}
	}
	return out, toml
}

// bin holds the commands the README puts on PATH, built once (TestMain).
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "jr2-readmewalk-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// tools builds the commands the README puts on PATH into bin, once.
func tools(t *testing.T) {
	t.Helper()
	built.Do(func() {
		cmd := exec.Command("go", "build", "-o", bin+"/", "./controlplane", "./custodian", "./effector", "./examples/example-upstream")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
}

var (
	built    sync.Once
	buildErr error
)

// copyExamples copies examples/ as a clone has it (its data, not the
// example's Go source) into dir/examples: what the README's blocks leave
// there when a user follows them in the repository (examples/.gitignore
// names each) is left out, or the walk would meet a ca/ or a run.jsonl
// that is refused as existing.
func copyExamples(t *testing.T, dir string) {
	t.Helper()
	src := filepath.Join(root, "examples")
	ignore, err := os.ReadFile(filepath.Join(src, ".gitignore"))
	if err != nil {
		t.Fatal(err)
	}
	ignored := func(rel string, isDir bool) bool {
		for _, p := range strings.Fields(string(ignore)) {
			name, dirOnly := strings.CutSuffix(p, "/")
			if ok, _ := filepath.Match(name, rel); ok && (isDir || !dirOnly) {
				return true
			}
		}
		return false
	}
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		dst := filepath.Join(dir, "examples", rel)
		switch {
		case d.IsDir() && d.Name() == "example-upstream":
			return filepath.SkipDir
		case rel != "." && ignored(rel, d.IsDir()):
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		case d.IsDir():
			return os.MkdirAll(dst, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// walk runs block with bash -e in dir, in a new network namespace whose
// loopback is up, in a process group that is killed when it returns.
// after is run in the same shell once the block succeeded (the test's own
// probes; never part of the block).
func walk(t *testing.T, dir, block, after string) string {
	t.Helper()
	out, err := walkErr(dir, block, after)
	if err != nil {
		t.Fatalf("the block failed: %v\n--- block\n%s--- output\n%s", err, block, out)
	}
	return out
}

// walkErr is walk, returning the block's failure with its output.
func walkErr(dir, block, after string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	script := "set -e\nip link set lo up\n" + block + after
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// A block may leave a process running that holds its output (the
	// by-hand block's upstream, which the Envoy block stops): once bash
	// has exited, its output is read for 2 s more and then closed, and
	// the process group is killed below.
	cmd.WaitDelay = 2 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // whatever the block left running
	}
	if errors.Is(err, exec.ErrWaitDelay) {
		err = nil // bash exited 0; what it left running held the output
	}
	return out.String(), err
}

func fingerprint(v string) string {
	sum := sha256.Sum256([]byte(v))
	return "sha256:" + hex.EncodeToString(sum[:8])
}

// noValue fails t when text holds value in any form the scrubber knows.
func noValue(t *testing.T, what, text, value string) {
	t.Helper()
	for _, f := range scrub.Forms([]byte(value)) {
		if strings.Contains(text, string(f)) {
			t.Errorf("%s holds a form of the value", what)
			return
		}
	}
}

// require skips the walk where this machine cannot run it, loudly; with
// JR2_REQUIRE_ALL=1 (.ci/run sets it) it fails instead: in CI the walk is
// the proof that the README works as pasted, and a skip would pass make
// test with nothing proven.
func require(t *testing.T, tools ...string) {
	t.Helper()
	notRun := t.Skipf
	if os.Getenv("JR2_REQUIRE_ALL") == "1" {
		notRun = t.Fatalf
	}
	if os.Geteuid() != 0 {
		notRun("SKIPPED, NOT PROVEN: the README walk needs root (a network namespace of its own; custodian run)")
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			notRun("SKIPPED, NOT PROVEN: the README walk needs %s", tool)
		}
	}
}

// walkBlock runs the README's block marked name as written, from a copy
// of examples/ in a new directory, with the tools built onto PATH, and
// returns the directory and what the block printed.
func walkBlock(t *testing.T, name string) (dir, out string) {
	t.Helper()
	require(t, "ip", "curl", "openssl", "go")
	bs, _ := blocks(t)
	block, ok := bs[name]
	if !ok {
		t.Fatalf("README.md has no block marked <!-- readme-walk: %s", name)
	}
	dir = t.TempDir()
	tools(t)
	copyExamples(t, dir)
	return dir, walk(t, dir, block, "")
}

// TestReadmeByHand: the by-hand section, as written: the upstream got the
// value, the agent's curl held and saw only the stand-in and the scrubbed
// echo, render named the Sandbox token's value file and what a loopback
// target means, and no output holds a form of the value.
func TestReadmeByHand(t *testing.T) {
	dir, out := walkBlock(t, "by-hand")

	raw, err := os.ReadFile(filepath.Join(dir, "examples", "values", "EXAMPLE_API_KEY"))
	if err != nil {
		t.Fatal(err)
	}
	value := strings.TrimSuffix(string(raw), "\n")
	for _, want := range []string{
		"pod example: Custodian holds EXAMPLE_API_KEY; 1 bound target\n",
		"JR2_SANDBOX_TOKEN is the Sandbox token",
		"--allow-local-targets: 127.0.0.2:8443 is loopback: curl, Python and Node go through the Custodian",
		"example-upstream: GET /v1/messages X-Api-Key=" + fingerprint(value) + "\n",
		"jr2.custodian action=intercept target=127.0.0.2:8443 secret=EXAMPLE_API_KEY method=GET status=200",
		`"X-Api-Key": "[secret:EXAMPLE_API_KEY]"`,
		"the value's fingerprint: " + fingerprint(value) + "\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the walk's output lacks %q\n%s", want, out)
		}
	}
	if strings.Contains(out, fingerprint("jr2-held-EXAMPLE_API_KEY")) {
		t.Error("the upstream received the stand-in")
	}
	env, _ := os.ReadFile(filepath.Join(dir, "examples", "pod", "harness.env"))
	if !bytes.Contains(env, []byte("EXAMPLE_API_KEY=jr2-held-EXAMPLE_API_KEY\n")) {
		t.Error("harness.env does not give the agent the stand-in")
	}
	noValue(t, "the walk's output", out, value)
	noValue(t, "harness.env", string(env), value)
}

// TestReadmeRun: the `custodian run` section, as written, with the policy
// the README shows being examples/policy.toml: the command held only the
// stand-in, the allowed host was tried with the token injected and the
// other refused, the bundle verifies, and neither the output nor the
// bundle holds a form of the value.
func TestReadmeRun(t *testing.T) {
	require(t, "ip", "curl", "openssl", "go")
	landlocktest.Require(t, 2)
	bs, toml := blocks(t)
	block, ok := bs["run"]
	if !ok {
		t.Fatal("README.md has no block marked <!-- readme-walk: run")
	}
	policy, err := os.ReadFile(filepath.Join(root, "examples", "policy.toml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(toml), "\n") {
		if !strings.Contains(string(policy), line+"\n") {
			t.Errorf("the README's policy line %q is not in examples/policy.toml", line)
		}
	}
	dir, out, value := walkExamples(t, block)
	bundle, err := os.ReadFile(filepath.Join(dir, "examples", "run.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^the command holds EXAMPLE_TOKEN=jr2-held-EXAMPLE_TOKEN$`),
		regexp.MustCompile(`(?m)^example\.com: (200|502)$`),
		regexp.MustCompile(`(?m)^example\.org: refused \(curl exit \d+\)$`),
		regexp.MustCompile(`(?m)^VERIFIED$`),
		regexp.MustCompile(`egress-decision attempt=\d+ decision="allow" host="example\.com" port=443 rule="allow_hosts\[0\]"`),
		regexp.MustCompile(`secret-injected host="example\.com:443" name="EXAMPLE_TOKEN"`),
		regexp.MustCompile(`egress-decision attempt=\d+ decision="deny" host="example\.org" port=443 rule="default-deny"`),
		// Stock git: the mediator's 401 challenge, then
		// git's helper answers it with the stand-in and the value goes in.
		regexp.MustCompile(`(?m)^git clone: the stand-in answered the 401 \(git exit \d+\)$`),
		regexp.MustCompile(`egress-decision attempt=\d+ decision="deny" host="example\.com" method="GET" port=443 reason="no-stand-in" rule="engine" status=401`),
		regexp.MustCompile(`http-request attempt=\d+ headers=.* method="GET" url="https://example\.com/org/app\.git/info/refs\?service=git-upload-pack"`),
	} {
		if !want.MatchString(out) {
			t.Errorf("the walk's output does not match %s\n%s", want, out)
		}
	}
	if n := strings.Count(out, `secret-injected host="example.com:443" name="EXAMPLE_TOKEN"`); n < 2 {
		t.Errorf("%d secret-injected records; want curl's and git's", n)
	}
	noValue(t, "the walk's output", out, string(value))
	noValue(t, "the bundle", string(bundle), string(value))
}

// TestExampleEffector: examples/effector.json starts an Effector (in a
// network namespace of its own, its values made here), which names the
// placement and the target it read, and stops on SIGTERM.
func TestExampleEffector(t *testing.T) {
	require(t, "ip", "go")
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", dir+"/", "./effector")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	secrets := filepath.Join(dir, "secrets")
	os.Mkdir(secrets, 0o700)
	key := make([]byte, 32)
	value := make([]byte, 24)
	rand.Read(key)
	rand.Read(value)
	os.WriteFile(filepath.Join(dir, "key"), []byte(hex.EncodeToString(key)), 0o600)
	os.WriteFile(filepath.Join(secrets, "EXAMPLE_API_KEY"), []byte(hex.EncodeToString(value)), 0o600)
	config, _ := filepath.Abs(filepath.Join(root, "examples", "effector.json"))
	script := "ip link set lo up && exec " + filepath.Join(dir, "effector")
	eff := exec.Command("sh", "-c", script)
	eff.Env = []string{"POD_NAME=example", "POD_IP=127.0.0.1", "JR2_EFFECTOR_KEY=" + filepath.Join(dir, "key"),
		"JR2_EFFECTOR_SECRETS=" + secrets, "JR2_EFFECTOR_CONFIG=" + config, "JR2_EFFECTOR_DRAIN_SECONDS=1",
		"JR2_EFFECTOR_TEST_TERMINATION_LOG=" + filepath.Join(dir, "termination-log")}
	eff.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Setpgid: true}
	var stderr bytes.Buffer
	eff.Stderr = &stderr
	stdout, err := eff.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := eff.Start(); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(-eff.Process.Pid, syscall.SIGKILL)
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() || sc.Text() != "jr2.effector ready placement=instance replica=example secrets=EXAMPLE_API_KEY targets=1" {
		eff.Wait()
		t.Fatalf("the Effector's first line is %q; stderr %q", sc.Text(), stderr.String())
	}
	eff.Process.Signal(syscall.SIGTERM)
	for sc.Scan() {
	}
	if err := eff.Wait(); err != nil {
		t.Errorf("the Effector after SIGTERM: %v; stderr %q", err, stderr.String())
	}
}

// TestReadmeEffector: the README's Effector block, as written, from
// examples/effector.json: the Effector names the placement, the secret and
// the target it read, answers its health route, runs the one signed http
// effect effector call sends (the upstream got the value, the signed answer
// holds the echo scrubbed), drains and exits 0 on SIGTERM, and no output
// holds the value or a key: one signed effect a user can send by hand.
func TestReadmeEffector(t *testing.T) {
	dir, out := walkBlock(t, "effector")
	raw, err := os.ReadFile(filepath.Join(dir, "examples", "effector-secrets", "EXAMPLE_API_KEY"))
	if err != nil {
		t.Fatal(err)
	}
	fp := fingerprint(strings.TrimSpace(string(raw)))
	for _, want := range []string{
		"jr2.effector ready placement=instance replica=example secrets=EXAMPLE_API_KEY targets=1\n",
		"ok\n", "jr2.effector action=drain-ended waiting=0\n",
		"example-upstream: GET /v1/messages X-Api-Key=" + fp + "\n",
		"the value's fingerprint: " + fp + "\n",
		`{"state":"settled","replica":{"name":"example","address":"127.0.0.1:8082"},"outcome":{"kind":"response","status":200,`,
		`\"X-Api-Key\": \"[secret:EXAMPLE_API_KEY]\"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the block's output holds no %q:\n%s", want, out)
		}
	}
	for _, f := range []string{"effector-secrets/EXAMPLE_API_KEY", "effector.key", "signing.key"} {
		raw, err := os.ReadFile(filepath.Join(dir, "examples", f))
		if err != nil {
			t.Fatal(err)
		}
		if v := strings.TrimSpace(string(raw)); len(v) < 32 || strings.Contains(out, v) {
			t.Errorf("%s: %d bytes, or its value is in the output", f, len(v))
		}
	}
}

// TestReadmeModes: the README's modes block, as written, twice in one
// directory (the second run meets the first's bundles): each time a replay
// of a recorded run prints the same bytes with nothing sent, faults draws,
// and preflight's plan lists both effects. Then, with a policy whose path
// does not exist, every run is refused: the block fails, says FAILED, and
// never claims the replay matched (two refused runs once printed two empty
// files, and cmp called them equal).
func TestReadmeModes(t *testing.T) {
	require(t, "ip", "curl", "openssl", "go")
	landlocktest.Require(t, 2)
	bs, _ := blocks(t)
	block, ok := bs["modes"]
	if !ok {
		t.Fatal("README.md has no block marked <!-- readme-walk: modes")
	}
	dir, out, value := walkExamples(t, block)
	checkModes(t, dir, out, value)
	t.Run("again in the same directory", func(t *testing.T) {
		probe := filepath.Join(dir, "value")
		out := walk(t, dir, block, "printf %s \"$EXAMPLE_TOKEN\" > "+probe+"\n")
		value, _ := os.ReadFile(probe)
		checkModes(t, dir, out, value)
	})
	t.Run("a refused run fails the block", func(t *testing.T) {
		pol := filepath.Join(dir, "examples", "policy.toml")
		b, _ := os.ReadFile(pol)
		os.WriteFile(pol, []byte(strings.Replace(string(b), `write_paths = ["`, `write_paths = ["/nonexistent-jr2-readme", "`, 1)), 0o644)
		out, err := walkErr(dir, block, "")
		if err == nil || !strings.Contains(out, "FAILED: a run was refused") || strings.Contains(out, "the replay printed what the live run printed") ||
			!strings.Contains(out, "no bundle was written") {
			t.Errorf("a refused run: the block ended %v\n%s", err, out)
		}
	})
}

// checkModes asserts what one walk of the modes block printed and left in
// dir.
func checkModes(t *testing.T, dir, out string, value []byte) {
	t.Helper()
	if strings.Contains(out, "FAILED") {
		t.Errorf("the block says FAILED:\n%s", out)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^the replay printed what the live run printed$`),
		regexp.MustCompile(`(?m)^GET (200|502|429)$`),
		regexp.MustCompile(`(?m)^POST (200|502|429)$`),
		regexp.MustCompile(`(?m)^\d+ +GET +example\.com:443 +/ +- +EXAMPLE_TOKEN +allow_hosts\[0\] \(engine\)$`),
		regexp.MustCompile(`(?m)^\d+ +POST +example\.com:443 +/ +7 B sha256:\w{12} +EXAMPLE_TOKEN +allow_hosts\[0\] \(engine\)$`),
		regexp.MustCompile(`(?m)^2 effects planned\nVERIFIED$`),
	} {
		if !want.MatchString(out) {
			t.Errorf("the walk's output does not match %s\n%s", want, out)
		}
	}
	live, _ := os.ReadFile(filepath.Join(dir, "examples", "live.out"))
	if len(live) == 0 {
		t.Error("the live run printed nothing")
	}
	for _, name := range []string{"live.jsonl", "replay.jsonl", "faults.jsonl", "plan.jsonl"} {
		b, err := os.ReadFile(filepath.Join(dir, "examples", name))
		if err != nil {
			t.Fatal(err)
		}
		noValue(t, name, string(b), string(value))
	}
	noValue(t, "the walk's output", out, string(value))
}

// walkExamples runs a README block of a contained run as written, from a
// copy of examples/ with the README's commands on PATH, and returns the
// directory, the block's output and the value EXAMPLE_TOKEN held.
func walkExamples(t *testing.T, block string) (dir, out string, value []byte) {
	t.Helper()
	dir = t.TempDir()
	tools(t)
	copyExamples(t, dir)
	probe := filepath.Join(dir, "value")
	out = walk(t, dir, block, "printf %s \"$EXAMPLE_TOKEN\" > "+probe+"\n")
	value, err := os.ReadFile(probe)
	if err != nil || len(value) < 32 {
		t.Fatalf("the block did not leave EXAMPLE_TOKEN set: %v", err)
	}
	return dir, out, value
}
