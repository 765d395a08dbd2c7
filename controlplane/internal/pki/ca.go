// Package pki is the instance CA and what it signs: `controlplane ca init`
// makes the CA; render issues one leaf per bound host:port (or reuses the
// one it issued before) and writes the trust files the Harness and the
// Custodian read.
//
// # Keys and lifetimes
//
//   - The CA: ECDSA P-256, self-signed, valid for CAValidity, never rotated
//     by the tool (a human deletes its directory to rotate it). It has no
//     name constraints (ADR-0059: they would force a new CA whenever the
//     bound hosts change).
//   - A leaf: ECDSA P-256, SAN = the target's host (a DNS name, or an IP SAN
//     for an IP literal), ExtKeyUsage serverAuth, valid for LeafValidity.
//     A leaf is reused while its SAN is the same, it chains to the current
//     CA, its key matches and more than ReuseMargin remain; else re-issued.
//     A leaf's to-be-signed bytes are exactly those x509.CreateCertificate
//     would sign for the same template (TestIssueTBSIsStdlibs); Issue signs
//     them itself, without CreateCertificate's verify of its own signature.
//     Its key file is exactly x509.MarshalPKCS8PrivateKey's
//     (TestPKCS8IsStdlibs), encoded by hand like the certificate.
//
// Invariant: the CA's private key leaves this package only in the one file
// InitCA writes (ca.key, mode 0600) — never in a leaf, a trust file, an
// error or a log line; CA holds it unexported. No trust file that the
// Custodian uses upstream (Trust.Upstream) ever holds the jr2 CA.
package pki

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"time"
)

// Lifetimes.
const (
	// CAValidity: the CA is never rotated by the tool, so it outlives any
	// deployment we plan for.
	CAValidity = 10 * 365 * 24 * time.Hour
	// LeafValidity is 397 days: under the 398-day ceiling Apple's and
	// Chrome's verifiers enforce on TLS server certificates (a client
	// in the Harness may apply it to a private CA too), with a day's slack
	// for clock skew.
	LeafValidity = 397 * 24 * time.Hour
	// ReuseMargin: a leaf with this much or less left is re-issued.
	ReuseMargin = 30 * 24 * time.Hour
	// backdate covers clock skew between the machine that renders and the
	// pod that serves.
	backdate = time.Hour
)

// File names inside the CA directory.
const (
	CACertFile = "ca.crt"
	CAKeyFile  = "ca.key"
)

// CA is the instance CA, loaded. Its key is unexported and never written
// anywhere but InitCA's ca.key.
type CA struct {
	Cert    *x509.Certificate
	CertPEM []byte
	key     *ecdsa.PrivateKey
}

// InitCA makes a new CA in dir (created 0700 when missing): ca.key (PKCS #8,
// mode 0600) and ca.crt. It refuses when either file exists: the tool never
// overwrites or rotates a CA.
func InitCA(dir string, now time.Time) error {
	if dir == "" {
		return errors.New("ca init: --dir is empty; name the directory the CA goes in")
	}
	certPath, keyPath := filepath.Join(dir, CACertFile), filepath.Join(dir, CAKeyFile)
	for _, p := range []string{keyPath, certPath} {
		if _, err := os.Lstat(p); err == nil {
			return fmt.Errorf("ca init: %s exists; the tool never replaces a CA. To rotate it, delete %s and %s, then render every pod again", p, certPath, keyPath)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("ca init: %w", err)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("ca init: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("ca init: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return fmt.Errorf("ca init: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{Organization: []string{"jr2"}, CommonName: "jr2 instance CA"},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(CAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return fmt.Errorf("ca init: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("ca init: %w", err)
	}
	if err := writeExclusive(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return fmt.Errorf("ca init: %w", err)
	}
	if err := writeExclusive(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		os.Remove(keyPath) // the key was ours, made a moment ago: no CA without its certificate
		return fmt.Errorf("ca init: %w", err)
	}
	return nil
}

// writeExclusive creates path (never replacing a file) and writes b.
func writeExclusive(path string, b []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	return f.Close()
}

// LoadCA reads the CA in dir: a CA certificate and its ECDSA P-256 key
// (PKCS #8 or SEC 1), which must match. Errors name the file and the fix,
// and never carry key material.
func LoadCA(dir string, now time.Time) (*CA, error) {
	certPath, keyPath := filepath.Join(dir, CACertFile), filepath.Join(dir, CAKeyFile)
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return nil, fmt.Errorf("CA: %w; make one with controlplane ca init --dir %s", err, dir)
	}
	cert, err := oneCert(certPEM)
	if err != nil {
		return nil, fmt.Errorf("CA: %s: %v", certPath, err)
	}
	if !cert.IsCA || !cert.BasicConstraintsValid {
		return nil, fmt.Errorf("CA: %s is not a CA certificate; make one with controlplane ca init", certPath)
	}
	if now.After(cert.NotAfter) {
		return nil, fmt.Errorf("CA: %s expired on %s; make a new CA with controlplane ca init and render every pod again", certPath, cert.NotAfter.UTC().Format(time.DateOnly))
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, fmt.Errorf("CA: %w", err)
	}
	key, err := parseKey(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("CA: %s: %v", keyPath, err)
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		return nil, fmt.Errorf("CA: %s is not the key of %s; keep the two files of one controlplane ca init together", keyPath, certPath)
	}
	return &CA{Cert: cert, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}), key: key}, nil
}

// oneCert reads a PEM file that holds exactly one certificate.
func oneCert(b []byte) (*x509.Certificate, error) {
	block, rest := pem.Decode(b)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM CERTIFICATE block")
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		return nil, errors.New("more than one PEM block; want one certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, errors.New("the certificate does not parse")
	}
	return cert, nil
}

// parseKey reads an ECDSA P-256 private key: PEM "PRIVATE KEY" (PKCS #8) or
// "EC PRIVATE KEY" (SEC 1). Errors never carry key material.
func parseKey(b []byte) (*ecdsa.PrivateKey, error) {
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, errors.New("no PEM private key block")
	}
	var k any
	var err error
	switch block.Type {
	case "PRIVATE KEY":
		k, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		k, err = x509.ParseECPrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("a PEM %q block; want an ECDSA P-256 PRIVATE KEY", block.Type)
	}
	if err != nil {
		return nil, errors.New("the private key does not parse")
	}
	ek, ok := k.(*ecdsa.PrivateKey)
	if !ok || ek.Curve != elliptic.P256() {
		return nil, errors.New("not an ECDSA P-256 key")
	}
	return ek, nil
}

func newSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}
