package nodetest

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"jr2.dev/boundary/internal/testkit/kubetest"
)

// Environment of the inner run.
const (
	envInner  = "JR2_NODETEST_INNER"  // the test the inner run is for
	envCgroup = "JR2_NODETEST_CGROUP" // the kubelet's cgroupRoot, made by the outer call
	envDir    = "JR2_NODETEST_DIR"    // the directory the inner run mounts its tmpfs on
)

// cgroupPrefix names every cgroupRoot a node makes, so the next Start
// finds the ones a killed run left.
const cgroupPrefix = "jr2-node-"

// cgroupBase is where the host's v1 controllers are mounted.
const cgroupBase = "/sys/fs/cgroup"

// Start brings a node up for t. In the test binary as go test runs it, it
// re-runs t alone inside the node's namespaces, waits, checks the host and
// returns nil; inside, it returns the running node.
//
// Start must be called first in a top-level test:
//
//	func TestX(t *testing.T) {
//		n := nodetest.Start(t, nodetest.Options{Images: tars})
//		if n == nil {
//			return // this process ran the test inside the node's namespaces
//		}
//		out, err := n.API.Run(t, dir, "kubectl apply …")
//	}
//
// The first call re-runs the test binary for that test alone inside new
// mount, network and PID namespaces; there Start brings the node up and
// returns it, and the test body runs against it. The outer call waits,
// reports the inner run's output and exit, removes what the kernel keeps
// after the namespaces end (the node's cgroups), and checks that the host
// is as it was.
func Start(t *testing.T, o Options) *Node {
	t.Helper()
	if name := Inner(); name != "" {
		if name != t.Name() {
			t.Fatalf("nodetest: the inner run is for %s, not %s: call Start first in a top-level test", name, t.Name())
		}
		n, err := Up(o)
		if err != nil {
			if errors.Is(err, kubetest.ErrMissing) {
				skipOrFail(t, err)
			}
			t.Fatal(err)
		}
		t.Cleanup(n.Stop)
		return n
	}
	runOuter(t)
	return nil
}

// Inner is what the inner run is for (a test's name, or a runner's word:
// what Host.Command was given); "" outside a node's namespaces.
func Inner() string { return os.Getenv(envInner) }

func runOuter(t *testing.T) {
	t.Helper()
	if strings.Contains(t.Name(), "/") {
		t.Fatal("nodetest.Start must be called in a top-level test: the inner run selects it by name")
	}
	h, err := Claim(t)
	if err != nil {
		skipOrFail(t, err)
	}
	args := []string{"-test.run=^" + regexp.QuoteMeta(t.Name()) + "$", "-test.v", "-test.count=1"}
	if d, ok := t.Deadline(); ok {
		args = append(args, "-test.timeout="+time.Until(d).Round(time.Second).String())
	}
	cmd := h.Command(t.Name(), os.Args[0], args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		h.Release()
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		h.Release()
		t.Fatalf("start the node's namespaces: %v", err)
	}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var failed, skipped bool
	for sc.Scan() {
		line := sc.Text()
		t.Log(line)
		failed = failed || strings.HasPrefix(line, "--- FAIL: "+t.Name())
		skipped = skipped || strings.HasPrefix(line, "--- SKIP: "+t.Name())
	}
	waitErr := cmd.Wait()

	changes, err := h.Release()
	if err != nil {
		t.Error(err)
	}
	for _, d := range changes {
		t.Errorf("the host changed during the node's run: %s", d)
	}
	switch {
	case waitErr != nil || failed:
		t.Fatalf("the test inside the node's namespaces failed (%v); its output is above", waitErr)
	case skipped:
		t.Skip("the test inside the node's namespaces skipped; its output says why")
	}
}

// Logger is where Claim says what it waits for and removes (a
// *testing.T, or a runner's log).
type Logger interface {
	Logf(format string, args ...any)
}

// Host is a node's claim on the machine: the host's side of its run. It
// holds the machine's node lock from before the host's first snapshot
// (Claim) to after its last (Release), and the kubelet's cgroupRoot.
type Host struct {
	// Cgroup is the kubelet's cgroupRoot, made in every controller.
	Cgroup string
	// Dir is where the inner run mounts its tmpfs: an empty directory on
	// the host.
	Dir     string
	before  hostState
	release func()
	done    bool
}

