//go:build linux

package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"jr2.dev/boundary/filter/scrub"
	"jr2.dev/boundary/internal/contract"
)

// TestE2E runs the whole suite against each host in turn — custodian serve,
// then core Envoy with the dynamic module: it renders one pod, starts the
// Custodian on the host, runs every client, the tunnels and the control
// listener against it in parallel, then stops the Custodian and checks
// everything it printed. At the end it prints how many cases ran against
// each host and fails unless the sets are equal and none is empty.
func TestE2E(t *testing.T) {
	hosts := hostsToRun(t)
	for _, host := range hosts {
		run(t, host.Name(), func(t *testing.T) {
			w := newWorld(t, host)
			t.Logf("host: %s; rendered: %s", host.Name(), strings.TrimSpace(w.summary))

			run(t, "render", w.testRender)
			run(t, "traffic", func(t *testing.T) {
				for _, c := range clients {
					run(t, c.name, func(t *testing.T) {
						t.Parallel()
						w.testClient(t, c)
					})
				}
				run(t, "node20 without an agent", func(t *testing.T) { t.Parallel(); w.testNode20EnvProxy(t) })
				run(t, "git", func(t *testing.T) { t.Parallel(); w.testGit(t) })
				run(t, "tunnels", func(t *testing.T) { t.Parallel(); w.testTunnels(t) })
				run(t, "control", func(t *testing.T) { t.Parallel(); w.testControl(t) })
				run(t, "health limits", func(t *testing.T) { t.Parallel(); w.testHealthLimits(t) })
			})
			run(t, "upstreams never saw a stand-in", w.testUpstreamsSawNoStandIn)
			run(t, "log", w.testLog)
		})
	}
}

// cases records every case (subtest) the suites start with run, by host:
// Test…/<host>/<case> as "Test…/<case>".
var cases = struct {
	mu sync.Mutex
	m  map[string][]string
}{m: map[string][]string{}}

// run is t.Run that records the case for checkCases once it ended, unless
// it was skipped: a skip is not a case that ran against the host.
func run(t *testing.T, name string, f func(*testing.T)) bool {
	return t.Run(name, func(t *testing.T) {
		defer func() {
			if t.Skipped() {
				return
			}
			if parts := strings.SplitN(t.Name(), "/", 3); len(parts) == 3 {
				cases.mu.Lock()
				cases.m[parts[1]] = append(cases.m[parts[1]], parts[0]+"/"+parts[2])
				cases.mu.Unlock()
			}
		}()
		f(t)
	})
}

// checkCases prints how many cases ran against each host, over every
// suite that runs a case with run below Test…/<host>/, and returns 1 if a
// host ran none or the hosts ran different sets. It runs after every test
// (runMain); a run that recorded no case at all (go test -run naming
// none of them) prints nothing, and make test, which needs the summary
// file, fails.
func checkCases() int {
	cases.mu.Lock()
	defer cases.mu.Unlock()
	if len(cases.m) == 0 {
		return 0
	}
	var hosts []string
	switch os.Getenv(hostEnv) {
	case "serve":
		hosts = []string{serveHost{}.Name()}
	case "envoy":
		hosts = []string{envoyHost{}.Name()}
	default:
		hosts = []string{serveHost{}.Name(), envoyHost{}.Name()}
	}
	failed := false
	fail := func(format string, a ...any) {
		failed = true
		fmt.Fprintf(os.Stderr, format+"\n", a...)
	}
	var sets []map[string]bool
	var counts []string
	for _, h := range hosts {
		set := map[string]bool{}
		for _, c := range cases.m[strings.ReplaceAll(h, " ", "_")] {
			set[c] = true
		}
		if len(set) == 0 {
			fail("e2e: no case ran against %s", h)
		}
		sets = append(sets, set)
		counts = append(counts, fmt.Sprintf("%d against %s", len(set), h))
	}
	equal := true
	for i := 1; i < len(sets); i++ {
		for _, pair := range [][2]int{{0, i}, {i, 0}} {
			for c := range sets[pair[0]] {
				if !sets[pair[1]][c] {
					equal = false
					fail("e2e: case %q ran against %s, not against %s", c, hosts[pair[0]], hosts[pair[1]])
				}
			}
		}
	}
	verdict := "the sets are equal"
	if !equal {
		verdict = "the sets DIFFER"
	}
	if len(hosts) == 1 {
		verdict = "one host only"
	}
	line := fmt.Sprintf("e2e: cases run: %s; %s\n", strings.Join(counts, ", "), verdict)
	fmt.Print(line)
	// go test ./... shows a passing package's output only with -v; make
	// test prints this file after the run instead.
	if p := os.Getenv("JR2_E2E_SUMMARY"); p != "" && !failed {
		if err := os.WriteFile(p, []byte(line), 0o644); err != nil {
			fail("e2e: write the summary: %v", err)
		}
	}
	if failed {
		return 1
	}
	return 0
}

