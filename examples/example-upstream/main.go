// Command example-upstream is a bound API for trying the Custodian on one
// machine (README, "The Custodian, by hand"): HTTPS on a loopback address,
// with a CA of its own made at start, answering each request with the
// credential it received, echoed back the way a careless API echoes a key
// in an error — so the client shows what the Custodian scrubbed.
//
//	example-upstream --listen 127.0.0.2:8443 --ca-out upstream-ca.pem
//
// It opens the listener first and writes the CA's certificate (PEM) to
// --ca-out only then, by rename, so a script that waits for the file knows
// the port is open. For each request it prints one line on stdout: the
// method, the path, and the SHA-256 fingerprint (first 16 hex digits) of
// the x-api-key and authorization headers it got — never the credential.
// SIGINT or SIGTERM stops it and removes --ca-out.
//
// It is an example, not part of the boundary: nothing else imports it.
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"jr2.dev/boundary/internal/cliflag"
	"jr2.dev/boundary/internal/listenerr"
)

const usage = `usage: example-upstream --listen HOST:PORT --ca-out FILE

A bound API on this machine for trying the Custodian: HTTPS on --listen with a
certificate from a CA it makes at start; the CA's certificate is written to
--ca-out (render it in with controlplane render --ca-bundle FILE) once the port
is open. Every answer echoes the credential it got; stdout gets one line per
request with that credential's fingerprint, never the credential.
  --listen HOST:PORT  the address to serve (a loopback address such as 127.0.0.2:8443)
  --ca-out FILE       where to write the CA's certificate (PEM); removed when it stops
`

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// flags is the command's flag set; the usage names each (main_test.go).
func flags() (fs *flag.FlagSet, listen, caOut *string) {
	fs = flag.NewFlagSet("example-upstream", flag.ContinueOnError)
	return fs, fs.String("listen", "", ""), fs.String("ca-out", "", "")
}

func run(args []string, stdout, stderr io.Writer) int {
	fs, listen, caOut := flags()
	if ok, code := cliflag.Parse(fs, args, usage, stdout, stderr); !ok {
		return code
	}
	if *listen == "" || *caOut == "" || fs.NArg() != 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	if err := serve(*listen, *caOut, stdout); err != nil {
		fmt.Fprintf(stderr, "example-upstream: %v\n", err)
		return 1
	}
	return 0
}

func serve(listen, caOut string, stdout io.Writer) error {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("--listen %q: %v; write HOST:PORT, such as 127.0.0.2:8443", listen, err)
	}
	caPEM, leaf, err := certificates(host)
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return listenerr.Wrap(err, "the upstream's listener", "--listen HOST:PORT", "another example-upstream")
	}
	defer l.Close()
	if err := writeAtomic(caOut, caPEM); err != nil {
		return fmt.Errorf("--ca-out: %w", err)
	}
	defer os.Remove(caOut)
	srv := &http.Server{Handler: echo{out: stdout}, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	err = srv.Serve(tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{leaf}}))
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// echo answers every request with the credentials it carried.
type echo struct{ out io.Writer }

func (e echo) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	got := map[string]string{}
	line := fmt.Sprintf("example-upstream: %s %s", r.Method, r.URL.Path)
	for _, h := range []string{"X-Api-Key", "Authorization"} {
		if v := r.Header.Get(h); v != "" {
			got[h] = v
			line += fmt.Sprintf(" %s=%s", h, fingerprint(v))
		}
	}
	fmt.Fprintln(e.out, line)
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(map[string]any{"error": "this example API echoes the credential it got", "got": got})
}

// fingerprint is sha256:<first 16 hex digits> of v.
func fingerprint(v string) string {
	sum := sha256.Sum256([]byte(v))
	return "sha256:" + hex.EncodeToString(sum[:8])
}

// certificates makes a CA and a leaf for host (an IP address or a name),
// both valid for a day: the CA's PEM, and the leaf to serve.
func certificates(host string) ([]byte, tls.Certificate, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "example-upstream CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: host},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if ip := net.ParseIP(host); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	return caPEM, tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// writeAtomic writes b to path through a temporary file beside it.
func writeAtomic(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
