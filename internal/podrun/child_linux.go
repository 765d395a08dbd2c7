package podrun

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"

	"jr2.dev/boundary/internal/kubelayout"
)

// childEnv marks this binary, re-executed by Start, as a container's
// child: the whole of its environment.
const childEnv = "JR2_PODRUN_CHILD"

// childConfig is what the child reads on fd 3; fd 4 is the Pod's network
// namespace.
type childConfig struct {
	Root         string
	Mounts       []kubelayout.Mount
	ReadOnlyRoot bool
	Argv, Env    []string
	Dir          string
	Identity
}

// Child becomes the container when this process is Start's child, and
// never returns then; otherwise it returns at once. Call it first in
// TestMain of every test binary that uses Start.
func Child() {
	if os.Getenv(childEnv) != "1" {
		return
	}
	step, err := child()
	fmt.Fprintf(os.Stderr, "podrun: the container did not start: %s: %v\n", step, err)
	os.Exit(127)
}

// systemDirs are this machine's directories a root is given read-only in
// place of an image's; a path of the Pod's beneath one is made in the
// root, and the rest of that directory bound beside it.
var systemDirs = []string{"bin", "etc", "lib", "lib32", "lib64", "libx32", "opt", "sbin", "usr"}

// child sets the container up in the mount namespace Start made and
// execs its command; it returns only on failure, naming the step.
func child() (string, error) {
	// Namespaces and no_new_privs are the thread's: keep this one to exec.
	runtime.LockOSThread()
	var cfg childConfig
	f := os.NewFile(3, "config")
	err := json.NewDecoder(f).Decode(&cfg)
	f.Close()
	if err != nil {
		return "config", err
	}
	err = unix.Setns(4, unix.CLONE_NEWNET)
	unix.Close(4)
	if err != nil {
		return "netns", err
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return "mount", fmt.Errorf("make / private: %w", err)
	}
	if err := unix.Mount("tmpfs", cfg.Root, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755"); err != nil {
		return "mount", fmt.Errorf("the root's tmpfs: %w", err)
	}
	var targets []string
	for _, m := range cfg.Mounts {
		targets = append(targets, m.Target)
	}
	for _, d := range systemDirs {
		if err := mirror(filepath.Join("/", d), cfg.Root, targets); err != nil {
			return "root", err
		}
	}
	for _, d := range []struct{ dir, fstype string }{{"proc", ""}, {"dev", ""}, {"sys", ""}} {
		dst := filepath.Join(cfg.Root, d.dir)
		if err := os.Mkdir(dst, 0o755); err != nil {
			return "root", err
		}
		if err := unix.Mount("/"+d.dir, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return "root", fmt.Errorf("bind /%s: %w", d.dir, err)
		}
	}
	if err := os.Mkdir(filepath.Join(cfg.Root, "tmp"), 0o777); err == nil {
		os.Chmod(filepath.Join(cfg.Root, "tmp"), 0o777|os.ModeSticky)
	}
	for _, m := range cfg.Mounts {
		if err := bind(m.Source, filepath.Join(cfg.Root, m.Target), m.ReadOnly); err != nil {
			return "mount", fmt.Errorf("%s: %w", m.Target, err)
		}
	}
	if cfg.ReadOnlyRoot {
		if err := unix.Mount("", cfg.Root, "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
			return "mount", fmt.Errorf("readOnlyRootFilesystem: %w", err)
		}
	}
	if err := unix.Chroot(cfg.Root); err != nil {
		return "chroot", err
	}
	dir := cfg.Dir
	if dir == "" {
		dir = "/"
	}
	if err := unix.Chdir(dir); err != nil {
		return "workingDir", err
	}
	prog, err := lookPath(cfg.Argv[0], cfg.Env)
	if err != nil {
		return "exec", err
	}
	if err := fixStdio(cfg.UID, cfg.GID); err != nil {
		return "stdio", err
	}
	groups := make([]int, len(cfg.Groups))
	for i, g := range cfg.Groups {
		groups[i] = int(g)
	}
	if err := unix.Setgroups(groups); err != nil {
		return "groups", err
	}
	if err := unix.Setresgid(int(cfg.GID), int(cfg.GID), int(cfg.GID)); err != nil {
		return "gid", err
	}
	if err := unix.Setresuid(int(cfg.UID), int(cfg.UID), int(cfg.UID)); err != nil {
		return "uid", err
	}
	if cfg.NoNewPrivs {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return "no_new_privs", err
		}
	}
	return "exec", unix.Exec(prog, cfg.Argv, cfg.Env)
}

