//go:build linux

// Package capstest is what a test's confined child tries and what its
// parent reads of it, for the tests that prove a confined program holds no
// privilege (packages caps, confine, and the effector binary's). It is
// imported by tests only.
//
// Invariant: it makes nodes only beneath the directory it is given, loads
// no BPF program it keeps (a loaded one is closed at once), and reads
// /proc only.
package capstest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Attempt makes, in dir, the nodes a confined child must not make (a
// character device kmsg 1,11 and a block device loop0 7,0, as the
// adversarial pass did) and those its scratch allows (a fifo, a bound Unix
// socket), and returns one line per try: "mknod char DIR/kmsg: EACCES".
func Attempt(dir string) []string {
	tries := []struct {
		what string
		do   func(string) error
	}{
		{"mknod char", func(p string) error { return unix.Mknod(p, unix.S_IFCHR|0o600, int(unix.Mkdev(1, 11))) }},
		{"mknod block", func(p string) error { return unix.Mknod(p, unix.S_IFBLK|0o600, int(unix.Mkdev(7, 0))) }},
		{"mkfifo", func(p string) error { return unix.Mkfifo(p, 0o600) }},
		{"bind unix", bindUnix},
	}
	names := []string{"kmsg", "loop0", "fifo", "sock"}
	var lines []string
	for i, tr := range tries {
		p := filepath.Join(dir, names[i])
		lines = append(lines, fmt.Sprintf("%s %s: %s", tr.what, p, Result(tr.do(p))))
	}
	return lines
}

func bindUnix(p string) error {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Bind(fd, &unix.SockaddrUnix{Name: p})
}

// LoadBPF asks the kernel to load the smallest traffic-control classifier
// ("r0 = 0; exit"). Loading it needs CAP_BPF (or CAP_SYS_ADMIN) whatever
// kernel.unprivileged_bpf_disabled says: only socket filters and cgroup
// skb programs may be loaded without. A loaded program is closed at once.
func LoadBPF() error {
	var attr struct {
		progType, insnCnt uint32
		insns, license    uint64
		logLevel, logSize uint32
		logBuf            uint64
		kernVersion       uint32
		progFlags         uint32
	}
	attr.progType = unix.BPF_PROG_TYPE_SCHED_CLS
	attr.insnCnt = 2
	attr.insns = uint64(uintptr(unsafe.Pointer(&bpfInsns[0])))
	attr.license = uint64(uintptr(unsafe.Pointer(&bpfLicense[0])))
	fd, _, errno := unix.Syscall(unix.SYS_BPF, unix.BPF_PROG_LOAD, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
	if errno != 0 {
		return errno
	}
	unix.Close(int(fd))
	return nil
}

// The program and its license live in package variables: the kernel reads
// them through addresses a moving stack must not invalidate.
var (
	bpfInsns   = [16]byte{0: 0xb7, 8: 0x95} // BPF_MOV64_IMM(R0, 0); BPF_EXIT
	bpfLicense = [4]byte{'G', 'P', 'L', 0}
)

// Result is "ok", an errno's name, or the error's text.
func Result(err error) string {
	var errno syscall.Errno
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &errno):
		return unix.ErrnoName(errno)
	}
	return err.Error()
}

// Fields are the lines of /proc/PID/status a test holds: the five
// capability sets, NO_NEW_PRIVS and the four uids.
var Fields = []string{"Uid", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs"}

// None is an empty capability set as /proc prints it.
const None = "0000000000000000"

// Status reads Fields of /proc/PID/status (pid 0: this process), each
// value as the kernel prints it with tabs made spaces ("Uid": "0 0 0 0").
func Status(pid int) (map[string]string, error) {
	name := "/proc/self/status"
	if pid != 0 {
		name = fmt.Sprintf("/proc/%d/status", pid)
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, f := range Fields {
		want[f] = true
	}
	got := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && want[k] {
			got[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	return got, nil
}

// Diff lists the fields of got that differ from want, "" when none does.
func Diff(got, want map[string]string) string {
	var d []string
	for _, f := range Fields {
		if w, ok := want[f]; ok && got[f] != w {
			d = append(d, fmt.Sprintf("%s %q, want %q", f, got[f], w))
		}
	}
	return strings.Join(d, "; ")
}

// Want is the status of a program that holds no privilege: every
// capability set empty (the bounding set too, unless bounding is given:
// a non-root caller without CAP_SETPCAP keeps its own), NO_NEW_PRIVS set,
// every uid uid.
func Want(uid int, bounding string) map[string]string {
	if bounding == "" {
		bounding = None
	}
	u := fmt.Sprint(uid)
	return map[string]string{
		"Uid": strings.Join([]string{u, u, u, u}, " "), "CapInh": None, "CapPrm": None,
		"CapEff": None, "CapBnd": bounding, "CapAmb": None, "NoNewPrivs": "1",
	}
}
