//go:build linux

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// roleEnv names what a re-executed test binary is: the suite runs its
// helpers (the mount-namespace wrapper, the namespace's test host, the Go
// client) as processes of the test binary itself.
const roleEnv = "JR2_E2E_ROLE"

// roles are the processes the test binary can be, by roleEnv.
var roles = map[string]func() int{
	"hostsns":  hostsNSMain,
	"nshost":   nsHostMain,
	"goclient": goClientMain,
}

// bins are the binaries TestMain built: the same commands a pod runs.
var bins struct {
	dir          string
	custodian    string
	controlplane string
	self         string // this test binary, for the roles
	module       string // the dynamic module (c-shared), or "" and moduleErr
	moduleErr    error
}

func TestMain(m *testing.M) {
	if r := os.Getenv(roleEnv); r != "" {
		f, ok := roles[r]
		if !ok {
			fmt.Fprintf(os.Stderr, "e2e: unknown role %q\n", r)
			os.Exit(2)
		}
		os.Exit(f())
	}
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "jr2-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	bins.dir = dir
	if bins.self, err = os.Executable(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	bins.custodian = filepath.Join(dir, "custodian")
	bins.controlplane = filepath.Join(dir, "controlplane")
	// The Custodian is built with the race detector when the suite is: real
	// clients then exercise the host's concurrency under it, and a race
	// report on its stderr fails the suite (see checkHostOutput).
	if err := goBuild(bins.custodian, "./custodian", raceEnabled); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	if err := goBuild(bins.controlplane, "./controlplane", false); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	// The module Envoy loads (never with the race detector: a c-shared
	// object cannot carry it). A failure fails the Envoy half only.
	bins.module = filepath.Join(dir, "custodian-module.so")
	if bins.moduleErr = goBuildShared(bins.module, "./filter/module/custodian-module"); bins.moduleErr != nil {
		bins.module = ""
	}
	code := m.Run()
	if c := checkCases(); code == 0 {
		code = c
	}
	return code
}

// goBuildShared builds pkg as a c-shared object into out.
func goBuildShared(out, pkg string) error {
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", out, pkg)
	cmd.Dir = ".."
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build -buildmode=c-shared %s: %v\n%s", pkg, err, b)
	}
	return nil
}

// ccBuildShared builds the C file src (relative to the repository) into
// the shared object out with the C compiler cgo uses ($CC, else cc).
func ccBuildShared(out, src string) error {
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	cmd := exec.Command(cc, "-shared", "-fPIC", "-O2", "-fvisibility=hidden", "-Wall", "-Werror", "-Wno-unused-parameter", "-o", out, src)
	cmd.Dir = ".."
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s -shared %s: %v\n%s", cc, src, err, b)
	}
	return nil
}

// goBuild builds the module's package pkg into out.
func goBuild(out, pkg string, race bool) error {
	args := []string{"build", "-o", out}
	if race {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, pkg)...)
	cmd.Dir = ".."
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
	}
	return nil
}
