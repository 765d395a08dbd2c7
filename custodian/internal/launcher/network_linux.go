//go:build linux

package launcher

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Where names live.
const (
	netnsDir   = "/run/netns"
	etcNetns   = "/etc/netns"
	namePrefix = "jr2-"
	mediatorNS = "-m" // suffix of the mediator's namespace
)

// addrRange is where a run's /30 is taken from.
var addrRange = netip.MustParsePrefix("10.231.0.0/16")

// catchTable is the routing table, in both namespaces, of the catch-all:
// in the child's, a default route to the mediator that only CatchTCP's
// rules select; in the mediator's, every address local, for what arrives
// from the veth.
const catchTable = "231"

// Network is one run's pair of namespaces. Close removes everything
// NewNetwork made; it is safe to call more than once.
type Network struct {
	Name       string       // the child's namespace, "jr2-<runner pid>-<hex>"
	Prefix     netip.Prefix // the run's /30
	Mediator   netip.Addr   // the mediator's end, in Name+"-m"
	Child      netip.Addr   // the child's end, in Name
	ResolvConf string       // /etc/netns/<Name>/resolv.conf

	ip        string   // the iproute2 binary
	mediator  *os.File // the mediator namespace, held open for ListenTCP/UDP
	vethChild string   // the child's end of the veth pair
	closeOnce sync.Once
	closeErr  error
}

// NewNetwork makes the run's namespaces, veth pair, addresses and
// resolv.conf. On error, whatever was made is removed again.
//
// The two named network namespaces are joined by a veth pair on a /30
// from 10.231.0.0/16: the child's (".2") and the mediator's (".1").
// The mediator's namespace holds nothing but the sockets the mediator opens
// there through Network.ListenTCP, ListenUDP and CatchTCP, so "only the
// mediator is reachable" holds by construction: no host service listening
// on a wildcard address is in that namespace, and no firewall rule is
// needed or left behind. The child's main routing table is the /30 link
// route and nothing else: a dial to any other address fails at once with
// ENETUNREACH, whatever the child's proxy variables say — except on a port
// the mediator catches (CatchTCP): TCP to that port, at any address, is
// routed to the mediator, which takes it in as its own, so a literal-IP
// dial reaches the mediator's record instead of dying in the child's
// kernel. (hark's W2 used a default route and FORWARD DROP rules on the
// host; here nothing leaves the mediator's namespace but what the mediator
// itself dials from the runner's, and no rule outlives the namespaces.)
// IPv6 is disabled in both namespaces (a link-local peer address would be
// a second way out), and forwarding is written off in both, whatever the
// host's defaults.
//
// The namespaces are configured with iproute2 (`ip netns`, `ip link`, `ip
// addr`): it is installed wherever this runs (CI installs it), it makes
// named namespaces the way `ip netns exec` users expect, and each command is
// one of hark's verified mechanics. Sysctls are written from a thread that
// has entered the namespace.
//
// /etc/netns/<ns>/resolv.conf names the mediator. The child does what `ip
// netns exec` does: it enters a private mount namespace (slave to the
// host's) and bind-mounts that file over /etc/resolv.conf, which the
// launcher also adds to the Landlock rules (read only).
func NewNetwork() (n *Network, err error) {
	ipBin, err := exec.LookPath("ip")
	if err != nil {
		return nil, errors.New("launcher: the ip command is missing; install iproute2")
	}
	var tag [3]byte
	if _, err := rand.Read(tag[:]); err != nil {
		return nil, fmt.Errorf("launcher: %w", err)
	}
	prefix, err := pickPrefix()
	if err != nil {
		return nil, err
	}
	name := namePrefix + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(tag[:])
	n = &Network{
		Name:       name,
		Prefix:     prefix,
		Mediator:   prefix.Addr().Next(),
		Child:      prefix.Addr().Next().Next(),
		ResolvConf: filepath.Join(etcNetns, name, "resolv.conf"),
		ip:         ipBin,
		vethChild:  "j" + hex.EncodeToString(tag[:]) + "c",
	}
	defer func() {
		if err != nil {
			n.Close()
			n = nil
		}
	}()
	vethChild, vethMed := n.vethChild, "j"+hex.EncodeToString(tag[:])+"m"
	med := name + mediatorNS
	bits := strconv.Itoa(prefix.Bits())
	for _, args := range [][]string{
		{"netns", "add", name},
		{"netns", "add", med},
		{"link", "add", vethChild, "netns", name, "type", "veth", "peer", "name", vethMed, "netns", med},
		{"-n", name, "addr", "add", n.Child.String() + "/" + bits, "dev", vethChild},
		{"-n", med, "addr", "add", n.Mediator.String() + "/" + bits, "dev", vethMed},
		{"-n", name, "link", "set", "lo", "up"},
		{"-n", med, "link", "set", "lo", "up"},
	} {
		if err := n.run(args...); err != nil {
			return n, err
		}
	}
	if n.mediator, err = os.Open(filepath.Join(netnsDir, med)); err != nil {
		return n, fmt.Errorf("launcher: open the mediator's namespace: %w", err)
	}
	child, err := os.Open(filepath.Join(netnsDir, name))
	if err != nil {
		return n, fmt.Errorf("launcher: open the child's namespace: %w", err)
	}
	defer child.Close()
	for _, ns := range []*os.File{child, n.mediator} {
		if err := inNS(ns, hardenSysctls); err != nil {
			return n, err
		}
	}
	for _, args := range [][]string{
		{"-n", name, "link", "set", vethChild, "up"},
		{"-n", med, "link", "set", vethMed, "up"},
		// The catch-all (see CatchTCP). The child's table is selected by
		// no rule until CatchTCP adds one for its port.
		{"-n", name, "route", "add", "default", "via", n.Mediator.String(), "dev", vethChild, "table", catchTable},
		{"-n", med, "route", "add", "local", "0.0.0.0/0", "dev", "lo", "table", catchTable},
		{"-n", med, "rule", "add", "iif", vethMed, "lookup", catchTable, "pref", "100"},
	} {
		if err := n.run(args...); err != nil {
			return n, err
		}
	}
	if err := os.MkdirAll(filepath.Dir(n.ResolvConf), 0o755); err != nil {
		return n, fmt.Errorf("launcher: %w", err)
	}
	if err := os.WriteFile(n.ResolvConf, []byte("nameserver "+n.Mediator.String()+"\n"), 0o644); err != nil {
		return n, fmt.Errorf("launcher: %w", err)
	}
	return n, nil
}

