package podrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	"jr2.dev/boundary/internal/kubelayout"
)

// Pod is one Pod on this machine: its network namespace and its laid-out
// volumes, shared by the containers Start runs. Set Pod and Objects (as
// read back from the API server) before the first Start, and keep them.
type Pod struct {
	Pod     *corev1.Pod
	Objects kubelayout.Objects
	dir     string
	netns   *os.File
}

// Options are what a container's start needs beyond the Pod.
type Options struct {
	// Image maps a path in the container to the file on this machine that
	// the image's recipe places there (bind-mounted read-only).
	Image map[string]string
	// Argv, when not nil, runs in place of the container's command and
	// args: for a container whose image is the user's (the agent).
	Argv []string
	// Stdout and Stderr receive the process's output (nil: discarded).
	Stdout, Stderr io.Writer
}

// New makes a Pod's network namespace (loopback up) and a directory for
// its volumes, as a pod sandbox is made before its containers; t.Cleanup
// closes the one and removes the other. A test may listen in the
// namespace (Listen) before it has the Pod object.
func New(t testing.TB) *Pod {
	t.Helper()
	if os.Getuid() != 0 {
		t.Fatal("podrun: running a Pod's container needs root (mount and network namespaces, bind mounts, its uid)")
	}
	dir, err := os.MkdirTemp("", "jr2-pod-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"volumes", "root"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ns, err := newNetns()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	return &Pod{dir: dir, netns: ns}
}

// newNetns makes a network namespace on a locked thread, brings its
// loopback up, and returns a handle that keeps it; the thread returns to
// its own namespace (or, if it cannot, dies with its goroutine).
func newNetns() (*os.File, error) {
	type result struct {
		f   *os.File
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		home, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			ch <- result{nil, err}
			return // the thread dies with the goroutine
		}
		defer home.Close()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			ch <- result{nil, fmt.Errorf("podrun: a network namespace: %w", err)}
			return
		}
		f, err := os.Open("/proc/thread-self/ns/net")
		if err == nil {
			err = loopbackUp()
		}
		if serr := unix.Setns(int(home.Fd()), unix.CLONE_NEWNET); serr != nil {
			if f != nil {
				f.Close()
			}
			ch <- result{nil, fmt.Errorf("podrun: leave the pod's network namespace: %w", serr)}
			return
		}
		runtime.UnlockOSThread()
		if err != nil && f != nil {
			f.Close()
			f = nil
		}
		ch <- result{f, err}
	}()
	r := <-ch
	return r.f, r.err
}

// loopbackUp sets IFF_UP on lo in the calling thread's namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("podrun: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("podrun: lo's flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("podrun: lo up: %w", err)
	}
	return nil
}

// InNetns runs fn on a thread in the Pod's network namespace: a listener
// or connection fn opens stays there. The thread returns to its own
// namespace after, or dies with its goroutine if it cannot.
func (p *Pod) InNetns(fn func() error) error {
	ch := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		home, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			ch <- err
			return
		}
		defer home.Close()
		if err := unix.Setns(int(p.netns.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- fmt.Errorf("podrun: enter the pod's network namespace: %w", err)
			return
		}
		ferr := fn()
		if err := unix.Setns(int(home.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- errors.Join(ferr, fmt.Errorf("podrun: leave the pod's network namespace: %w", err))
			return
		}
		runtime.UnlockOSThread()
		ch <- ferr
	}()
	return <-ch
}

// Listen listens on addr in the Pod's network namespace.
func (p *Pod) Listen(network, addr string) (net.Listener, error) {
	var l net.Listener
	err := p.InNetns(func() (err error) {
		l, err = net.Listen(network, addr)
		return err
	})
	return l, err
}

