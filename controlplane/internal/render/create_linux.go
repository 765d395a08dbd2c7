package render

import (
	"bytes"
	"io/fs"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// createFile creates path, which must not exist, with exactly mode and
// writes data: os.OpenFile(O_CREATE|O_EXCL), Write and, only when umask
// (the process's) takes a bit of mode, Fchmod, by those system calls
// alone. The mode is exact whatever the umask, so a re-render finds every
// file in its own mode and writes none of them again. An *os.File of a regular file also sets it
// non-blocking and offers it to the poller, one and two more calls each
// time: at 400 targets a render creates ~820 files, and those calls were
// 3 % of its CPU.
func createFile(path string, data []byte, mode os.FileMode, umask uint32) error {
	var fd int
	var err error
	for {
		fd, err = unix.Open(path, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, uint32(mode.Perm()))
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return &fs.PathError{Op: "open", Path: path, Err: err}
	}
	if uint32(mode.Perm())&umask != 0 {
		if err := unix.Fchmod(fd, uint32(mode.Perm())); err != nil {
			unix.Close(fd)
			return &fs.PathError{Op: "chmod", Path: path, Err: err}
		}
	}
	for len(data) > 0 {
		n, err := unix.Write(fd, data)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			unix.Close(fd)
			return &fs.PathError{Op: "write", Path: path, Err: err}
		}
		data = data[n:]
	}
	if err := unix.Close(fd); err != nil {
		return &fs.PathError{Op: "close", Path: path, Err: err}
	}
	return nil
}

// currentUmask is the process's umask, read from /proc/self/status (Linux
// 4.7 and later), since setting it to learn it would change it for every
// thread at once. Where it cannot be read, every bit counts as taken, so
// each file has its mode set.
func currentUmask() uint32 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0o777
	}
	for line := range bytes.Lines(b) {
		if v, ok := bytes.CutPrefix(line, []byte("Umask:")); ok {
			m, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 8, 32)
			if err != nil {
				return 0o777
			}
			return uint32(m)
		}
	}
	return 0o777
}