// hardenSysctls runs inside a namespace: no IPv6 (a link-local address
// would be a second peer), no forwarding (a namespace may inherit the
// host's values when net.core.devconf_inherit_init_net is set).
func hardenSysctls() error {
	for _, kv := range [][2]string{
		{"net/ipv6/conf/all/disable_ipv6", "1"},
		{"net/ipv6/conf/default/disable_ipv6", "1"},
		{"net/ipv4/ip_forward", "0"},
		{"net/ipv4/conf/all/forwarding", "0"},
	} {
		if err := os.WriteFile("/proc/sys/"+kv[0], []byte(kv[1]), 0o644); err != nil {
			return fmt.Errorf("launcher: sysctl %s: %w", strings.ReplaceAll(kv[0], "/", "."), err)
		}
	}
	return nil
}

// pickPrefix takes a random /30 from addrRange that no host interface
// address falls in. The /30 lives only inside the run's two namespaces, so
// two runs on the same /30 would not collide; distinct ones keep records
// and debugging unambiguous.
func pickPrefix() (netip.Prefix, error) {
	var used []netip.Addr
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil {
				used = append(used, p.Addr())
			}
		}
	}
	base := addrRange.Addr().As4()
	for range 64 {
		var r [2]byte
		if _, err := rand.Read(r[:]); err != nil {
			return netip.Prefix{}, fmt.Errorf("launcher: %w", err)
		}
		v := binary.BigEndian.Uint32(base[:]) | uint32(binary.BigEndian.Uint16(r[:]))&^3
		var a [4]byte
		binary.BigEndian.PutUint32(a[:], v)
		p := netip.PrefixFrom(netip.AddrFrom4(a), 30)
		if !containsAny(p, used) {
			return p, nil
		}
	}
	return netip.Prefix{}, errors.New("launcher: no free /30 in 10.231.0.0/16")
}

