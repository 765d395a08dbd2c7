//go:build !linux

package render

import "os"

// createFile creates path, which must not exist, with mode (less the
// umask) and writes data.
func createFile(path string, data []byte, mode os.FileMode) error {
	h, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	_, err = h.Write(data)
	if cerr := h.Close(); err == nil {
		err = cerr
	}
	return err
}
