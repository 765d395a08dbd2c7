package kubetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// FieldManager is the field manager every apply of this project uses, as
// the documented `kubectl apply --server-side --field-manager=jr2` does.
const FieldManager = "jr2"

// ServiceCIDR is the API server's --service-cluster-ip-range.
const ServiceCIDR = "10.96.0.0/24"

// startWait bounds how long a start may take before it is called failed
// (etcd healthy, kube-apiserver's /readyz 200): a start deadline on a
// shared 2-core machine, not an assertion of speed.
const startWait = 3 * time.Minute

// Server is a running etcd and kube-apiserver. Its fields are read-only.
type Server struct {
	// URL is the API server's https://127.0.0.1:PORT.
	URL string
	// Kubeconfig is a kubeconfig file for kubectl: the server, its CA and
	// an admin token (group system:masters).
	Kubeconfig string
	// Config is the client configuration the clients below use.
	Config *rest.Config
	// Client is a typed client; Dynamic and Mapper serve Apply.
	Client  kubernetes.Interface
	Dynamic dynamic.Interface
	Mapper  meta.RESTMapperWithContext
	// Tools are the binaries it runs (Tools.Kubectl for Run).
	Tools Tools
	// ServiceAccountKey is the private key the server verifies service
	// account tokens with: a controller-manager signs them with it.
	ServiceAccountKey string

	dir   string
	procs []*proc
	nsMu  sync.Mutex
	nsN   int
}

type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

// Start starts a server for t alone; t.Cleanup stops it and removes its
// files. Without the binaries it fails (or, with JR2_KUBE_TESTS=skip and
// not JR2_REQUIRE_ALL=1, skips loudly).
func Start(t testing.TB) *Server { return StartArgs(t) }

// StartArgs is Start with more kube-apiserver flags (a node's tests give
// --kubelet-preferred-address-types, for instance).
func StartArgs(t testing.TB, apiserverArgs ...string) *Server {
	t.Helper()
	tools := requireTools(t)
	s, err := start(tools, apiserverArgs...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// StartServer is StartArgs for a caller that is not a test: the caller
// stops the server (Stop). A missing binary is an error that is
// ErrMissing (errors.Is).
func StartServer(apiserverArgs ...string) (*Server, error) {
	tools, err := FindTools()
	if err != nil {
		return nil, err
	}
	return start(tools, apiserverArgs...)
}

func requireTools(t testing.TB) Tools {
	t.Helper()
	tools, err := FindTools()
	if err == nil {
		return tools
	}
	skipOrFail(t, err)
	return Tools{}
}

func skipOrFail(t testing.TB, err error) {
	t.Helper()
	if errors.Is(err, ErrMissing) && os.Getenv(EnvSkip) == "skip" && os.Getenv(EnvRequireAll) != "1" {
		t.Skipf("NOT RUN against a real API server: %v (%s=skip says so on purpose)", err, EnvSkip)
	}
	if errors.Is(err, ErrMissing) && os.Getenv(EnvRequireAll) != "1" {
		t.Fatalf("%v; or set %s=skip to skip the tests against a real API server", err, EnvSkip)
	}
	t.Fatal(err)
}

var shared struct {
	inMain bool
	once   sync.Once
	s      *Server
	err    error
}

// Main runs m with one server shared by every test that calls Shared,
// started by the first, and stops it after the last test. Use it as
// TestMain: os.Exit(kubetest.Main(m)).
func Main(m *testing.M) int {
	shared.inMain = true
	code := m.Run()
	if shared.s != nil {
		shared.s.Stop()
	}
	return code
}

// Shared is the test binary's one server (see Main, which must run the
// tests). Tests that share it keep apart by namespace (Namespace).
//
//	func TestMain(m *testing.M) { os.Exit(kubetest.Main(m)) }
//
//	func TestX(t *testing.T) {
//		s := kubetest.Shared(t)        // one server per test binary
//		ns := s.Namespace(t)           // a fresh namespace with its default ServiceAccount
//		obj, err := s.Apply(ctx, yaml) // server-side apply, field manager "jr2"
//		out, err := s.Run(t, dir, "kubectl apply --server-side --field-manager=jr2 -f kubernetes/")
//	}
//
// Start gives a test a server of its own, stopped by t.Cleanup.
func Shared(t testing.TB) *Server {
	t.Helper()
	if !shared.inMain {
		t.Fatal("kubetest.Shared needs TestMain to be os.Exit(kubetest.Main(m)), which stops the server after the tests")
	}
	tools := requireTools(t)
	shared.once.Do(func() { shared.s, shared.err = start(tools) })
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.s
}

func start(tools Tools, extra ...string) (*Server, error) {
	var err error
	// A port picked free may be taken before the server binds it: try
	// again with others.
	for range 3 {
		var s *Server
		s, err = startOnce(tools, extra)
		if err == nil {
			return s, nil
		}
		if !errors.Is(err, errPortTaken) {
			break
		}
	}
	return nil, err
}

var errPortTaken = errors.New("port taken")

func startOnce(tools Tools, extra []string) (s *Server, err error) {
	dir, err := os.MkdirTemp("", "jr2-kubetest-")
	if err != nil {
		return nil, err
	}
	s = &Server{Tools: tools, dir: dir}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	s.URL = "https://127.0.0.1:" + strconv.Itoa(ports[2])

	// etcd first: kube-apiserver's readiness includes etcd's.
	etcd, err := s.spawn("etcd", tools.Etcd,
		"--name", "jr2-kubetest",
		"--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "jr2-kubetest="+peerURL,
		"--log-level", "warn")
	if err != nil {
		return nil, err
	}
	if err := waitFor(etcd, http.DefaultClient, etcdURL+"/health", ""); err != nil {
		return nil, err
	}

	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return nil, err
	}
	tok := make([]byte, 24)
	if _, err := rand.Read(tok); err != nil {
		return nil, err
	}
	token := hex.EncodeToString(tok)
	files := map[string][]byte{
		"sa.key":     pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}),
		"sa.pub":     pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}),
		"tokens.csv": []byte(token + ",jr2-admin,jr2-admin,system:masters\n"),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return nil, err
		}
	}
	s.ServiceAccountKey = filepath.Join(dir, "sa.key")
	certDir := filepath.Join(dir, "certs")
	api, err := s.spawn("kube-apiserver", tools.APIServer, append([]string{
		"--etcd-servers", etcdURL,
		"--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(ports[2]),
		// No controller keeps the kubernetes Service's endpoints, and the
		// default reconciler refuses a loopback advertise address.
		"--endpoint-reconciler-type", "none",
		"--cert-dir", certDir,
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--service-account-key-file", filepath.Join(dir, "sa.pub"),
		"--service-account-signing-key-file", filepath.Join(dir, "sa.key"),
		"--service-cluster-ip-range", ServiceCIDR,
		"--authorization-mode", "RBAC",
		"--token-auth-file", filepath.Join(dir, "tokens.csv"),
		"--anonymous-auth=false",
		"--profiling=false",
		"--v", "0"}, extra...)...)
	if err != nil {
		return nil, err
	}
	// kube-apiserver writes its self-signed serving certificate (with the
	// CA that signed it) before it listens.
	caFile := filepath.Join(certDir, "apiserver.crt")
	var ca []byte
	err = poll(api, func() (bool, error) {
		b, err := os.ReadFile(caFile)
		if err != nil || !bytes.Contains(b, []byte("END CERTIFICATE")) {
			return false, nil
		}
		ca = b
		return true, nil
	}, "its serving certificate "+caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("kube-apiserver's %s holds no certificate", caFile)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	if err := waitFor(api, hc, s.URL+"/readyz", token); err != nil {
		return nil, err
	}

	s.Config = &rest.Config{Host: s.URL, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: ca}, QPS: -1}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["jr2-kubetest"] = &clientcmdapi.Cluster{Server: s.URL, CertificateAuthorityData: ca}
	kc.AuthInfos["jr2-admin"] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["jr2-kubetest"] = &clientcmdapi.Context{Cluster: "jr2-kubetest", AuthInfo: "jr2-admin"}
	kc.CurrentContext = "jr2-kubetest"
	s.Kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, s.Kubeconfig); err != nil {
		return nil, err
	}
	if s.Client, err = kubernetes.NewForConfig(s.Config); err != nil {
		return nil, err
	}
	if s.Dynamic, err = dynamic.NewForConfig(s.Config); err != nil {
		return nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(s.Config)
	if err != nil {
		return nil, err
	}
	s.Mapper = restmapper.NewDeferredDiscoveryRESTMapperWithContext(memory.NewMemCacheClientWithContext(discovery.ToDiscoveryInterfaceWithContext(dc)))
	return s, nil
}

