package nodetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/BurntSushi/toml"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"jr2.dev/boundary/internal/testkit/kubetest"
)

// Options are what a node is started with.
type Options struct {
	// Images are image tarballs (docker-archive or OCI) ctr imports before
	// the kubelet starts; Pause is the ref of the one among them the
	// sandboxes run.
	Images []string
	Pause  string
}

// The node's names and addresses.
const (
	// NodeName is the node's name in the API.
	NodeName = "jr2-node"
	// NodeIP is the node's InternalIP, on its loopback: the kubelet
	// listens there, and a test's upstreams listen there for the pods to
	// reach (through the bridge's gateway).
	NodeIP = "10.200.0.1"
	// PodCIDR is the bridge's subnet; its .1 is the pods' gateway.
	PodCIDR = "10.88.0.0/16"
)

// Node is a running node. Its fields are read-only.
type Node struct {
	// API is the API server the node is registered to.
	API *kubetest.Server
	// Tools are the node's binaries; Ctr runs ctr against its containerd.
	Tools Tools
	dir   string
	sock  string
	procs []*nodeProc
}

type nodeProc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// Up brings the node up inside the namespaces Host.Command made (the
// inner run; Start calls it for a test): its own mounts, kernel settings
// and network, the API server, containerd with o's images imported, the
// controller-manager, the scheduler and the kubelet, and waits until the
// node is Ready and schedulable. Stop ends it. On an error everything
// Up started is stopped; a missing binary is kubetest.ErrMissing
// (errors.Is).
//
// What the node changes, in order, and where it is undone:
//
//  1. The mount namespace is made private, then shared within itself (the
//     kubelet's mount propagation), with a fresh /proc for the PID
//     namespace; every directory the parts write (containerd's root and
//     state, the kubelet's root, pod logs, CNI state) is on one tmpfs, and
//     /var, /etc and /opt are overlays whose upper is a tmpfs, so a write
//     nobody configured reaches no disk. All of it ends with the namespace.
//  2. The kubelet checks three kernel settings it would otherwise write on
//     the host (vm.overcommit_memory, kernel.panic, kernel.panic_on_oops);
//     it runs with protectKernelDefaults and sees files bound over those
//     /proc/sys entries in its mount namespace, so the host's stay as they
//     are.
//  3. The network namespace is new: loopback, the node's address
//     (NodeIP, on lo) and the bridge the CNI plugin makes; it ends with the
//     namespace.
//  4. Every process is in the new PID namespace, whose first process is the
//     inner test binary: when it ends, for any reason, the kernel kills the
//     rest; the inner binary dies with the outer (Pdeathsig).
//  5. cgroups are the host's (v1 here): the kubelet's cgroupRoot,
//     /jr2-node-<id>, is made in every mounted controller before it starts
//     (Claim) and removed by the outer call once the inner run is over
//     (Release), with what runc makes below the same name in the hybrid
//     host's cgroup2 (/sys/fs/cgroup/unified), which the host check covers
//     too. A run killed before it can remove them leaves empty ones, which
//     the next Claim removes.
func Up(o Options) (_ *Node, err error) {
	if Inner() == "" {
		return nil, fmt.Errorf("nodetest: Up runs only inside the namespaces Host.Command makes (no %s)", envInner)
	}
	tools, err := FindTools()
	if err != nil {
		return nil, err
	}
	dir := os.Getenv(envDir)
	n := &Node{Tools: tools, dir: dir, sock: filepath.Join(dir, "containerd", "containerd.sock")}
	defer func() {
		if err != nil {
			n.Stop()
		}
	}()
	for _, step := range []struct {
		what string
		do   func() error
	}{
		{"make the mount namespace the node's own", n.privateMounts},
		{"keep the host's kernel settings", n.kernelDefaults},
		{"bring up the node's network", n.network},
	} {
		if err := step.do(); err != nil {
			return nil, fmt.Errorf("nodetest: %s: %w", step.what, err)
		}
	}
	// Every temporary file of the run (the API server's, the test's own)
	// is on the node's tmpfs.
	tmp := filepath.Join(dir, "tmp")
	os.MkdirAll(tmp, 0o1777)
	os.Setenv("TMPDIR", tmp)
	if n.API, err = kubetest.StartServer("--kubelet-preferred-address-types=InternalIP"); err != nil {
		return nil, err
	}
	if err := n.containerd(o); err != nil {
		return nil, fmt.Errorf("nodetest: containerd: %w", err)
	}
	for _, img := range o.Images {
		if out, err := n.Ctr("images", "import", img); err != nil {
			return nil, fmt.Errorf("nodetest: ctr images import %s: %v\n%s", img, err, out)
		}
	}
	if err := n.control(); err != nil {
		return nil, fmt.Errorf("nodetest: %w", err)
	}
	if err := n.kubelet(); err != nil {
		return nil, fmt.Errorf("nodetest: the kubelet: %w", err)
	}
	if err := n.waitReady(); err != nil {
		return nil, fmt.Errorf("nodetest: %w", err)
	}
	return n, nil
}