// testRender checks what controlplane render wrote against the spec:
// the summary line, harness.env (ADR-0059's list, in full), and no value
// in any rendered file.
func (w *world) testRender(t *testing.T) {
	held := w.heldNames()
	want := fmt.Sprintf("pod %s: Custodian holds %s; %d bound targets\n", podName, strings.Join(held, ", "), len(held))
	if w.summary != want {
		t.Errorf("render printed %q, want %q", w.summary, want)
	}
	ca := filepath.Join(w.dir, "ca")
	var env []string
	for _, n := range append(held, contract.TokenName) {
		env = append(env, n+"="+standIn(n))
	}
	env = append(env,
		"HTTPS_PROXY=http://127.0.0.1:15001", "https_proxy=http://127.0.0.1:15001",
		"NO_PROXY=localhost,127.0.0.1,::1", "no_proxy=localhost,127.0.0.1,::1",
		"NODE_USE_ENV_PROXY=1",
	)
	// Each trust variable names extra.crt (added to a tool's own roots) or
	// bundle.crt (in place of them), or wgetrc.
	for _, v := range [][2]string{
		{"NODE_EXTRA_CA_CERTS", "extra.crt"}, {"SSL_CERT_FILE", "bundle.crt"}, {"REQUESTS_CA_BUNDLE", "bundle.crt"},
		{"GIT_SSL_CAINFO", "bundle.crt"}, {"CURL_CA_BUNDLE", "bundle.crt"}, {"AWS_CA_BUNDLE", "bundle.crt"},
		{"PIP_CERT", "bundle.crt"}, {"CARGO_HTTP_CAINFO", "bundle.crt"}, {"GRPC_DEFAULT_SSL_ROOTS_FILE_PATH", "bundle.crt"},
		{"CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE", "bundle.crt"}, {"DENO_CERT", "extra.crt"}, {"WGETRC", "wgetrc"},
	} {
		env = append(env, v[0]+"="+filepath.Join(ca, v[1]))
	}
	// Every held secret of the suite rides authorization: one credential
	// helper per target (an empty entry first, which drops the machine's).
	env = append(env, fmt.Sprintf("GIT_CONFIG_COUNT=%d", 2*len(held)))
	for i, n := range held {
		target := w.git.target
		if n != gitName {
			target = w.echo[strings.ToLower(strings.TrimPrefix(n, "KEY_"))].target
		}
		key := "credential.https://" + strings.TrimSuffix(target, ":443") + ".helper"
		env = append(env, fmt.Sprintf("GIT_CONFIG_KEY_%d=%s", 2*i, key), fmt.Sprintf("GIT_CONFIG_VALUE_%d=", 2*i),
			fmt.Sprintf("GIT_CONFIG_KEY_%d=%s", 2*i+1, key),
			fmt.Sprintf(`GIT_CONFIG_VALUE_%d=!f() { test "$1" = get || return 0; echo username=x-access-token; echo password=%s; }; f`, 2*i+1, standIn(n)))
	}
	if got, want := strings.Join(w.harness, "\n"), strings.Join(env, "\n"); got != want {
		t.Errorf("harness.env:\n%s\nwant:\n%s", got, want)
	}
	err := filepath.Walk(w.dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if what := w.leak(b); what != "" {
			t.Errorf("rendered file %s holds %s", p, what)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// leak names the first value (in any form the scrubber covers) found in
// b, or "".
func (w *world) leak(b []byte) string {
	for _, n := range w.secretNames() {
		for _, f := range scrub.Forms([]byte(w.values[n])) {
			if bytes.Contains(b, f) {
				return "a form of the value of " + n
			}
		}
	}
	return ""
}

// testUpstreamsSawNoStandIn: over every request every upstream and the
// Orchestrator received in the whole run, no stand-in.
func (w *world) testUpstreamsSawNoStandIn(t *testing.T) {
	recs := map[string]*recorder{"git": &w.git.recorder, "orchestrator": &w.orch.recorder}
	for c, u := range w.echo {
		recs[c] = &u.recorder
	}
	total := 0
	for name, rc := range recs {
		for _, s := range rc.all() {
			total++
			if strings.Contains(strings.ToLower(s.dump()), contract.StandInPrefix) {
				t.Errorf("%s received a stand-in:\n%s", name, s.dump())
			}
		}
	}
	if total == 0 {
		t.Fatal("no upstream received anything: the scan proves nothing")
	}
}

// logLine is each form of line the log contract allows.
var logLine = regexp.MustCompile(`^jr2\.custodian (` +
	`ready secrets=\S+ hosts=\d+( control=\S+ egress=\S+ health=\S+)?` +
	`|action=intercept target=\S+ secret=\S+ method=[A-Z]+ status=\d+` +
	`|action=tunnel target=\S+` +
	`|action=refuse target=\S+ reason=[a-z-]+` +
	`|action=error listener=[a-z]+ reason=[a-z-]+` +
	`|action=mint result=ok secret=\S+` +
	`|action=mint result=refused secret=\S+ reason=[a-z-]+)$`)

// testLog stops the Custodian and checks all it printed: a graceful exit,
// the ready line exactly, every line one of the contract's four, and no
// value (in any form) and no stand-in anywhere in stdout or stderr.
func (w *world) testLog(t *testing.T) {
	err := w.run.Stop()
	if err != nil {
		t.Errorf("the Custodian did not stop cleanly: %v", err)
	}
	lines := w.run.out.Lines()
	all := strings.Join(lines, "\n")
	if strings.Contains(all, "DATA RACE") {
		t.Errorf("the race detector reported on the Custodian:\n%s", all)
	}
	// The held table's order: the manifest's (sorted here), then the token
	// render adds.
	held := w.heldNames()
	wantReady := w.host.ReadyLine(strings.Join(append(held, contract.TokenName), ","), len(held), w.run)
	var logLines, stdout []string
	for _, l := range lines {
		if strings.HasPrefix(l, "jr2.custodian") {
			logLines = append(logLines, l)
			if !logLine.MatchString(l) {
				t.Errorf("not a line of the log contract: %q", l)
			}
		}
		if !strings.HasPrefix(l, "stderr: ") {
			stdout = append(stdout, l)
		}
	}
	// The first line of the contract is the ready line (Envoy prints lines
	// of its own before it).
	if first(logLines) != wantReady {
		t.Errorf("first jr2.custodian line %q, want %q", first(logLines), wantReady)
	}
	if _, ok := w.host.(serveHost); ok {
		// stdout is custodian serve's log: the contract's lines and nothing
		// else. stderr is for errors (which carry no secret: checked below).
		if len(stdout) != len(logLines) {
			t.Errorf("custodian serve printed lines outside the log contract on stdout:\n%s", strings.Join(stdout, "\n"))
		}
		for _, l := range lines {
			if strings.HasPrefix(l, "stderr: ") {
				t.Logf("custodian serve's %s", l)
			}
		}
	}
	if what := w.leak([]byte(all)); what != "" {
		t.Errorf("the Custodian's output holds %s", what)
	}
	if strings.Contains(strings.ToLower(all), contract.StandInPrefix) {
		t.Errorf("the Custodian's output holds a stand-in:\n%s", all)
	}
	if len(logLines) < 50 {
		t.Errorf("only %d log lines: the traffic did not run", len(logLines))
	}
}

func first(xs []string) string {
	if len(xs) == 0 {
		return ""
	}
	return xs[0]
}

// targetLog follows the log lines of one target, in order: the lines a test
// expects, exactly, and no other.
type targetLog struct {
	w      *world
	target string
	want   []string
}

func (w *world) logOf(target string) *targetLog { return &targetLog{w: w, target: target} }

// expect adds lines and waits until the target's lines are exactly those
// expected so far (a host logs an intercept once the answer has gone, so
// a client can finish first).
func (l *targetLog) expect(t *testing.T, lines ...string) {
	t.Helper()
	l.want = append(l.want, lines...)
	mark := " target=" + l.target + " "
	var got []string
	deadline := time.Now().Add(5 * time.Second)
	for {
		got = l.w.run.out.matching(func(s string) bool { return strings.Contains(s+" ", mark) })
		if len(got) >= len(l.want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if strings.Join(got, "\n") != strings.Join(l.want, "\n") {
		t.Fatalf("log lines of %s:\n%s\nwant:\n%s", l.target, strings.Join(got, "\n"), strings.Join(l.want, "\n"))
	}
}
