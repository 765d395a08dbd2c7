//go:build linux

package reap_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"jr2.dev/boundary/effector/internal/keep"
	"jr2.dev/boundary/effector/internal/reap"
	"jr2.dev/boundary/effector/internal/reap/reaptest"
)

// The subreaper flag and the settle loop's kills are the whole process's,
// so each scenario runs in a re-executed test binary playing the Effector;
// keepEnv makes one play `effector keep`.
const (
	scenarioEnv = "JR2_REAP_TEST_SCENARIO"
	keepEnv     = "JR2_REAP_TEST_KEEP"
)

var scenarios = map[string]func() error{
	"beside": besideScenario,
	"plain":  plainScenario,
	"race":   raceScenario,
}

func TestMain(m *testing.M) {
	if os.Getenv(keepEnv) == "1" {
		os.Exit(keep.Main(os.Args[1:]))
	}
	if name := os.Getenv(scenarioEnv); name != "" {
		if err := scenarios[name](); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func runScenario(t *testing.T, name string, env ...string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), scenarioEnv+"="+name), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil {
		t.Fatalf("scenario %s: %v\nstdout:\n%s\nstderr:\n%s", name, err, out.String(), errb.String())
	}
	return out.String()
}

func markers(n int) []string {
	ms := make([]string, n)
	for i := range ms {
		ms[i] = reaptest.Marker()
	}
	return ms
}

// A setsid escapee and an escapee of that escapee are dead once their
// Effect settles; an orphan in a live Effect's group, and a daemon under a
// live Effect's keeper, live through that settle; each is dead after its
// own Effect settles.
func TestSettleBeside(t *testing.T) {
	ms := markers(3)
	for _, m := range ms {
		reaptest.Cleanup(t, m)
	}
	out := runScenario(t, "beside", "MA="+ms[0], "MB="+ms[1], "MC="+ms[2], "D="+t.TempDir())
	want := `before: A=2 B=1 C=2
settled A: A=0 B=1 C=2
settled B: A=0 B=0 C=2
settled C: A=0 B=0 C=0
`
	if out != want {
		t.Errorf("scenario saw:\n%swant:\n%s", out, want)
	}
	for _, m := range ms {
		if pids := reaptest.Marked(m); len(pids) != 0 {
			t.Errorf("marker %s still running: %v", m, pids)
		}
	}
}

const escapees = `
setsid sh -c 'setsid sh -c "echo > \"\$D/\$0-2\"; exec sleep \$M" "$0" & echo > "$D/$0-1"; exec sleep $M' "$N" &
while [ ! -e "$D/$N-1" ] || [ ! -e "$D/$N-2" ]; do sleep 0.01; done`

