//go:build linux

package e2e

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
)

// The floor: the least a TLS-intercepting proxy can do on this machine. It
// answers CONNECT, ends the client's TLS with a leaf for the target, opens
// one verified TLS connection upstream and copies bytes both ways — no
// HTTP parsed, no header judged, no body scrubbed. Any host that does the
// Custodian's work (serve, Envoy) costs at least this much, so its ratio to
// direct is the ceiling of theirs on this machine and load: a goal above it
// is not reachable by any proxy in this position (issue 12's stated limit).
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
	srvConf := &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"http/1.1"}}
	fmt.Printf("listening %s\n", l.Addr())
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go floorConn(c, srvConf, roots)
		}
	}()
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// floorConn is one client connection: CONNECT, TLS, then bytes.
func floorConn(c net.Conn, srvConf *tls.Config, roots *x509.CertPool) {
	defer c.Close()
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil || req.Method != http.MethodConnect || br.Buffered() > 0 {
		return
	}
	host, _, err := net.SplitHostPort(req.Host)
	if err != nil {
		return
	}
	up, err := tls.Dial("tcp", req.Host, &tls.Config{RootCAs: roots, ServerName: host, NextProtos: []string{"http/1.1"}})
	if err != nil {
		return
	}
	defer up.Close()
	if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\n\r\n"); err != nil {
		return
	}
	tc := tls.Server(c, srvConf)
	if err := tc.Handshake(); err != nil {
		return
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); io.Copy(up, tc); up.CloseWrite() }()
	io.Copy(tc, up)
	tc.CloseWrite()
	wg.Wait()
}
