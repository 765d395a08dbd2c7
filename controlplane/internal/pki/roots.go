package pki

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// SystemRoots reads this machine's PEM bundle of roots: the file
// SSL_CERT_FILE names when it is set (as crypto/x509 honours it), else the
// first of the platform's bundle locations (rootFiles) that exists. It
// returns the path read.
func SystemRoots() (path string, pem []byte, err error) {
	if p := os.Getenv("SSL_CERT_FILE"); p != "" {
		b, err := os.ReadFile(p)
		if err != nil {
			return "", nil, fmt.Errorf("system roots: SSL_CERT_FILE: %w", err)
		}
		return p, b, nil
	}
	for _, p := range rootFiles {
		b, err := os.ReadFile(p)
		if err == nil {
			return p, b, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", nil, fmt.Errorf("system roots: %w", err)
		}
	}
	if len(rootFiles) == 0 {
		return "", nil, errors.New("system roots: render knows no PEM bundle location on this platform; set SSL_CERT_FILE to a PEM file of roots")
	}
	return "", nil, fmt.Errorf("system roots: none of %v exists; install the ca-certificates package or point SSL_CERT_FILE at a PEM bundle", rootFiles)
}
