package nodetest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"jr2.dev/boundary/internal/testkit/kubetest"
)

// TestNodeReady: the node registers with its address and the kubelet and
// runtime releases pinned, and reports Ready; the host is unchanged after
// (Start's outer half fails the test otherwise).
func TestNodeReady(t *testing.T) {
	n := Start(t, Options{})
	if n == nil {
		return
	}
	node, err := n.API.Client.CoreV1().Nodes().Get(context.Background(), NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	info := node.Status.NodeInfo
	if info.KubeletVersion != "v1.37.2" || info.ContainerRuntimeVersion != "containerd://"+strings.TrimPrefix(Containerd, "v") {
		t.Errorf("node info %+v; want kubelet v1.37.2 on containerd %s", info, Containerd)
	}
	var ip string
	for _, a := range node.Status.Addresses {
		if a.Type == "InternalIP" {
			ip = a.Address
		}
	}
	if ip != NodeIP {
		t.Errorf("the node's InternalIP is %q; want %s", ip, NodeIP)
	}
}

// TestHostCheckSeesACgroup: the host check can fail — a top-level cgroup
// made between two snapshots is named — and a cgroupRoot a killed run
// left is removed by the next Start.
func TestHostCheckSeesACgroup(t *testing.T) {
	// A node of another test binary must not see this cgroup, nor lose
	// its own to removeStaleCgroups.
	defer rootAndLock(t, "making cgroups")()
	before, err := snapshotHost()
	if err != nil {
		t.Fatal(err)
	}
	name := cgroupPrefix + "stale0test"
	if err := makeCgroups(name); err != nil {
		removeCgroups(name)
		t.Fatal(err)
	}
	// runc's own below the same name in the hybrid host's cgroup2, which
	// the kubelet does not make.
	unified := filepath.Join(cgroupBase, "unified", name)
	hs, _ := hierarchies()
	if len(hs) > 0 && hs[len(hs)-1] == filepath.Dir(unified) {
		if err := os.MkdirAll(filepath.Join(unified, "kubepods"), 0o755); err != nil {
			t.Fatal(err)
		}
	} else {
		unified = ""
	}
	after, _ := snapshotHost()
	if d := before.diff(after); !strings.Contains(strings.Join(d, "\n"), name+" is new") {
		t.Errorf("the host check did not see the cgroup %s: %q", name, d)
	}
	if d := before.diff(after); unified != "" && !strings.Contains(strings.Join(d, "\n"), "cgroup "+unified+" is new") {
		t.Errorf("the host check did not see the cgroup %s: %q", unified, d)
	}
	removeStaleCgroups(t)
	again, _ := snapshotHost()
	for _, d := range before.diff(again) {
		if strings.Contains(d, name) {
			t.Errorf("a stale cgroupRoot is left: %s", d)
		}
	}
}

// TestOneNodeAtATime: while one holder has the machine's node lock, a
// second cannot take it; once released, it can.
func TestOneNodeAtATime(t *testing.T) {
	release, err := lockMachine(t)
	if err != nil {
		t.Fatal(err)
	}
	dir, _ := kubetest.CacheDir()
	f, err := os.Open(filepath.Join(filepath.Dir(dir), lockFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); !errors.Is(err, unix.EWOULDBLOCK) {
		t.Errorf("a second lock while the first is held: %v; want EWOULDBLOCK", err)
	}
	release()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Errorf("the lock after release: %v", err)
	}
}

// TestHostCheckSeesALink: a host interface made between two snapshots is
// named, unless it is one of the e2e suite's veths, which that suite
// makes and removes in its own run beside a node's.
func TestHostCheckSeesALink(t *testing.T) {
	// A node of another test binary must not see this link.
	defer rootAndLock(t, "making a host interface")()
	for _, tc := range []struct {
		link string
		seen bool
	}{{"jr2chk0", true}, {"je1x1h", false}} {
		before, err := snapshotHost()
		if err != nil {
			t.Fatal(err)
		}
		peer := tc.link[:len(tc.link)-1] + "p"
		exec.Command("ip", "link", "del", tc.link).Run() // a killed run's
		if out, err := exec.Command("ip", "link", "add", tc.link, "type", "veth", "peer", "name", peer).CombinedOutput(); err != nil {
			t.Fatalf("ip link add %s: %v\n%s", tc.link, err, out)
		}
		exec.Command("ip", "link", "set", tc.link, "up").Run()
		after, err := snapshotHost()
		exec.Command("ip", "link", "del", tc.link).Run()
		if err != nil {
			t.Fatal(err)
		}
		d := strings.Join(before.diff(after), "\n")
		if seen := strings.Contains(d, tc.link); seen != tc.seen {
			t.Errorf("a new link %s: the host check names it %v, want %v:\n%s", tc.link, seen, tc.seen, d)
		}
	}
}

// rootAndLock skips t loudly without root (fails it under
// JR2_REQUIRE_ALL=1), then takes the machine's node lock, returning its
// release: a test that changes the host does so while no node runs.
func rootAndLock(t *testing.T, what string) (release func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv(kubetest.EnvRequireAll) == "1" {
			t.Fatalf("NOT RUN: %s needs root, and JR2_REQUIRE_ALL=1", what)
		}
		t.Skipf("NOT RUN: %s needs root", what)
	}
	release, err := lockMachine(t)
	if err != nil {
		t.Fatal(err)
	}
	return release
}

