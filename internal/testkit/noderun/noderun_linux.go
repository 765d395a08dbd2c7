package noderun

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"jr2.dev/boundary/demo"
	"jr2.dev/boundary/internal/testkit/imagestest"
	"jr2.dev/boundary/internal/testkit/kubetest"
	"jr2.dev/boundary/internal/testkit/nodetest"
)

// Config is what a command runs with.
type Config struct {
	// State is the directory of a running node's files (Up, Serve, Down):
	// lock, pid, kubeconfig, node.log, result.
	State string
	// Controlplane is the built controlplane (Demo).
	Controlplane string
	// Out gets the story and what a user must know; Err the progress.
	Out, Err io.Writer
}

// The files of STATE.
const (
	lockFile   = "lock"
	pidFile    = "pid"
	kubeconfig = "kubeconfig"
	logFile    = "node.log"
	resultFile = "result"
)

// The words Host.Command gives the inner half (nodetest.Inner).
const (
	innerDemo  = "noderun-demo"
	innerServe = "noderun-serve"
)

// DefaultState is .cache/node in the repository (found from the working
// directory up, as the node's binaries are).
func DefaultState() (string, error) {
	bin, err := kubetest.CacheDir() // ROOT/.cache/kube/bin
	if err != nil {
		return "", err
	}
	return filepath.Join(filepath.Dir(filepath.Dir(bin)), "node"), nil
}

// logw is a nodetest.Logger writing lines to w.
type logw struct{ w io.Writer }

func (l logw) Logf(format string, args ...any) { fmt.Fprintf(l.w, format+"\n", args...) }

// Demo brings the node up, runs demo.RunOnNode on it and removes it,
// checking the host after; it returns the exit code. Its inner half (in
// the node's namespaces) is this same call.
//
// Demo and Serve are each two halves of one binary, as nodetest.Start is:
// the outer half claims the host (nodetest.Claim: the machine's node lock,
// the host's snapshot, the kubelet's cgroupRoot) and re-runs the binary in
// the node's namespaces (Host.Command); the inner half brings the node up
// (nodetest.Up) and runs on it. When the inner half has ended, the outer
// removes the cgroups and compares the host (Host.Release).
func Demo(ctx context.Context, c Config) int {
	if nodetest.Inner() == innerDemo {
		return demoInner(ctx, c)
	}
	fmt.Fprintf(c.Err, "node-demo: starting a node (etcd, kube-apiserver, controller-manager, scheduler, containerd, kubelet) in namespaces of its own…\n")
	h, err := nodetest.Claim(logw{c.Err})
	if err != nil {
		fmt.Fprintf(c.Err, "node-demo: %v\n", err)
		return 1
	}
	exe, err := os.Executable()
	if err != nil {
		h.Release()
		fmt.Fprintf(c.Err, "node-demo: %v\n", err)
		return 1
	}
	claimed := time.Now()
	cmd := h.Command(innerDemo, exe, os.Args[1:]...)
	cmd.Stdout, cmd.Stderr = c.Out, c.Err
	// A signal reaches the inner half too (one process group): it stops
	// the node and ends; this half waits for it and then releases.
	runErr := cmd.Run()
	ok := report(c.Out, h)
	fmt.Fprintf(c.Err, "node-demo: %.1fs from the machine's node lock to the host check\n", time.Since(claimed).Seconds())
	if !ok {
		return 1
	}
	if runErr != nil {
		fmt.Fprintf(c.Err, "node-demo: the demo on the node failed (%v); its output is above\n", runErr)
		return 1
	}
	return 0
}

// report releases h and says what nodetest's host check found; it
// returns whether the host is as it was.
func report(w io.Writer, h *nodetest.Host) bool {
	changes, err := h.Release()
	for _, d := range changes {
		fmt.Fprintf(w, "the host changed during the node's run: %s\n", d)
	}
	if err != nil {
		fmt.Fprintf(w, "%v\n", err)
	}
	if len(changes) == 0 && err == nil {
		fmt.Fprintf(w, "%s\n", hostUnchanged)
		return true
	}
	return false
}