// Stop kills the server's processes and removes its directory. It is
// safe to call more than once.
func (s *Server) Stop() {
	for i := len(s.procs) - 1; i >= 0; i-- {
		p := s.procs[i]
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	s.procs = nil
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
		s.dir = ""
	}
}

// spawn starts bin with its output in a log file of the server's
// directory. The process dies with the test binary (Pdeathsig).
func (s *Server) spawn(name, bin string, args ...string) (*proc, error) {
	log := filepath.Join(s.dir, name+".log")
	f, err := os.Create(log)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cmd := exec.Command(bin, args...)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + s.dir}
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: log, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	s.procs = append(s.procs, p)
	return p, nil
}

// poll calls ok until it reports true, p exits, or startWait passes.
func poll(p *proc, ok func() (bool, error), what string) error {
	deadline := time.Now().Add(startWait)
	for {
		done, err := ok()
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		select {
		case <-p.done:
			return p.failed(fmt.Sprintf("exited (%v) before %s", p.err, what))
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return p.failed(fmt.Sprintf("not %s after %s", what, startWait))
		}
	}
}

// waitFor polls url (with token as a bearer token, if any) until it
// answers 200.
func waitFor(p *proc, hc *http.Client, url, token string) error {
	return poll(p, func() (bool, error) {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := hc.Do(req.WithContext(ctx))
		if err != nil {
			return false, nil
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	}, "ready at "+url)
}

// failed is err with the end of p's log, which says why.
func (p *proc) failed(why string) error {
	b, _ := os.ReadFile(p.log)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	tail := strings.Join(lines, "\n  ")
	err := fmt.Errorf("%s %s; the end of its log:\n  %s", p.name, why, tail)
	if strings.Contains(tail, "address already in use") {
		return fmt.Errorf("%w: %w", errPortTaken, err)
	}
	return err
}

// freePorts are n loopback ports free when asked (the kernel's choice).
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
