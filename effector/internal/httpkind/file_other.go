//go:build !linux

package httpkind

import "os"

// openWorkFile refuses: a file body needs the Linux opener (os.Root with
// O_NONBLOCK), and a Sandbox Effector runs on Linux.
func openWorkFile(root, name string) (*os.File, int64, string) {
	return nil, 0, "body.file: file bodies are read only on Linux"
}
