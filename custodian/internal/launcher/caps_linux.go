//go:build linux

package launcher

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// dropCapabilities empties every capability set of the calling thread, in
// the order that works: ambient first; then the bounding set, one
// capability at a time, which needs CAP_SETPCAP in the effective set; then
// permitted, effective and inheritable at once. The other way round, an
// empty permitted set would strand the bounding set full, and a root child
// would get every capability back at execve.
func dropCapabilities() error {
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("clear the ambient set: %w", err)
	}
	for c := 0; ; c++ {
		err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0)
		if errors.Is(err, unix.EINVAL) {
			if c == 0 {
				return errors.New("the kernel knows no capability to drop")
			}
			break // past the kernel's last capability
		}
		if err != nil {
			return fmt.Errorf("drop capability %d from the bounding set: %w", c, err)
		}
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}