// Stop stops the node: its parts (stop), then the API server. It is safe
// to call more than once.
func (n *Node) Stop() {
	n.stop()
	if n.API != nil {
		n.API.Stop()
	}
}

// privateMounts: the namespace's mounts stop propagating to the host, then
// propagate within it (the kubelet's volumes need shared mounts); /proc is
// the new PID namespace's; the node's files are on a tmpfs; /var, /etc and
// /opt take writes on a tmpfs of their own.
func (n *Node) privateMounts() error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make / private: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SHARED, ""); err != nil {
		return fmt.Errorf("make / shared within the namespace: %w", err)
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc for the PID namespace: %w", err)
	}
	if err := unix.Mount("tmpfs", n.dir, "tmpfs", 0, "mode=0755"); err != nil {
		return fmt.Errorf("mount the node's tmpfs on %s: %w", n.dir, err)
	}
	if err := unix.Mount("tmpfs", "/run", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755"); err != nil {
		return fmt.Errorf("mount a tmpfs on /run: %w", err)
	}
	for _, d := range []string{"/var", "/etc", "/opt"} {
		if _, err := os.Stat(d); err != nil {
			continue
		}
		up := filepath.Join(n.dir, "overlay", strings.TrimPrefix(d, "/"))
		for _, s := range []string{"upper", "work"} {
			if err := os.MkdirAll(filepath.Join(up, s), 0o755); err != nil {
				return err
			}
		}
		opts := fmt.Sprintf("lowerdir=%s,upperdir=%s/upper,workdir=%s/work", d, up, up)
		if err := unix.Mount("overlay", d, "overlay", 0, opts); err != nil {
			return fmt.Errorf("overlay %s: %w", d, err)
		}
	}
	return nil
}

// kernelDefaults: the kubelet (protectKernelDefaults) checks three
// settings it would write otherwise; it reads files bound over them here,
// holding what it wants, and the host keeps its own.
func (n *Node) kernelDefaults() error {
	d := filepath.Join(n.dir, "sysctl")
	os.MkdirAll(d, 0o755)
	for entry, v := range map[string]string{"vm/overcommit_memory": "1", "kernel/panic": "10", "kernel/panic_on_oops": "1"} {
		f := filepath.Join(d, strings.ReplaceAll(entry, "/", "."))
		if err := os.WriteFile(f, []byte(v+"\n"), 0o444); err != nil {
			return err
		}
		if err := unix.Mount(f, "/proc/sys/"+entry, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind over /proc/sys/%s: %w", entry, err)
		}
		if err := unix.Mount("", "/proc/sys/"+entry, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			return fmt.Errorf("bind over /proc/sys/%s read-only: %w", entry, err)
		}
	}
	return nil
}

// network: loopback up with the node's address on it; the bridge plugin
// makes the rest when the first pod starts.
func (n *Node) network() error {
	for _, args := range [][]string{{"link", "set", "lo", "up"}, {"addr", "add", NodeIP + "/32", "dev", "lo"}} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	cni := map[string]any{
		"cniVersion": "1.0.0", "name": "jr2-node",
		"plugins": []any{map[string]any{
			"type": "bridge", "bridge": "cni0", "isGateway": true, "isDefaultGateway": true, "ipMasq": false, "hairpinMode": true,
			"ipam": map[string]any{"type": "host-local", "dataDir": filepath.Join(n.dir, "cni", "ipam"),
				"ranges": []any{[]any{map[string]any{"subnet": PodCIDR, "gateway": "10.88.0.1"}}}},
		}},
	}
	return writeJSON(filepath.Join(n.dir, "cni", "net.d", "10-jr2-node.conflist"), cni)
}

