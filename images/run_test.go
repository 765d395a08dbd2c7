package images_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"jr2.dev/boundary/images"
)

// A program run in an image's root, and what its output must hold.
type probe struct {
	args []string
	dir  string // the working directory in the image, "" for /
	want string
}

// The programs each image must start, as its own user, in a chroot of its
// root: what proves that the libraries the ELF check found are the ones
// that load.
var probes = map[string][]probe{
	"custodian-envoy": {
		{args: []string{"/usr/local/bin/envoy", "--version"}, want: "/1.39.3/"},
		{args: []string{"/opt/jr2/bin/custodian", "--help"}, want: "custodian"},
	},
	"custodian-serve": {{args: []string{"/opt/jr2/bin/custodian", "--help"}, want: "custodian"}},
	"effector":        {{args: []string{"/opt/jr2/bin/effector", "--help"}, want: "effector"}},
	"agent": {
		{args: []string{"/usr/bin/curl", "--version"}, want: "curl 7.88.1"},
		{args: []string{"/usr/local/bin/node", "--version"}, want: "v24.11.1"},
		{args: []string{"/usr/local/bin/node", "-e", "require('https-proxy-agent'); require('ws'); console.log('modules ok')"}, dir: "/opt/jr2/e2e/node", want: "modules ok"},
		{args: []string{"/bin/sh", "-c", "echo sh $((40 + 2)); id -u; id -g"}, want: "sh 42\n1000\n1000\n"},
	},
}

// runImage starts each probe of the image in a chroot of its unpacked
// root as the image's user, and for the entrypoint pause, checks it blocks
// and ends 0 on SIGTERM. Root only: chroot and the image's owners need it.
func runImage(t *testing.T, img *images.Image, fs *rootFS) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("JR2_REQUIRE_ALL") == "1" {
			t.Fatal("NOT RUN: running an image's programs in a chroot needs root, and JR2_REQUIRE_ALL=1")
		}
		t.Log("NOT RUN: running an image's programs in a chroot needs root")
		return
	}
	uid := uint32(img.UID())
	cred := &syscall.Credential{Uid: uid, Gid: uid, NoSetGroups: true}
	for _, p := range probes[img.Name] {
		cmd := exec.Command(p.args[0], p.args[1:]...)
		cmd.Path = p.args[0]
		cmd.Dir = p.dir
		if cmd.Dir == "" {
			cmd.Dir = "/"
		}
		cmd.Env = img.Env
		cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: fs.dir, Credential: cred, Pdeathsig: syscall.SIGKILL}
		out, err := cmd.CombinedOutput()
		if !strings.Contains(string(out), p.want) {
			t.Errorf("%s in the image as %s: %v\n%s\nwant %q in its output", strings.Join(p.args, " "), img.User, err, out, p.want)
		}
	}
	if filepath.Base(img.Entrypoint[0]) != "pause" {
		return
	}
	cmd := exec.Command(img.Entrypoint[0])
	cmd.Path = img.Entrypoint[0]
	cmd.Dir = "/"
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: fs.dir, Credential: cred, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s in the image: %v", img.Entrypoint[0], err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		t.Fatalf("%s ended by itself: %v\n%s", img.Entrypoint[0], err, out.String())
	case <-time.After(300 * time.Millisecond):
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		var ee *exec.ExitError
		if err != nil || errors.As(err, &ee) {
			t.Errorf("%s on SIGTERM: %v; want exit 0", img.Entrypoint[0], err)
		}
	case <-time.After(5 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Errorf("%s did not end within 5s of SIGTERM", img.Entrypoint[0])
	}
}