func containsAny(p netip.Prefix, addrs []netip.Addr) bool {
	for _, a := range addrs {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func (n *Network) run(args ...string) error {
	out, err := exec.Command(n.ip, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("launcher: ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// Close removes the namespaces (which removes the veth pair in them) and
// the resolv.conf. Sockets the mediator opened keep its namespace alive,
// unnamed, until they close.
func (n *Network) Close() error {
	n.closeOnce.Do(func() {
		if n.mediator != nil {
			n.mediator.Close()
		}
		n.closeErr = removeRun(n.ip, n.Name)
	})
	return n.closeErr
}

// KillLeft kills (SIGKILL) every process in the child's network namespace
// until none is left. Every process the command started is there, whatever
// its session or parent: the filter denies leaving the namespace. Run calls
// it once the command has ended, so nothing of a run outlives it.
func (n *Network) KillLeft() error { return killInNetns(n.Name) }

// killRounds bounds KillLeft's scans (10 ms apart): a process killed by
// SIGKILL cannot fork again, so rounds past the first find only what a
// fork in flight made.
const killRounds = 100

// killInNetns kills every process in the named network namespace (an
// entry of /run/netns) until a scan of /proc finds none; a namespace that
// is gone holds none.
func killInNetns(name string) error {
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(netnsDir, name), &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return fmt.Errorf("launcher: the run's namespace: %w", err)
	}
	link := "net:[" + strconv.FormatUint(st.Ino, 10) + "]"
	self := os.Getpid()
	for range killRounds {
		dirs, err := filepath.Glob("/proc/[0-9]*")
		if err != nil {
			return fmt.Errorf("launcher: listing processes: %w", err)
		}
		found := 0
		for _, d := range dirs {
			pid, err := strconv.Atoi(filepath.Base(d))
			// A process that ended (a zombie among them) has no namespace
			// link left to read.
			if err != nil || pid == self {
				continue
			}
			if l, err := os.Readlink(filepath.Join(d, "ns", "net")); err == nil && l == link {
				unix.Kill(pid, unix.SIGKILL)
				found++
			}
		}
		if found == 0 {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("launcher: processes of run %s are still alive after %d rounds of SIGKILL", name, killRounds)
}

// removeRun deletes what a run named name left: both namespaces and
// /etc/netns/name. A namespace another process removed meanwhile is gone,
// which is what was asked: two sweeps (two runners, or two test binaries,
// each sweeping at start) may find the same stale run at once, and the
// later `ip netns delete` then finds no file.
func removeRun(ipBin, name string) error {
	var errs []error
	for _, ns := range []string{name, name + mediatorNS} {
		path := filepath.Join(netnsDir, ns)
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			continue
		}
		if out, err := exec.Command(ipBin, "netns", "delete", ns).CombinedOutput(); err != nil {
			if _, serr := os.Stat(path); errors.Is(serr, os.ErrNotExist) {
				continue
			}
			errs = append(errs, fmt.Errorf("launcher: ip netns delete %s: %v: %s", ns, err, bytes.TrimSpace(out)))
		}
	}
	if err := os.RemoveAll(filepath.Join(etcNetns, name)); err != nil {
		errs = append(errs, fmt.Errorf("launcher: %w", err))
	}
	return errors.Join(errs...)
}

// Sweep removes the namespaces and resolv.conf directories of runs whose
// runner process is gone (a runner killed outright cannot clean up after
// itself), and their temporary directories (TempDir). It returns the
// names of the namespaces it removed. A reused pid keeps a stale run
// until that pid is gone too.
func Sweep() ([]string, error) {
	sweepTempDirs()
	ipBin, err := exec.LookPath("ip")
	if err != nil {
		return nil, errors.New("launcher: the ip command is missing; install iproute2")
	}
	stale := map[string]bool{}
	for _, dir := range []string{netnsDir, etcNetns} {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			name := strings.TrimSuffix(e.Name(), mediatorNS)
			if pid, ok := runnerPid(name); ok && !alive(pid) {
				stale[name] = true
			}
		}
	}
	var removed []string
	var errs []error
	for name := range stale {
		// What a killed runner's command left runs on until now.
		if err := killInNetns(name); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := removeRun(ipBin, name); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, name)
	}
	return removed, errors.Join(errs...)
}

// tempPrefix starts the name of a runner's temporary directory; the
// runner's pid and a dash follow it.
const tempPrefix = "jr2-run-ca-"

// TempDir makes the runner's temporary directory (the run CA's file
// lives there) under os.TempDir(), named after this process so that a
// later Sweep removes it if this runner is killed before it can.
func TempDir() (string, error) {
	return os.MkdirTemp("", tempPrefix+strconv.Itoa(os.Getpid())+"-")
}

// sweepTempDirs removes the TempDir of every runner that is gone. What
// cannot be read or removed is left: the next sweep tries again.
func sweepTempDirs() {
	entries, _ := os.ReadDir(os.TempDir())
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), tempPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		pidText, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || pid <= 0 || alive(pid) {
			continue
		}
		os.RemoveAll(filepath.Join(os.TempDir(), e.Name()))
	}
}

// runnerPid reads the pid out of a run's name "jr2-<pid>-<hex>".
func runnerPid(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, namePrefix)
	if !ok {
		return 0, false
	}
	pidText, tag, ok := strings.Cut(rest, "-")
	if !ok || len(tag) != 6 {
		return 0, false
	}
	if _, err := hex.DecodeString(tag); err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(pidText)
	return pid, err == nil && pid > 0
}