// hostUnchanged is the line Demo and Down print when the check passed.
const hostUnchanged = "the node is stopped and removed (its processes, mounts and cgroups); the host's sysctls, cgroups, mounts, interfaces and routes are as they were"

func demoInner(ctx context.Context, c Config) int {
	imgs, err := imagestest.Lookup("custodian-envoy", "agent", "pause")
	if err != nil {
		fmt.Fprintf(c.Err, "node-demo: %v\n", err)
		return 1
	}
	t0 := time.Now()
	n, err := up(ctx, imgs)
	if err != nil {
		fmt.Fprintf(c.Err, "node-demo: %v\n", err)
		return 1
	}
	defer n.Stop()
	fmt.Fprintf(c.Err, "node-demo: the node is up and ready in %.1fs\n", time.Since(t0).Seconds())
	err = demo.RunOnNode(ctx, demo.NodeOptions{
		Controlplane: c.Controlplane, Kubectl: n.API.Tools.Kubectl, Kubeconfig: n.API.Kubeconfig,
		ListenIP: nodetest.NodeIP, CustodianImage: imgs["custodian-envoy"].Ref, AgentImage: imgs["agent"].Ref,
	}, c.Out)
	if err != nil {
		fmt.Fprintf(c.Err, "node-demo: %v\n", err)
		return 1
	}
	return 0
}

// up brings the node up with imgs imported and waits until a Pod may be
// applied in namespace default: the controller-manager has made its
// default ServiceAccount, which the ServiceAccount admission plugin needs.
func up(ctx context.Context, imgs map[string]imagestest.Image) (*nodetest.Node, error) {
	n, err := nodetest.Up(nodetest.Options{Images: imagestest.Tars(imgs), Pause: imgs["pause"].Ref})
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		_, err := n.API.Client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			return n, nil
		}
		if !apierrors.IsNotFound(err) || time.Now().After(deadline) || ctx.Err() != nil {
			n.Stop()
			return nil, fmt.Errorf("the default ServiceAccount of namespace default: %v (the controller-manager makes it)", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// refusal is what a second Up or Serve says while a node runs.
func refusal(state string) string {
	pid, _ := os.ReadFile(filepath.Join(state, pidFile))
	return fmt.Sprintf("a node is already running (pid %s, %s): use it, or stop it first with `make node-down`", strings.TrimSpace(string(pid)), state)
}

// Up starts Serve detached (a session of its own, its output in
// STATE/node.log) and returns once the node is ready, printing
// the kubeconfig and the kubectl line to use; it refuses while a node of
// c.State runs.
func Up(ctx context.Context, c Config) int {
	if err := os.MkdirAll(c.State, 0o700); err != nil {
		fmt.Fprintf(c.Err, "node-up: %v\n", err)
		return 1
	}
	if held, err := locked(c.State); err != nil || held {
		if err == nil {
			err = errors.New(refusal(c.State))
		}
		fmt.Fprintf(c.Err, "node-up: %v\n", err)
		return 1
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(c.Err, "node-up: %v\n", err)
		return 1
	}
	logPath := filepath.Join(c.State, logFile)
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		fmt.Fprintf(c.Err, "node-up: %v\n", err)
		return 1
	}
	defer log.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		fmt.Fprintf(c.Err, "node-up: %v\n", err)
		return 1
	}
	defer pr.Close()
	cmd := exec.Command(exe, "serve", "--state", c.State)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.ExtraFiles = []*os.File{pw} // fd 3: Serve's status lines
	// A session of its own: the node outlives this process, make's and
	// the terminal's signals.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	fmt.Fprintf(c.Err, "node-up: starting a node (etcd, kube-apiserver, controller-manager, scheduler, containerd, kubelet) in namespaces of its own; its log is %s\n", logPath)
	if err := cmd.Start(); err != nil {
		pw.Close()
		fmt.Fprintf(c.Err, "node-up: %v\n", err)
		return 1
	}
	pw.Close()
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		if sc.Text() != statusReady {
			fmt.Fprintf(c.Err, "node-up: %s\n", sc.Text())
			continue
		}
		kc := filepath.Join(c.State, kubeconfig)
		kubectl := "kubectl"
		if t, err := kubetest.FindTools(); err == nil {
			kubectl = t.Kubectl
		}
		fmt.Fprintf(c.Out, "the node is up (pid %d); its kubeconfig is %s:\n\n", cmd.Process.Pid, kc)
		fmt.Fprintf(c.Out, "  %s --kubeconfig %s get nodes\n\n", kubectl, kc)
		fmt.Fprintf(c.Out, "or export KUBECONFIG=%s PATH=%s:$PATH and use kubectl as docs/kubernetes.md shows;\n", kc, filepath.Dir(kubectl))
		fmt.Fprintf(c.Out, "the images of `make images` are imported (imagePullPolicy IfNotPresent; no registry), a pod reaches only the node's address %s.\n", nodetest.NodeIP)
		fmt.Fprintf(c.Out, "`make node-down` stops it and removes everything.\n")
		return 0
	}
	err = cmd.Wait()
	b, _ := os.ReadFile(logPath)
	fmt.Fprintf(c.Err, "node-up: the node did not come up (%v); the end of %s:\n%s\n", err, logPath, tail(string(b), 30))
	return 1
}