func (n *Node) containerd(o Options) error {
	c := filepath.Join(n.dir, "containerd")
	cfg := map[string]any{
		"version": 3,
		"root":    filepath.Join(c, "root"),
		"state":   filepath.Join(c, "state"),
		"grpc":    map[string]any{"address": n.sock},
		"ttrpc":   map[string]any{"address": n.sock + ".ttrpc"},
		"plugins": map[string]any{
			"io.containerd.cri.v1.images": map[string]any{
				"snapshotter":   "overlayfs",
				"pinned_images": map[string]any{"sandbox": o.Pause},
			},
			"io.containerd.cri.v1.runtime": map[string]any{
				// This machine's root lacks CAP_SYS_RESOURCE: a container
				// may not get an oom_score_adj below containerd's.
				"restrict_oom_score_adj":       true,
				"netns_mounts_under_state_dir": true,
				"cni":                          map[string]any{"bin_dirs": []string{n.Tools.CNI}, "conf_dir": filepath.Join(n.dir, "cni", "net.d")},
				"containerd": map[string]any{"runtimes": map[string]any{"runc": map[string]any{
					"runtime_type": "io.containerd.runc.v2",
					"options":      map[string]any{"BinaryName": n.Tools.Runc},
				}}},
			},
			"io.containerd.internal.v1.opt": map[string]any{"path": filepath.Join(c, "opt")},
		},
	}
	var b bytes.Buffer
	if err := toml.NewEncoder(&b).Encode(cfg); err != nil {
		return err
	}
	os.MkdirAll(c, 0o755)
	conf := filepath.Join(c, "config.toml")
	if err := os.WriteFile(conf, b.Bytes(), 0o644); err != nil {
		return err
	}
	p, err := n.spawn("containerd", n.Tools.Containerd, "--config", conf)
	if err != nil {
		return err
	}
	return n.poll(p, "its socket "+n.sock, func() bool {
		out, err := n.Ctr("version")
		return err == nil && bytes.Contains(out, []byte("Server:"))
	})
}

// Ctr runs ctr against the node's containerd in Kubernetes' namespace.
func (n *Node) Ctr(args ...string) ([]byte, error) {
	return exec.Command(n.Tools.Ctr, append([]string{"--address", n.sock, "--namespace", "k8s.io"}, args...)...).CombinedOutput()
}

// control starts the controller-manager (Deployments' ReplicaSets and
// Pods, service account tokens) and the scheduler.
func (n *Node) control() error {
	if _, err := n.spawn("kube-controller-manager", n.Tools.ControllerManager,
		"--kubeconfig", n.API.Kubeconfig, "--leader-elect=false", "--bind-address", "127.0.0.1",
		"--service-account-private-key-file", n.API.ServiceAccountKey, "--use-service-account-credentials=false",
		// Off: what a node of this test has no use for (certificate
		// signing, pod CIDRs, volumes). Names as 1.37 knows them: an
		// unknown one ends the controller-manager at start.
		"--controllers", "*,-certificatesigningrequest-signing-controller,-certificatesigningrequest-approving-controller,-node-ipam-controller,-persistentvolume-binder-controller,-persistentvolume-attach-detach-controller",
		"--v", "0"); err != nil {
		return err
	}
	_, err := n.spawn("kube-scheduler", n.Tools.Scheduler,
		"--kubeconfig", n.API.Kubeconfig, "--leader-elect=false", "--bind-address", "127.0.0.1", "--v", "0")
	return err
}