func alive(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}

// ListenTCP opens a TCP listener on the mediator's address, inside the
// mediator's namespace: the only place the child can reach. Port 0 picks a
// free port.
func (n *Network) ListenTCP(port int) (net.Listener, error) {
	var ln net.Listener
	err := inNS(n.mediator, func() (err error) {
		ln, err = net.Listen("tcp4", netip.AddrPortFrom(n.Mediator, uint16(port)).String())
		return err
	})
	return ln, err
}

// CatchTCP opens a TCP listener in the mediator's namespace that receives
// every connection the child makes to port, whatever IPv4 address it
// dials: a literal-IP dial lands here too, and the accepted conn's
// LocalAddr is the address and port the child dialled. port must be 1 to
// 65535, and is caught once per Network.
//
// How: the child's namespace gets a rule sending TCP to port through the
// catch table, whose one route is a default via the mediator; the
// mediator's namespace takes whatever arrives from the veth as local (a
// "local 0.0.0.0/0" route in its own catch table), and the listener is
// bound to 0.0.0.0 with IP_TRANSPARENT, without which the kernel would not
// answer from an address it does not hold. Nothing is forwarded: both
// namespaces keep forwarding off, and a port not caught still has no route
// in the child (ENETUNREACH at once).
func (n *Network) CatchTCP(port int) (net.Listener, error) {
	if port < 1 || port > 65535 {
		return nil, fmt.Errorf("launcher: catch port %d: want 1 to 65535", port)
	}
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_IP, unix.IP_TRANSPARENT, 1)
		})
		if err != nil {
			return err
		}
		if serr != nil {
			return fmt.Errorf("IP_TRANSPARENT: %w", serr)
		}
		return nil
	}}
	var ln net.Listener
	err := inNS(n.mediator, func() (err error) {
		ln, err = lc.Listen(context.Background(), "tcp4", "0.0.0.0:"+strconv.Itoa(port))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("launcher: catch port %d: %w", port, err)
	}
	p := strconv.Itoa(port)
	if err := n.run("-n", n.Name, "rule", "add", "ipproto", "tcp", "dport", p, "lookup", catchTable, "pref", "100"); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// ListenUDP opens a UDP socket on the mediator's address, inside the
// mediator's namespace (the DNS listener, port 53).
func (n *Network) ListenUDP(port int) (net.PacketConn, error) {
	var pc net.PacketConn
	err := inNS(n.mediator, func() (err error) {
		pc, err = net.ListenPacket("udp4", netip.AddrPortFrom(n.Mediator, uint16(port)).String())
		return err
	})
	return pc, err
}

// inNS runs fn on a thread that has entered the network namespace ns, then
// returns the thread to its own namespace. Sockets fn opens stay in ns. If
// the thread cannot return, it stays locked, and dies with the goroutine
// rather than serve another one from the wrong namespace.
func inNS(ns *os.File, fn func() error) error {
	if ns == nil {
		return errors.New("launcher: the network is closed")
	}
	runtime.LockOSThread()
	home, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("launcher: %w", err)
	}
	defer home.Close()
	if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("launcher: enter namespace: %w", err)
	}
	ferr := fn()
	if err := unix.Setns(int(home.Fd()), unix.CLONE_NEWNET); err != nil {
		return errors.Join(ferr, fmt.Errorf("launcher: leave namespace: %w", err))
	}
	runtime.UnlockOSThread()
	return ferr
}
