//go:build !linux

package pki

// rootFiles: render knows no bundle location here; SystemRoots then needs
// SSL_CERT_FILE.
var rootFiles []string