// statusReady is Serve's last status line, once STATE/kubeconfig is
// written.
const statusReady = "ready"

// Serve is the long-running runner Up starts, two halves of one binary as
// Demo is. It returns the exit code once the node is stopped.
//
// Serve holds an flock on STATE/lock for as long as it runs, writes its
// pid to STATE/pid and, once the node is ready, STATE/kubeconfig: the
// node's API server, reached through a listener Serve makes on the host's
// loopback before the namespaces exist and hands to the inner half, which
// forwards each connection to the API server inside the node's network
// namespace (kubectl exec, logs and port-forward included). On SIGTERM or
// SIGINT the inner half stops the node, and Serve releases the host,
// writes what the host check found to STATE/result and removes its other
// files.
func Serve(ctx context.Context, c Config) int {
	if nodetest.Inner() == innerServe {
		return serveInner(ctx, c)
	}
	status := io.Writer(c.Err)
	syscall.CloseOnExec(3) // Up's status pipe: no process of the node holds it open
	if f := os.NewFile(3, "status"); f != nil {
		if _, err := f.Stat(); err == nil {
			defer f.Close()
			status = io.MultiWriter(f, c.Err)
		}
	}
	fail := func(err error) int {
		fmt.Fprintf(status, "%v\n", err)
		return 1
	}
	if err := os.MkdirAll(c.State, 0o700); err != nil {
		return fail(err)
	}
	lock, err := os.OpenFile(filepath.Join(c.State, lockFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fail(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return fail(errors.New(refusal(c.State)))
	}
	os.Remove(filepath.Join(c.State, resultFile))
	if err := os.WriteFile(filepath.Join(c.State, pidFile), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
		return fail(err)
	}
	defer os.Remove(filepath.Join(c.State, pidFile))
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)

	h, err := nodetest.Claim(logw{status})
	if err != nil {
		return fail(err)
	}
	fmt.Fprintf(c.Err, "noderun: the node's cgroupRoot is /%s\n", h.Cgroup)
	result := func(changes []string, err error) {
		r := struct {
			Changes []string `json:"changes"`
			Error   string   `json:"error,omitempty"`
		}{Changes: changes}
		if err != nil {
			r.Error = err.Error()
		}
		b, _ := json.Marshal(r)
		os.WriteFile(filepath.Join(c.State, resultFile), b, 0o600)
		for _, d := range changes {
			fmt.Fprintf(c.Err, "the host changed during the node's run: %s\n", d)
		}
	}
	release := func() {
		changes, err := h.Release()
		result(changes, err)
	}
	defer os.Remove(filepath.Join(c.State, kubeconfig))
	// The listener is made here, in the host's network namespace, and
	// handed down: its connections come from the host's kubectl.
	l, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		release()
		return fail(err)
	}
	lf, err := l.File()
	l.Close()
	if err != nil {
		release()
		return fail(err)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		lf.Close()
		release()
		return fail(err)
	}
	exe, err := os.Executable()
	if err != nil {
		lf.Close()
		release()
		return fail(err)
	}
	cmd := h.Command(innerServe, exe, "serve", "--state", c.State)
	cmd.Stdout, cmd.Stderr = c.Err, c.Err
	cmd.ExtraFiles = []*os.File{lf, pw} // fd 3: the listener; fd 4: the kubeconfig back
	err = cmd.Start()
	lf.Close()
	pw.Close()
	if err != nil {
		pr.Close()
		release()
		return fail(fmt.Errorf("start the node's namespaces: %w", err))
	}
	done := make(chan error, 1)
	go func() {
		kc, _ := io.ReadAll(pr)
		pr.Close()
		if len(kc) == 0 {
			return // the inner half ended before the node was ready
		}
		if err := writeKubeconfig(filepath.Join(c.State, kubeconfig), kc, "https://"+l.Addr().String()); err != nil {
			fmt.Fprintf(status, "%v\n", err)
			cmd.Process.Signal(syscall.SIGTERM)
			return
		}
		fmt.Fprintf(status, "%s\n", statusReady)
	}()
	go func() { done <- cmd.Wait() }()
	var waitErr error
	select {
	case sig := <-stop:
		fmt.Fprintf(c.Err, "noderun: %v: stopping the node\n", sig)
		cmd.Process.Signal(syscall.SIGTERM)
		waitErr = <-done
	case waitErr = <-done:
		fmt.Fprintf(c.Err, "noderun: the node's inner run ended: %v\n", waitErr)
	}
	release()
	if waitErr != nil {
		return 1
	}
	return 0
}

