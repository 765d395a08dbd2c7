//go:build !linux

package valuedir

import (
	"errors"
	"fmt"
	"io/fs"
)

// newNotify has no inotify to use here: the watcher polls.
func newNotify(string) (source, error) {
	return nil, errors.New("no inotify on this system")
}

// statLine is what fingerprint records of one entry.
func statLine(fi fs.FileInfo) string {
	return fmt.Sprintf("%v %d %d", fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
}