func besideScenario() error {
	if err := reap.SetChildSubreaper(); err != nil {
		return err
	}
	tr := reap.NewTracker()
	env := func(kv ...string) []string { return append(os.Environ(), kv...) }
	count := func() string {
		return fmt.Sprintf("A=%d B=%d C=%d", len(reaptest.Marked(os.Getenv("MA"))),
			len(reaptest.Marked(os.Getenv("MB"))), len(reaptest.Marked(os.Getenv("MC"))))
	}
	// A: two escapees, each in a session of its own.
	a := exec.Command("/bin/sh", "-c", escapees)
	a.Env = env("M="+os.Getenv("MA"), "N=a")
	// B: an orphan that keeps B's group, reparented to us.
	b := exec.Command("/bin/sh", "-c", `(exec sleep $M &)`)
	b.Env = env("M=" + os.Getenv("MB"))
	for _, x := range []struct {
		id  string
		cmd *exec.Cmd
	}{{"A", a}, {"B", b}} {
		if err := tr.Start(x.id, x.cmd); err != nil {
			return err
		}
		if err := tr.Wait(x.cmd); err != nil {
			return fmt.Errorf("%s: %w", x.id, err)
		}
	}
	// C: a keeper whose child leaves a setsid daemon and runs on.
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	c := exec.Command(os.Args[0], "--report-fd", "3", "--", "/bin/sh", "-c",
		`setsid sh -c 'echo > "$D/c"; exec sleep $M' & exec sleep $M`)
	c.Env = env(keepEnv+"=1", "M="+os.Getenv("MC"))
	c.ExtraFiles = []*os.File{w}
	if err := tr.Start("C", c); err != nil {
		return err
	}
	w.Close()
	defer r.Close()
	cWaited := make(chan error, 1)
	go func() { cWaited <- tr.Wait(c) }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if len(reaptest.Marked(os.Getenv("MA"))) == 2 && len(reaptest.Marked(os.Getenv("MB"))) == 1 &&
			len(reaptest.Marked(os.Getenv("MC"))) == 2 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the processes never all started: %s", count())
		}
	}
	fmt.Println("before:", count())
	for _, id := range []string{"A", "B", "C"} {
		if err := tr.Settle(id); err != nil {
			return err
		}
		fmt.Printf("settled %s: %s\n", id, count())
	}
	var ee *exec.ExitError
	if err := <-cWaited; !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		return fmt.Errorf("C's keeper: %v, want killed by its Effect's settle", err)
	}
	return nil
}

// The plain Settle, with the groups and liveness the caller keeps.
func TestSettlePlain(t *testing.T) {
	m := reaptest.Marker()
	reaptest.Cleanup(t, m)
	out := runScenario(t, "plain", "M="+m, "D="+t.TempDir())
	if out != "before=2 after=0\n" {
		t.Errorf("scenario saw %q, want %q", out, "before=2 after=0\n")
	}
}

func plainScenario() error {
	if err := reap.SetChildSubreaper(); err != nil {
		return err
	}
	cmd := exec.Command("/bin/sh", "-c", escapees)
	cmd.Env = append(os.Environ(), "N=p")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Run(); err != nil {
		return err
	}
	before := len(reaptest.Marked(os.Getenv("M")))
	if err := reap.Settle([]int{cmd.Process.Pid}, func(int) bool { return false }); err != nil {
		return err
	}
	fmt.Printf("before=%d after=%d\n", before, len(reaptest.Marked(os.Getenv("M"))))
	return nil
}

// Many Effects start, wait and settle at once, each leaving an escapee:
// no Wait ever loses its child's status to a settle (the settle reaps only
// what it found by pid, and never a child being started), and no escapee
// survives.
func TestSettleRace(t *testing.T) {
	m := reaptest.Marker()
	reaptest.Cleanup(t, m)
	out := runScenario(t, "race", "M="+m)
	if out != "effects=96 wrong=0 left=0\n" {
		t.Errorf("scenario saw %q", out)
	}
}

func raceScenario() error {
	if err := reap.SetChildSubreaper(); err != nil {
		return err
	}
	tr := reap.NewTracker()
	var (
		mu    sync.Mutex
		wrong []string
		wg    sync.WaitGroup
		n     int
	)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 24; i++ {
				id := fmt.Sprintf("e%d-%d", g, i)
				cmd := exec.Command("/bin/sh", "-c", `setsid sleep $M & exit 3`)
				err := tr.Start(id, cmd)
				if err == nil {
					err = tr.Wait(cmd)
				}
				var ee *exec.ExitError
				ok := errors.As(err, &ee) && ee.ExitCode() == 3
				if serr := tr.Settle(id); serr != nil {
					ok = false
					err = serr
				}
				mu.Lock()
				n++
				if !ok {
					wrong = append(wrong, fmt.Sprintf("%s: %v", id, err))
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	fmt.Printf("effects=%d wrong=%d left=%d\n", n, len(wrong), len(reaptest.Marked(os.Getenv("M"))))
	if len(wrong) > 0 {
		fmt.Fprintln(os.Stderr, strings.Join(wrong, "\n"))
	}
	return nil
}