// writeKubeconfig writes the node's kubeconfig with every cluster's
// server at server (Serve's listener on the host).
func writeKubeconfig(path string, kc []byte, server string) error {
	cfg, err := clientcmd.Load(kc)
	if err != nil {
		return fmt.Errorf("the node's kubeconfig: %w", err)
	}
	for _, cl := range cfg.Clusters {
		cl.Server = server
	}
	b, err := clientcmd.Write(*cfg)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

func serveInner(ctx context.Context, c Config) int {
	// Handed down by Serve; no process of the node inherits them.
	syscall.CloseOnExec(3)
	syscall.CloseOnExec(4)
	lf, kcOut := os.NewFile(3, "listener"), os.NewFile(4, "kubeconfig")
	l, err := net.FileListener(lf)
	lf.Close()
	if err != nil {
		fmt.Fprintf(c.Err, "noderun: the host's listener: %v\n", err)
		return 1
	}
	defer l.Close()
	imgs, err := imagestest.Lookup()
	if err != nil {
		fmt.Fprintf(c.Err, "noderun: %v\n", err)
		return 1
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	n, err := up(ctx, imgs)
	if err != nil {
		fmt.Fprintf(c.Err, "noderun: %v\n", err)
		return 1
	}
	defer n.Stop()
	u, err := url.Parse(n.API.URL)
	if err != nil {
		fmt.Fprintf(c.Err, "noderun: %v\n", err)
		return 1
	}
	go forward(l, u.Host)
	kc, err := os.ReadFile(n.API.Kubeconfig)
	if err == nil {
		_, err = kcOut.Write(kc)
	}
	kcOut.Close()
	if err != nil {
		fmt.Fprintf(c.Err, "noderun: the kubeconfig: %v\n", err)
		return 1
	}
	fmt.Fprintf(c.Err, "noderun: the node is up; its API server is forwarded from %s\n", l.Addr())
	sig := <-stop
	fmt.Fprintf(c.Err, "noderun: %v: stopping the node\n", sig)
	l.Close()
	return 0
}

// forward copies each connection accepted on l to and from addr (the API
// server, in this network namespace) until l is closed.
func forward(l net.Listener, addr string) {
	for {
		in, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer in.Close()
			out, err := net.DialTimeout("tcp", addr, 10*time.Second)
			if err != nil {
				return
			}
			defer out.Close()
			go func() {
				io.Copy(out, in)
				out.(*net.TCPConn).CloseWrite()
			}()
			io.Copy(in, out)
		}()
	}
}

// locked reports whether a Serve holds state's lock.
func locked(state string) (bool, error) {
	f, err := os.OpenFile(filepath.Join(state, lockFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return false, err
	}
	defer f.Close()
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return true, nil
	}
	return false, err
}

// downWait bounds how long Down waits for Serve to stop the node: a
// deadline, not an assertion of speed.
const downWait = 2 * time.Minute

// Down stops the node Serve runs for c.State, waits until Serve has
// ended, prints what the host check found and removes c.State. With no
// node running it says so and succeeds. It signals the pid and waits for
// the flock on STATE/lock to be free (the kernel frees it when Serve ends,
// however it ends).
func Down(ctx context.Context, c Config) int {
	f, err := os.OpenFile(filepath.Join(c.State, lockFile), os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(c.Out, "no node is running (%s holds none)\n", c.State)
		return 0
	}
	if err != nil {
		fmt.Fprintf(c.Err, "node-down: %v\n", err)
		return 1
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
		if _, err := os.Stat(filepath.Join(c.State, resultFile)); err != nil {
			fmt.Fprintf(c.Out, "no node is running (%s holds none)\n", c.State)
			os.RemoveAll(c.State)
			return 0
		}
		// A Serve that ended by itself left its result: say it.
	} else {
		b, err := os.ReadFile(filepath.Join(c.State, pidFile))
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 {
			fmt.Fprintf(c.Err, "node-down: a node runs but %s names no pid: %v\n", filepath.Join(c.State, pidFile), err)
			return 1
		}
		fmt.Fprintf(c.Err, "node-down: stopping the node (pid %d)…\n", pid)
		if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
			fmt.Fprintf(c.Err, "node-down: signal pid %d: %v\n", pid, err)
			return 1
		}
		deadline := time.Now().Add(downWait)
		// The lock is free once Serve's files are closed; its process is
		// gone a moment later.
		for syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil || !gone(pid) {
			if time.Now().After(deadline) {
				fmt.Fprintf(c.Err, "node-down: pid %d still runs %s after its SIGTERM; its log is %s\n", pid, downWait, filepath.Join(c.State, logFile))
				return 1
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	b, err := os.ReadFile(filepath.Join(c.State, resultFile))
	var r struct {
		Changes []string `json:"changes"`
		Error   string   `json:"error"`
	}
	if err == nil {
		err = json.Unmarshal(b, &r)
	}
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(c.State, logFile))
		fmt.Fprintf(c.Err, "node-down: the runner left no result (%v); the end of its log:\n%s\n", err, tail(string(log), 30))
		return 1
	}
	os.RemoveAll(c.State)
	for _, d := range r.Changes {
		fmt.Fprintf(c.Out, "the host changed during the node's run: %s\n", d)
	}
	if r.Error != "" {
		fmt.Fprintf(c.Out, "%s\n", r.Error)
	}
	if len(r.Changes) != 0 || r.Error != "" {
		return 1
	}
	fmt.Fprintf(c.Out, "%s\n", hostUnchanged)
	return 0
}

// gone reports whether process pid has ended: no such process, or one
// that has exited and waits only for its parent to reap it.
func gone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return strings.HasPrefix(rest, "Z") || strings.HasPrefix(rest, "X")
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + strings.Join(lines, "\n  ")
}