// kubelet writes its whole configuration as one file and starts it.
func (n *Node) kubelet() error {
	k := filepath.Join(n.dir, "kubelet")
	os.MkdirAll(k, 0o755)
	resolv := filepath.Join(n.dir, "resolv.conf")
	if err := os.WriteFile(resolv, []byte("nameserver 127.0.0.53\n"), 0o644); err != nil {
		return err
	}
	cfg := map[string]any{
		"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
		// This machine's cgroups are v1 (hybrid); the kubelet still runs
		// on them when told to.
		"failCgroupV1": false, "cgroupDriver": "cgroupfs", "cgroupRoot": "/" + os.Getenv(envCgroup), "cgroupsPerQOS": true,
		"failSwapOn": false, "containerRuntimeEndpoint": "unix://" + n.sock, "resolvConf": resolv,
		"protectKernelDefaults": true,
		"address":               NodeIP, "port": 10250, "readOnlyPort": 0, "healthzBindAddress": "127.0.0.1", "healthzPort": 10248,
		// Only the API server reaches the kubelet, inside the node's
		// network namespace.
		"authentication": map[string]any{"anonymous": map[string]any{"enabled": true}, "webhook": map[string]any{"enabled": false}},
		"authorization":  map[string]any{"mode": "AlwaysAllow"},
		"evictionHard":   map[string]string{"memory.available": "1Mi", "nodefs.available": "1%", "imagefs.available": "1%", "nodefs.inodesFree": "1%"},
		// Imported images cannot be pulled again: never collect them.
		"imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
		// A Secret's change reaches a projected volume at the next sync.
		"syncFrequency": "2s",
		"podLogsDir":    filepath.Join(n.dir, "pod-logs"),
		"clusterDomain": "cluster.local",
	}
	conf := filepath.Join(k, "config.json")
	if err := writeJSON(conf, cfg); err != nil {
		return err
	}
	_, err := n.spawn("kubelet", n.Tools.Kubelet,
		"--config", conf, "--kubeconfig", n.API.Kubeconfig, "--root-dir", filepath.Join(k, "root"),
		"--cert-dir", filepath.Join(k, "pki"), "--hostname-override", NodeName, "--node-ip", NodeIP, "--v", "1")
	return err
}

// waitReady waits until the node is Ready and schedulable: the
// controller-manager's node-lifecycle controller has lifted the not-ready
// taint the node registers with, so a Pod without a nodeName is placed.
// Every part must still run meanwhile: one that ended (a bad flag ends the
// controller-manager at once) fails the start with its log.
func (n *Node) waitReady() error {
	var p *nodeProc
	for _, q := range n.procs {
		if q.name == "kubelet" {
			p = q
		}
	}
	var ended error
	err := n.poll(p, "node "+NodeName+" Ready and schedulable", func() bool {
		for _, q := range n.procs {
			select {
			case <-q.done:
				ended = fmt.Errorf("%s exited while the node came up; the end of its log:\n%s", q.name, tail(q.log))
				return true
			default:
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		node, err := n.API.Client.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, taint := range node.Spec.Taints {
			if taint.Key == corev1.TaintNodeNotReady {
				return false
			}
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return true
			}
		}
		return false
	})
	if ended != nil {
		return ended
	}
	return err
}

// startWait bounds a part's start on a shared 2-core machine: a deadline,
// not an assertion of speed.
const startWait = 3 * time.Minute

func (n *Node) poll(p *nodeProc, what string, ok func() bool) error {
	deadline := time.Now().Add(startWait)
	for !ok() {
		select {
		case <-p.done:
			return fmt.Errorf("%s exited before %s; the end of its log:\n%s", p.name, what, tail(p.log))
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not %s after %s; the end of its log:\n%s", p.name, what, startWait, tail(p.log))
		}
	}
	return nil
}

// Log is the end of a part's log (kubelet, containerd, kube-scheduler, …),
// for a test's failure message.
func (n *Node) Log(name string) string {
	for _, p := range n.procs {
		if p.name == name {
			return tail(p.log)
		}
	}
	return "(no " + name + ")"
}

func (n *Node) spawn(name, bin string, args ...string) (*nodeProc, error) {
	logs := filepath.Join(n.dir, "logs")
	os.MkdirAll(logs, 0o755)
	log := filepath.Join(logs, name+".log")
	f, err := os.Create(log)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cmd := exec.Command(bin, args...)
	cmd.Dir = n.dir
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = []string{"PATH=" + filepath.Dir(n.Tools.Containerd) + ":" + os.Getenv("PATH"), "HOME=" + n.dir, "TMPDIR=" + filepath.Join(n.dir, "tmp")}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &nodeProc{name: name, cmd: cmd, log: log, done: make(chan struct{})}
	go func() { cmd.Wait(); close(p.done) }()
	n.procs = append(n.procs, p)
	return p, nil
}

// stop ends the kubelet first (it would start what else ends), then the
// rest, newest first; the PID namespace's end takes the shims and pods.
func (n *Node) stop() {
	for i := len(n.procs) - 1; i >= 0; i-- {
		p := n.procs[i]
		p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			p.cmd.Process.Kill()
			<-p.done
		}
	}
	n.procs = nil
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	return "  " + strings.Join(lines, "\n  ")
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// Listen listens on the node's address, where a pod reaches it.
func Listen() (net.Listener, error) { return net.Listen("tcp", NodeIP+":0") }