// TestHostCheckRoutes: a route's use counters, the padding of the line
// last in the file and the order of lines are no change of the host; a
// route's own fields are, and another test's interface is left out.
func TestHostCheckRoutes(t *testing.T) {
	v4 := routeCounters["/proc/net/route"]
	was := "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\n" +
		"eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000   \n" +
		"eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF   \n" +
		"je12x1h\t000300C0\t00000000\t0001\t0\t0\t0\t00FFFFFF   \n"
	for _, tc := range []struct {
		name, table string
		same        bool
	}{
		{"counters, padding and order", "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\n" +
			"eth0\t000200C0\t00000000\t0001\t3\t17\t0\t00FFFFFF   \n" +
			"eth0\t00000000\t010200C0\t0003\t1\t2\t0\t00000000", true},
		{"a new gateway", "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\n" +
			"eth0\t00000000\t020200C0\t0003\t0\t0\t0\t00000000\n" +
			"eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF", false},
	} {
		a, b := strings.Join(routes(was, v4), "\n"), strings.Join(routes(tc.table, v4), "\n")
		if (a == b) != tc.same {
			t.Errorf("%s: the same routes %v, want %v:\n%s\n--\n%s", tc.name, a == b, tc.same, a, b)
		}
	}
}

// TestHostCheckFirstNetns: on a machine that never ran `ip netns add`,
// /run/netns is no mount; the first one (a contained run's, in a package
// beside a node's) makes it a bind mount of itself and keeps it. The host
// check takes that as the system's first use, as it takes the namespaces
// under it, and still names another new mount. The fresh machine is made
// in a mount namespace of the test's own (/run/netns unmounted there), so
// the host's table is not touched.
func TestHostCheckFirstNetns(t *testing.T) {
	if os.Getenv("JR2_NODETEST_FRESH_NETNS") == "1" {
		freshNetnsCheck(t)
		return
	}
	defer rootAndLock(t, "a fresh /run/netns")()
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", os.Args[0], "-test.run=^TestHostCheckFirstNetns$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "JR2_NODETEST_FRESH_NETNS=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestHostCheckFirstNetns") {
		t.Fatalf("the check in its own mount namespace: %v\n%s", err, out)
	}
}

func freshNetnsCheck(t *testing.T) {
	isMount := func() bool {
		mts, err := mountTable()
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(mts, func(f []string) bool { return f[4] == "/run/netns" })
	}
	for isMount() {
		if err := unix.Unmount("/run/netns", unix.MNT_DETACH); err != nil {
			t.Fatalf("umount /run/netns in the test's namespace: %v", err)
		}
	}
	before, err := snapshotHost()
	if err != nil {
		t.Fatal(err)
	}
	name := "jr2-fresh-" + strconv.Itoa(os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v\n%s", err, out)
	}
	defer exec.Command("ip", "netns", "delete", name).Run()
	if !isMount() {
		t.Fatal("ip netns add did not make /run/netns a mount: this machine's iproute2 does not do what the check allows for")
	}
	after, err := snapshotHost()
	if err != nil {
		t.Fatal(err)
	}
	if d := before.diff(after); len(d) > 0 {
		t.Errorf("the first ip netns add of a fresh machine, named by the host check: %s", strings.Join(d, "\n"))
	}
	other := t.TempDir()
	if err := unix.Mount("jr2-fresh", other, "tmpfs", 0, ""); err != nil {
		t.Fatal(err)
	}
	defer unix.Unmount(other, unix.MNT_DETACH)
	again, err := snapshotHost()
	if err != nil {
		t.Fatal(err)
	}
	if d := strings.Join(after.diff(again), "\n"); !strings.Contains(d, other) {
		t.Errorf("a new tmpfs at %s, not named by the host check: %q", other, d)
	}
}
