//go:build linux

package e2e

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"jr2.dev/boundary/internal/testkit/testpki"
)

// nsPrefix begins the name of every network namespace the suite makes;
// the rest is the pid of the test binary that made it.
const nsPrefix = "jr2e2e-"

// testNet is where the tunnel's test hosts live: 198.18.0.0/15 (RFC 2544,
// benchmarking), outside every guarded range and every range the
// contained run's launcher takes (10.231.0.0/16).
var testNet = netip.MustParsePrefix("198.18.0.0/15")

// Ports of the namespace's test host.
const (
	nsEchoPort  = 7000 // raw TCP echo
	nsHTTPSPort = 8443 // HTTPS, a leaf of the upstream CA
)

// nsHost is a test host in a network namespace of its own, joined to this
// one by a veth pair: not bound, so the Custodian tunnels to it.
type nsHost struct {
	name     string     // the namespace
	hostSide netip.Addr // this namespace's end of the veth
	addr     netip.Addr // the test host's address
	cmd      *exec.Cmd
}

func (n *nsHost) echo() string  { return netip.AddrPortFrom(n.addr, nsEchoPort).String() }
func (n *nsHost) https() string { return netip.AddrPortFrom(n.addr, nsHTTPSPort).String() }

// newNSHost makes the namespace and the veth pair, and starts the test
// host in it (this test binary, role nshost): a TCP echo and an HTTPS
// server with a leaf of ca. Everything is removed at cleanup, and a
// namespace a killed earlier run left is removed first.
func newNSHost(t testing.TB, ca *testpki.CA) *nsHost {
	t.Helper()
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatal("the tunnel tests need ip (iproute2): apt-get install iproute2")
	}
	removeStaleNamespaces(t)
	// One namespace per world: the suite makes a world per host, and a
	// deleted namespace's veth can outlive the delete for a moment, so
	// names and the /30 carry the world's sequence number too.
	pid, seq := os.Getpid(), int(nsSeq.Add(1))
	n := &nsHost{name: nsPrefix + strconv.Itoa(pid) + "-" + strconv.Itoa(seq)}
	base := testNet.Addr().As4()
	slot := uint32((pid*8+seq)%(1<<15)) * 4 // a /30 of the /15 per pid and world
	v := uint32(base[0])<<24 | uint32(base[1])<<16 | slot
	n.hostSide = netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v) + 1})
	n.addr = n.hostSide.Next()
	hostIf, nsIf := fmt.Sprintf("je%dx%dh", pid, seq), fmt.Sprintf("je%dx%dn", pid, seq)

	ipCmd(t, "netns", "add", n.name)
	t.Cleanup(func() { n.remove(t) })
	ipCmd(t, "link", "add", hostIf, "type", "veth", "peer", "name", nsIf, "netns", n.name)
	ipCmd(t, "addr", "add", n.hostSide.String()+"/30", "dev", hostIf)
	ipCmd(t, "link", "set", hostIf, "up")
	ipCmd(t, "-n", n.name, "addr", "add", n.addr.String()+"/30", "dev", nsIf)
	ipCmd(t, "-n", n.name, "link", "set", nsIf, "up")
	ipCmd(t, "-n", n.name, "link", "set", "lo", "up")

	dir := t.TempDir()
	leaf := ca.Leaf(t, n.addr.String(), "nshost.test")
	if err := os.WriteFile(filepath.Join(dir, "leaf.crt"), leaf.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "leaf.key"), leaf.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	n.cmd = exec.Command("ip", "netns", "exec", n.name, bins.self, n.addr.String(), dir)
	n.cmd.Env = append(os.Environ(), roleEnv+"=nshost")
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	n.cmd.Stderr = os.Stderr
	stdin, _ := n.cmd.StdinPipe() // the host ends when this closes
	stdout, _ := n.cmd.StdoutPipe()
	if err := n.cmd.Start(); err != nil {
		t.Fatalf("start the namespace's test host: %v", err)
	}
	t.Cleanup(func() { stdin.Close(); n.cmd.Wait() })
	ready := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		ready <- line
		io.Copy(io.Discard, stdout)
	}()
	select {
	case line := <-ready:
		if line != "ready\n" {
			t.Fatalf("the namespace's test host: %q", line)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the namespace's test host did not start")
	}
	return n
}

func (n *nsHost) remove(t testing.TB) {
	if out, err := exec.Command("ip", "netns", "delete", n.name).CombinedOutput(); err != nil {
		t.Errorf("ip netns delete %s: %v: %s", n.name, err, out)
	}
}

func ipCmd(t testing.TB, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v: %s (the suite needs root for namespaces)", strings.Join(args, " "), err, out)
	}
}

// nsSeq numbers the namespaces of this process.
var nsSeq atomic.Int32

// removeStaleNamespaces deletes the namespaces of suite runs whose process
// is gone (a run killed before its cleanup).
func removeStaleNamespaces(t testing.TB) {
	ents, _ := os.ReadDir("/run/netns")
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), nsPrefix)
		if !ok {
			continue
		}
		pid, _, _ := strings.Cut(rest, "-")
		if _, err := os.Stat("/proc/" + pid); err == nil {
			continue
		}
		if out, err := exec.Command("ip", "netns", "delete", e.Name()).CombinedOutput(); err != nil {
			t.Logf("stale namespace %s: %v: %s", e.Name(), err, out)
		}
	}
}

// nsHostMain is the nshost role, run by `ip netns exec` inside the test
// namespace: a TCP echo on :7000 and HTTPS on :8443 at the address in
// argv[1], with the leaf in argv[2]. It prints "ready" and serves until its
// stdin closes.
func nsHostMain() int {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "e2e nshost: want ADDR DIR")
		return 2
	}
	addr, dir := os.Args[1], os.Args[2]
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "leaf.crt"), filepath.Join(dir, "leaf.key"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e nshost:", err)
		return 1
	}
	el, err := net.Listen("tcp", net.JoinHostPort(addr, strconv.Itoa(nsEchoPort)))
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e nshost:", err)
		return 1
	}
	hl, err := tls.Listen("tcp", net.JoinHostPort(addr, strconv.Itoa(nsHTTPSPort)), &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e nshost:", err)
		return 1
	}
	go func() {
		for {
			c, err := el.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	go http.Serve(hl, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from the test namespace, %s %s\n", r.Method, r.URL.Path)
	}))
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
	return 0
}