// DialContext dials addr from inside the Pod's network namespace (for an
// http.Transport: the kubelet's probe, the pod's own loopback).
func (p *Pod) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := p.InNetns(func() (err error) {
		var d net.Dialer
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// ProbeURL is an httpGet probe's URL as this machine reaches it: the
// port (a number or the container's port name) on 127.0.0.1 in the Pod's
// network namespace, where the kubelet would use the pod's IP.
func ProbeURL(c *corev1.Container, pr *corev1.Probe) (string, error) {
	if pr == nil || pr.HTTPGet == nil {
		return "", fmt.Errorf("podrun: container %q: the probe is not an httpGet", c.Name)
	}
	port := pr.HTTPGet.Port.IntValue()
	if port == 0 {
		for _, cp := range c.Ports {
			if cp.Name == pr.HTTPGet.Port.String() {
				port = int(cp.ContainerPort)
			}
		}
	}
	if port == 0 {
		return "", fmt.Errorf("podrun: container %q: the probe's port %q is not one of its ports", c.Name, pr.HTTPGet.Port.String())
	}
	scheme := strings.ToLower(string(pr.HTTPGet.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	return fmt.Sprintf("%s://127.0.0.1:%d%s", scheme, port, pr.HTTPGet.Path), nil
}

// Process is a started container.
type Process struct {
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

// Start starts container name of the Pod (an init container, such as a
// native sidecar, or a container) and returns once the process runs; its
// volumes are laid out first if no container laid them out before.
// t.Cleanup stops it.
func (p *Pod) Start(t testing.TB, name string, o Options) *Process {
	t.Helper()
	cmd, cfg, err := p.command(name, o)
	if err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.ExtraFiles = []*os.File{r, p.netns} // fds 3 and 4
	pr := &Process{cmd: cmd, exited: make(chan struct{})}
	err = cmd.Start()
	r.Close() // the child's now
	if err != nil {
		w.Close()
		t.Fatalf("podrun: start container %q: %v", name, err)
	}
	go func() {
		json.NewEncoder(w).Encode(cfg) // EPIPE if the child is gone
		w.Close()
	}()
	go func() {
		pr.err = cmd.Wait()
		close(pr.exited)
	}()
	t.Cleanup(func() { pr.Stop() })
	return pr
}

// Run runs container name to its end and returns its exit error (an
// *exec.ExitError for a non-zero status).
func (p *Pod) Run(t testing.TB, name string, o Options) error {
	t.Helper()
	return p.Start(t, name, o).Wait()
}

// Wait waits for the process to end and returns how it ended.
func (pr *Process) Wait() error {
	<-pr.exited
	return pr.err
}

// Exited is closed when the process has ended.
func (pr *Process) Exited() <-chan struct{} { return pr.exited }

// Stop sends SIGTERM, as the kubelet does, and kills the process 15 s
// later if it has not ended; it returns how it ended.
func (pr *Process) Stop() error {
	select {
	case <-pr.exited:
		return pr.err
	default:
	}
	pr.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-pr.exited:
		return pr.err
	case <-time.After(15 * time.Second):
		pr.cmd.Process.Kill()
		<-pr.exited
		return errors.New("podrun: did not stop within 15 s of SIGTERM; killed")
	}
}

// command builds the child that becomes container name and what it is
// to be told (Start sends it on fd 3).
func (p *Pod) command(name string, o Options) (*exec.Cmd, *childConfig, error) {
	if p.Pod == nil {
		return nil, nil, errors.New("podrun: set Pod (and Objects) before Start")
	}
	c, err := Container(p.Pod, name)
	if err != nil {
		return nil, nil, err
	}
	mounts, err := p.volumes(c)
	if err != nil {
		return nil, nil, err
	}
	env, err := Env(p.Pod, c, p.Objects)
	if err != nil {
		return nil, nil, err
	}
	argv := o.Argv
	if argv == nil {
		if argv, err = Argv(c, env); err != nil {
			return nil, nil, err
		}
	}
	id := identityOf(p.Pod, c)
	if err := checkNonRoot(p.Pod, c, id); err != nil {
		return nil, nil, err
	}
	cfg := childConfig{
		Argv: argv, Env: env, Dir: c.WorkingDir, Identity: id,
		ReadOnlyRoot: c.SecurityContext != nil && c.SecurityContext.ReadOnlyRootFilesystem != nil && *c.SecurityContext.ReadOnlyRootFilesystem,
	}
	images := make([]string, 0, len(o.Image))
	for target := range o.Image {
		images = append(images, target)
	}
	sort.Strings(images)
	for _, target := range images {
		if !filepath.IsAbs(target) {
			return nil, nil, fmt.Errorf("podrun: image path %q is not absolute", target)
		}
		cfg.Mounts = append(cfg.Mounts, kubelayout.Mount{Source: o.Image[target], Target: target, ReadOnly: true})
	}
	cfg.Mounts = append(cfg.Mounts, mounts...)
	if cfg.Root, err = os.MkdirTemp(filepath.Join(p.dir, "root"), name+"-"); err != nil {
		return nil, nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = []string{childEnv + "=1"}
	cmd.Stdout, cmd.Stderr = o.Stdout, o.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL}
	return cmd, &cfg, nil
}

// volumes lays out what c mounts, each volume once per Pod.
func (p *Pod) volumes(c *corev1.Container) ([]kubelayout.Mount, error) {
	return kubelayout.Layout(filepath.Join(p.dir, "volumes"), p.Pod, c, p.Objects)
}
