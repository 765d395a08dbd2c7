package valuedir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// notify is the inotify source: one watch on the value directory and one
// on every directory under it, and a count of the events read.
type notify struct {
	fd     int
	root   string
	dirs   map[int]string // watch descriptor -> directory
	events uint64
	buf    []byte
}

// notifyMask is every change to a directory's entries or a file's bytes,
// and nothing a reader causes (opening and reading a file is no event).
const notifyMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_MODIFY | unix.IN_CLOSE_WRITE | unix.IN_ATTRIB | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF |
	unix.IN_DONT_FOLLOW | unix.IN_ONLYDIR

// newNotify watches dir, or says why it cannot (the caller polls then).
func newNotify(dir string) (source, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, err
	}
	n := &notify{fd: fd, root: dir, dirs: map[int]string{}, buf: make([]byte, 64<<10)}
	if err := n.add(dir, 0); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return n, nil
}

// add watches dir and, to a depth of 4, the directories under it (not
// through symlinks: the kubelet's ..data is a symlink to a directory
// watched as an entry of the root).
func (n *notify) add(dir string, depth int) error {
	wd, err := unix.InotifyAddWatch(n.fd, dir, notifyMask)
	if err != nil {
		return err
	}
	n.dirs[wd] = dir
	if depth >= 4 {
		return nil
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil // gone already: its removal is an event
	}
	for _, e := range ents {
		if e.IsDir() {
			n.add(filepath.Join(dir, e.Name()), depth+1)
		}
	}
	return nil
}

func (n *notify) depth(dir string) int {
	rel, err := filepath.Rel(n.root, dir)
	if err != nil || rel == "." {
		return 0
	}
	d := 1
	for _, c := range rel {
		if c == filepath.Separator {
			d++
		}
	}
	return d
}

// drain reads every queued event, counts it, and watches each directory
// created or moved in.
func (n *notify) drain() {
	for {
		k, err := unix.Read(n.fd, n.buf)
		if err != nil || k <= 0 {
			if err != nil && !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR) {
				n.events++ // a broken queue counts as a change
			}
			return
		}
		for off := 0; off+unix.SizeofInotifyEvent <= k; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&n.buf[off]))
			nameLen := int(ev.Len)
			n.events++
			if ev.Mask&unix.IN_IGNORED != 0 {
				delete(n.dirs, int(ev.Wd))
			}
			if ev.Mask&unix.IN_ISDIR != 0 && ev.Mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0 && nameLen > 0 {
				name := n.buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+nameLen]
				for i, c := range name {
					if c == 0 {
						name = name[:i]
						break
					}
				}
				if parent, ok := n.dirs[int(ev.Wd)]; ok {
					d := filepath.Join(parent, string(name))
					if dp := n.depth(d); dp <= 4 {
						n.add(d, dp)
					}
				}
			}
			off += unix.SizeofInotifyEvent + nameLen
		}
	}
}

func (n *notify) stamp() string {
	n.drain()
	return strconv.FormatUint(n.events, 10)
}

func (n *notify) wait(done <-chan struct{}, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		select {
		case <-done:
			return false
		default:
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		ms := int(min(left, 200*time.Millisecond) / time.Millisecond)
		fds := []unix.PollFd{{Fd: int32(n.fd), Events: unix.POLLIN}}
		k, err := unix.Poll(fds, max(ms, 1))
		if err != nil && !errors.Is(err, unix.EINTR) {
			return true
		}
		if k > 0 {
			return true
		}
	}
}

func (n *notify) close() { unix.Close(n.fd) }

// statLine is what fingerprint records of one entry.
func statLine(fi fs.FileInfo) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Sprintf("%v %d %d", fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
	}
	return fmt.Sprintf("%v %d %d %d %d.%d %d.%d", fi.Mode(), st.Dev, st.Ino, st.Size, st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec)
}
