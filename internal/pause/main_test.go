package main

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// The test binary runs main when JR2_PAUSE_MAIN=1: the signal tests need
// pause as a process of its own.
func TestMain(m *testing.M) {
	if os.Getenv("JR2_PAUSE_MAIN") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// TestReap: children that have ended are reaped, none left a zombie; reap
// returns at once when none has.
func TestReap(t *testing.T) {
	var pids []int
	for range 3 {
		pid, err := syscall.ForkExec("/bin/true", []string{"true"}, &syscall.ProcAttr{})
		if err != nil {
			t.Fatalf("start /bin/true (coreutils) as a child to reap: %v", err)
		}
		pids = append(pids, pid)
	}
	got := 0
	for deadline := time.Now().Add(5 * time.Second); got < len(pids) && time.Now().Before(deadline); {
		got += reap()
		time.Sleep(10 * time.Millisecond)
	}
	if got != len(pids) {
		t.Fatalf("reaped %d of %d children", got, len(pids))
	}
	for _, pid := range pids {
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
			t.Errorf("child %d is still in /proc after reap", pid)
		}
	}
	if n := reap(); n != 0 {
		t.Errorf("reap with no child: %d", n)
	}
}

// TestSignals: pause blocks, then exits 0 on SIGTERM and on SIGINT; it
// refuses arguments.
func TestSignals(t *testing.T) {
	for _, s := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(s.String(), func(t *testing.T) {
			cmd := exec.Command(os.Args[0])
			cmd.Env = append(os.Environ(), "JR2_PAUSE_MAIN=1")
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				t.Fatalf("pause ended by itself: %v", err)
			case <-time.After(300 * time.Millisecond):
			}
			// SIGCHLD is not a reason to end.
			_ = cmd.Process.Signal(syscall.SIGCHLD)
			select {
			case err := <-done:
				t.Fatalf("pause ended on SIGCHLD: %v", err)
			case <-time.After(100 * time.Millisecond):
			}
			_ = cmd.Process.Signal(s)
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("pause on %v: %v; want exit 0", s, err)
				}
			case <-time.After(5 * time.Second):
				_ = cmd.Process.Kill()
				<-done
				t.Fatalf("pause did not end within 5s of %v", s)
			}
		})
	}
	cmd := exec.Command(os.Args[0], "x")
	cmd.Env = append(os.Environ(), "JR2_PAUSE_MAIN=1")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Errorf("pause x: %v (%s); want exit 2", err, out)
	}
}