// Claim readies the host for one node: it checks the node's binaries and
// root, takes the machine's node lock (waiting, and saying so to l, while
// another node runs), removes the cgroupRoots a killed run left,
// snapshots the host and makes this node's cgroupRoot. A missing binary
// or root is an error that is kubetest.ErrMissing (errors.Is). Release
// undoes it; nothing is held when Claim fails.
//
// The lock is an flock on .cache/kube/nodetest.lock, held from before the
// host's first snapshot to after its last (Claim to Release), so the nodes
// of test binaries run side by side (go test ./... runs packages in
// parallel) take turns: a second node's cgroupRoot would read as a change
// of the host, and a starting node would remove another's not yet in use
// as a killed run's. For a program (internal/testkit/noderun: make
// node-demo, node-up), Claim is the outer half's start (the lock, the
// host's snapshot, the cgroupRoot), Host.Command the inner run,
// Host.Release its end (the cgroups removed, the host compared); inside,
// Up brings the node up and Node.Stop ends it.
func Claim(l Logger) (h *Host, err error) {
	if _, err := FindTools(); err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, missing("a node needs root (namespaces, mounts, cgroups, the bridge): run it as root")
	}
	release, err := lockMachine(l)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			release()
		}
	}()
	removeStaleCgroups(l)
	before, err := snapshotHost()
	if err != nil {
		return nil, err
	}
	id := make([]byte, 4)
	rand.Read(id)
	cg := cgroupPrefix + hex.EncodeToString(id)
	if err := makeCgroups(cg); err != nil {
		removeCgroups(cg)
		return nil, err
	}
	dir, err := os.MkdirTemp("", "jr2-node-")
	if err != nil {
		removeCgroups(cg)
		return nil, err
	}
	return &Host{Cgroup: cg, Dir: dir, before: before, release: release}, nil
}

// Command is the inner run: bin with args in new mount, network and PID
// namespaces, its environment naming inner (what Inner returns there), the
// cgroupRoot and the directory; it dies with the process that started it
// (Pdeathsig), and every process of the node with it.
func (h *Host) Command(inner, bin string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), envInner+"="+inner, envCgroup+"="+h.Cgroup, envDir+"="+h.Dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWNET | syscall.CLONE_NEWPID,
		Pdeathsig:  syscall.SIGKILL,
	}
	return cmd
}

// Release ends the claim once the inner run is over: it removes the
// cgroupRoot (empty once the PID namespace is gone, perhaps after a
// moment) and the directory, snapshots the host again and releases the
// lock. changes name what differs on the host from Claim's snapshot; err
// is a cgroup still there. A second call does nothing.
func (h *Host) Release() (changes []string, err error) {
	if h.done {
		return nil, nil
	}
	h.done = true
	defer h.release()
	err = removeCgroups(h.Cgroup)
	os.Remove(h.Dir)
	after, serr := snapshotHost()
	if serr != nil {
		return nil, errors.Join(err, serr)
	}
	return h.before.diff(after), err
}

func skipOrFail(t *testing.T, err error) {
	t.Helper()
	if errors.Is(err, kubetest.ErrMissing) && os.Getenv(kubetest.EnvSkip) == "skip" && os.Getenv(kubetest.EnvRequireAll) != "1" {
		t.Skipf("NOT RUN on a real node: %v (%s=skip says so on purpose)", err, kubetest.EnvSkip)
	}
	if errors.Is(err, kubetest.ErrMissing) && os.Getenv(kubetest.EnvRequireAll) != "1" {
		t.Fatalf("%v; or set %s=skip to skip the tests against a real node", err, kubetest.EnvSkip)
	}
	t.Fatal(err)
}

// controllers are the host's mounted cgroup v1 hierarchies (the kubelet
// and runc use each one that is mounted).
func controllers() ([]string, error) {
	ents, err := os.ReadDir(cgroupBase)
	if err != nil {
		return nil, err
	}
	var cs []string
	for _, e := range ents {
		p := filepath.Join(cgroupBase, e.Name())
		if e.Name() == "unified" {
			continue // cgroup2 holding no controller the kubelet uses on v1
		}
		var st syscall.Statfs_t
		if e.IsDir() && syscall.Statfs(p, &st) == nil && st.Type == 0x27e0eb { // CGROUP_SUPER_MAGIC
			cs = append(cs, p)
		}
	}
	if len(cs) == 0 {
		return nil, fmt.Errorf("no cgroup v1 controller is mounted under %s: this node runs the kubelet on cgroup v1 (failCgroupV1: false)", cgroupBase)
	}
	return cs, nil
}

