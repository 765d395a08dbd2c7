//go:build linux

package keep

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"jr2.dev/boundary/effector/internal/inherit"
	"jr2.dev/boundary/effector/internal/reap"
)

// Main runs `effector keep` with args (the words after "keep") and returns
// its exit code: the child's code, 128+signal when a signal ended it, 126
// when the keeper could not start it.
//
// The keeper sets PR_SET_CHILD_SUBREAPER, marks every descriptor above 2
// close-on-exec (the report descriptor among them), starts ARGV in a new
// process group of its own (the child's pid is its id) and waits for it
// without reaping it, so the group id cannot be reused while the keeper
// may still signal it. Orphans reparented to the keeper that end meanwhile
// are reaped by pid as they end. SIGTERM, SIGINT and SIGHUP sent to the
// keeper are forwarded to the child's group, and the keeper waits on, so a
// child that catches SIGTERM still gives its own code. When the child ends,
// the keeper reaps it, kills (SIGKILL) and reaps every process it is the
// parent of until none remains — a setsid daemon, a double-forked
// grandchild — and then writes one line on the report descriptor (Report)
// and exits with the child's code.
func Main(args []string) int {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help") {
		fmt.Println(usage)
		return 0
	}
	fd, argv, err := parseArgs(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "effector keep: %v\n", err)
		return 126
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		fmt.Fprintf(os.Stderr, "effector keep: --report-fd %d: %v; pass an open pipe\n", fd, err)
		return 126
	}
	out := os.NewFile(uintptr(fd), "report")
	r := keep(argv)
	if r.Failed != "" {
		fmt.Fprintf(os.Stderr, "effector keep: %s\n", r.Failed)
	}
	if _, err := out.WriteString(r.String() + "\n"); err != nil {
		fmt.Fprintf(os.Stderr, "effector keep: writing the report: %v\n", err)
	}
	out.Close()
	switch {
	case r.Failed != "":
		return 126
	case r.Signal != "":
		return 128 + int(unix.SignalNum(r.Signal))
	default:
		return r.Code
	}
}

const usage = "usage: effector keep --report-fd N -- ARGV"

func parseArgs(args []string) (fd int, argv []string, err error) {
	fd = -1
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			argv = args[i+1:]
			if len(argv) == 0 || argv[0] == "" {
				return 0, nil, errors.New("no program after --; " + usage)
			}
			if fd < 0 {
				return 0, nil, errors.New("--report-fd is required; " + usage)
			}
			return fd, argv, nil
		case a == "--report-fd" || strings.HasPrefix(a, "--report-fd="):
			v, ok := strings.CutPrefix(a, "--report-fd=")
			if !ok {
				if i+1 >= len(args) {
					return 0, nil, errors.New("--report-fd needs a descriptor number; " + usage)
				}
				i++
				v = args[i]
			}
			n, err := strconv.Atoi(v)
			if err != nil || n < 3 {
				return 0, nil, fmt.Errorf("--report-fd %q: want a descriptor number of 3 or more (0-2 are the child's); %s", v, usage)
			}
			fd = n
		default:
			return 0, nil, fmt.Errorf("unknown argument %q; %s", a, usage)
		}
	}
	return 0, nil, errors.New("no -- before the program; " + usage)
}

// keep starts argv, waits for its end, ends everything it left, and
// returns its end.
func keep(argv []string) Report {
	fail := func(format string, args ...any) Report {
		return Report{Code: -1, Failed: fmt.Sprintf(format, args...)}
	}
	if err := reap.SetChildSubreaper(); err != nil {
		return fail("%v", err)
	}
	if err := inherit.CloseOnExecAbove(2); err != nil {
		return fail("%v", err)
	}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGCHLD)
	defer signal.Stop(sigs)

	path := argv[0]
	if !strings.Contains(path, "/") {
		p, err := exec.LookPath(path)
		if err != nil {
			return fail("%v", err)
		}
		path = p
	}
	p, err := os.StartProcess(path, argv, &os.ProcAttr{
		Files: []*os.File{os.Stdin, os.Stdout, os.Stderr},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		return fail("starting the child: %v", err)
	}
	child := p.Pid

	// Wait for the child's end without reaping it: while it is a zombie its
	// pid, the group's id, cannot be reused, so a forwarded signal cannot
	// reach another group.
	ended := make(chan error, 1)
	go func() {
		var info unix.Siginfo
		for {
			err := unix.Waitid(unix.P_PID, child, &info, unix.WEXITED|unix.WNOWAIT, nil)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			ended <- err
			return
		}
	}()
wait:
	for {
		select {
		case s := <-sigs:
			if s == unix.SIGCHLD {
				reapOrphans(child)
				continue
			}
			_ = unix.Kill(-child, s.(syscall.Signal))
		case err := <-ended:
			if err != nil {
				return fail("waiting for the child: %v", err)
			}
			break wait
		}
	}
	var ws unix.WaitStatus
	for {
		_, err := unix.Wait4(child, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fail("reaping the child: %v", err)
		}
		break
	}
	_ = p.Release()
	// The child's own end is known now and is what the report carries. What
	// it left is killed and reaped; should that keep failing, the report
	// still goes out: once the keeper exits, whatever is left is the
	// Effector's, and its settle loop ends it.
	var rerr error
	for try := 0; try < 5; try++ {
		if rerr = reap.KillAndReapAll(); rerr == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if rerr != nil {
		fmt.Fprintf(os.Stderr, "effector keep: reaping what the child left: %v\n", rerr)
	}
	if ws.Signaled() {
		name := unix.SignalName(ws.Signal())
		if name == "" {
			name = "SIG" + strconv.Itoa(int(ws.Signal()))
		}
		return Report{Code: -1, Signal: name}
	}
	return Report{Code: ws.ExitStatus()}
}

// reapOrphans reaps, by pid, the processes reparented to the keeper that
// have ended — never the child, whose zombie holds its group's id.
func reapOrphans(child int) {
	procs, err := reap.Children(os.Getpid())
	if err != nil {
		return
	}
	for _, p := range procs {
		if p.State == 'Z' && p.PID != child {
			_, _ = unix.Wait4(p.PID, nil, unix.WNOHANG, nil)
		}
	}
}
