//go:build !linux

package render

import "os"

// createFile creates path, which must not exist, with exactly mode
// (whatever the umask) and writes data.
func createFile(path string, data []byte, mode os.FileMode, _ uint32) error {
	h, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if err = h.Chmod(mode); err == nil {
		_, err = h.Write(data)
	}
	if cerr := h.Close(); err == nil {
		err = cerr
	}
	return err
}

// currentUmask is not read here: createFile sets every file's mode.
func currentUmask() uint32 { return 0o777 }
