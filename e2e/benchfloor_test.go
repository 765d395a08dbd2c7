//go:build linux

package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"

	"jr2.dev/boundary/internal/testkit/benchfloor"
)

// The floor (internal/testkit/benchfloor) as a process of its own beside the
// hosts: the least any TLS-intercepting proxy costs here.
func init() { roles["benchfloor"] = benchFloorMain }

// benchFloorMain is the benchfloor role. benchDirEnv holds floor.pem and
// floor.key (its leaf for the target) and upstream-ca.pem; it prints
//
//	listening ADDR
//
// and relays until its stdin closes.
func benchFloorMain() int {
	dir := os.Getenv(benchDirEnv)
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "floor.pem"), filepath.Join(dir, "floor.key"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench floor:", err)
		return 2
	}
	caPEM, err := os.ReadFile(filepath.Join(dir, "upstream-ca.pem"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench floor:", err)
		return 2
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench floor:", err)
		return 2
	}
	fmt.Printf("listening %s\n", l.Addr())
	go benchfloor.Serve(l, cert, roots)
	io.Copy(io.Discard, os.Stdin)
	return 0
}