// hierarchies are the controllers and, on a hybrid host, the cgroup2
// mounted at unified: runc makes each container's cgroup there too, below
// the cgroupRoot, so a node's removal and the host's comparison cover it
// though the kubelet uses only the controllers.
func hierarchies() ([]string, error) {
	cs, err := controllers()
	if err != nil {
		return nil, err
	}
	u := filepath.Join(cgroupBase, "unified")
	var st syscall.Statfs_t
	if syscall.Statfs(u, &st) == nil && st.Type == 0x63677270 { // CGROUP2_SUPER_MAGIC
		cs = append(cs, u)
	}
	return cs, nil
}

// makeCgroups makes name in every controller; cpuset's gets its parent's
// cpus and mems, which a new cpuset lacks.
func makeCgroups(name string) error {
	cs, err := controllers()
	if err != nil {
		return err
	}
	for _, c := range cs {
		p := filepath.Join(c, name)
		if err := os.Mkdir(p, 0o755); err != nil {
			return fmt.Errorf("make the kubelet's cgroupRoot: %w", err)
		}
		if filepath.Base(c) == "cpuset" {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				b, err := os.ReadFile(filepath.Join(c, f))
				if err == nil {
					err = os.WriteFile(filepath.Join(p, f), b, 0o644)
				}
				if err != nil {
					return fmt.Errorf("cpuset %s: %w", f, err)
				}
			}
		}
	}
	return nil
}

// removeCgroups removes name's tree in every hierarchy, leaves first,
// retrying while the kernel still counts a dying task.
func removeCgroups(name string) error {
	cs, err := hierarchies()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		var left []string
		for _, c := range cs {
			root := filepath.Join(c, name)
			var dirs []string
			filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
				if err == nil && d.IsDir() {
					dirs = append(dirs, p)
				}
				return nil
			})
			for i := len(dirs) - 1; i >= 0; i-- {
				if err := syscall.Rmdir(dirs[i]); err != nil && !errors.Is(err, syscall.ENOENT) {
					left = append(left, dirs[i])
				}
			}
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the node's cgroups are still there (a task in them?): %s", strings.Join(left, ", "))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// removeStaleCgroups removes the cgroupRoots a killed run left (none of
// their tasks lives: the PID namespace ended with the run).
func removeStaleCgroups(l Logger) {
	cs, err := hierarchies()
	if err != nil {
		return
	}
	seen := map[string]bool{}
	for _, c := range cs {
		ents, _ := os.ReadDir(c)
		for _, e := range ents {
			if e.IsDir() && strings.HasPrefix(e.Name(), cgroupPrefix) && !seen[e.Name()] {
				seen[e.Name()] = true
				if err := removeCgroups(e.Name()); err != nil {
					l.Logf("nodetest: a cgroupRoot an earlier run left is still in use: %v", err)
				} else {
					l.Logf("nodetest: removed the cgroupRoot %s an earlier, killed run left", e.Name())
				}
			}
		}
	}
}

// lockMachine takes the machine's node lock, waiting while another test
// binary holds it: one node at a time on a machine. Two at once would each
// see the other's cgroupRoot come and go as a change of the host, and the
// one starting would remove, as a killed run's, the cgroups of the other
// not yet in use. The lock is an flock on a file beside the node's
// binaries (.cache/kube/, shared by every checkout that shares .cache), so
// the kernel releases it when its holder dies, however it ends.
func lockMachine(l Logger) (release func(), err error) {
	dir, err := kubetest.CacheDir()
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(filepath.Dir(dir), lockFile), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("nodetest: the machine's node lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); errors.Is(err, syscall.EWOULDBLOCK) {
		l.Logf("nodetest: waiting for another test binary's node to end (one node at a time on a machine)")
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("nodetest: flock %s: %w", f.Name(), err)
	}
	return func() { f.Close() }, nil
}

// lockFile is the node lock's name in .cache/kube/.
const lockFile = "nodetest.lock"