// mirror gives root the host directory dir: bound whole and read-only
// when no target lies beneath it; otherwise made in root, its entries
// mirrored one by one, and each target left to its own mount.
func mirror(dir, root string, targets []string) error {
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	dst := filepath.Join(root, dir)
	for _, t := range targets {
		if t == dir {
			return nil // the target's own mount makes it
		}
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		l, err := os.Readlink(dir)
		if err != nil {
			return err
		}
		return os.Symlink(l, dst)
	case fi.Mode().IsRegular():
		return bind(dir, dst, true)
	case !fi.IsDir():
		return nil // sockets, devices and pipes stay the machine's
	}
	beneath := false
	for _, t := range targets {
		if strings.HasPrefix(t, dir+"/") {
			beneath = true
		}
	}
	if !beneath {
		return bind(dir, dst, true)
	}
	if err := os.Mkdir(dst, fi.Mode().Perm()); err != nil {
		return err
	}
	des, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, de := range des {
		if err := mirror(filepath.Join(dir, de.Name()), root, targets); err != nil {
			return err
		}
	}
	return nil
}

// bind mounts src on dst (made as an empty file or directory like src,
// its parents made as needed), read-only if ro.
func bind(src, dst string, ro bool) error {
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	// mount(2) follows a symlink at dst, which may name this machine's
	// path outside the root: a target must be the root's own.
	if dfi, err := os.Lstat(dst); err == nil && dfi.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("%s is a symlink in the root; a mount goes on a file or directory", dst)
	} else if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if fi.IsDir() {
			err = os.Mkdir(dst, 0o755)
		} else {
			var f *os.File
			if f, err = os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o444); err == nil {
				f.Close()
			}
		}
		if err != nil {
			return err
		}
	}
	if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s: %w", src, err)
	}
	if !ro {
		return nil
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dst, &st); err != nil {
		return err
	}
	// A read-only remount of a bind keeps the flags the mount had.
	flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_RDONLY)
	for _, f := range []struct{ st, ms uintptr }{
		{unix.ST_NOSUID, unix.MS_NOSUID}, {unix.ST_NODEV, unix.MS_NODEV}, {unix.ST_NOEXEC, unix.MS_NOEXEC},
		{unix.ST_NOATIME, unix.MS_NOATIME}, {unix.ST_NODIRATIME, unix.MS_NODIRATIME}, {unix.ST_RELATIME, unix.MS_RELATIME},
	} {
		if uintptr(st.Flags)&f.st != 0 {
			flags |= f.ms
		}
	}
	if err := unix.Mount("", dst, "", flags, ""); err != nil {
		return fmt.Errorf("read-only %s: %w", dst, err)
	}
	return nil
}

// fixStdio gives the container's user its stdin, stdout and stderr, as
// runc does (fixStdioPermissions) and containerd's shim does for the pipes
// it makes, so a process that opens /dev/stdout (Envoy's --log-path) can;
// /dev/null stays root's.
func fixStdio(uid, gid uint32) error {
	var null unix.Stat_t
	if err := unix.Stat("/dev/null", &null); err != nil {
		return err
	}
	for fd := 0; fd <= 2; fd++ {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return fmt.Errorf("fd %d: %w", fd, err)
		}
		if st.Rdev == null.Rdev && st.Mode&unix.S_IFMT == unix.S_IFCHR || st.Uid == uid {
			continue
		}
		if err := unix.Fchown(fd, int(uid), int(gid)); err != nil {
			return fmt.Errorf("fd %d: %w", fd, err)
		}
	}
	return nil
}

// lookPath finds argv[0] in the root (already chrooted) as execvp would,
// on the container's PATH.
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	path := defaultPath
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, d := range filepath.SplitList(path) {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: not found on the container's PATH %s", name, path)
}
