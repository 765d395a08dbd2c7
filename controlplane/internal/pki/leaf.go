package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"time"

	"jr2.dev/boundary/filter"
)

// Leaf is one bound target's certificate and key, PEM.
type Leaf struct {
	CertPEM []byte
	KeyPEM  []byte
	// Reused is true when the leaf is the one found on disk.
	Reused bool
}

// Why a leaf on disk is not reused.
var (
	ErrLeafUnreadable = errors.New("the leaf or its key does not parse")
	ErrLeafSAN        = errors.New("its SAN is not the target's host")
	ErrLeafChain      = errors.New("it does not chain to the current CA")
	ErrLeafKey        = errors.New("its key is not the certificate's")
	ErrLeafExpiring   = errors.New("it has 30 days or less left")
)

// Leaf returns the leaf for target (canonical host:port): the one given
// (certPEM, keyPEM, read from the rendered directory; nil when none) when
// Reusable accepts it, else a fresh one.
func (ca *CA) Leaf(target string, certPEM, keyPEM []byte, now time.Time) (Leaf, error) {
	if certPEM != nil && keyPEM != nil && ca.Reusable(target, certPEM, keyPEM, now) == nil {
		return Leaf{CertPEM: certPEM, KeyPEM: keyPEM, Reused: true}, nil
	}
	return ca.Issue(target, now)
}

// Reusable reports why the leaf on disk cannot serve target now, or nil.
// It must have exactly the target's host as its SAN (DNS, or IP for an IP
// literal), chain to this CA for serverAuth, carry the matching ECDSA
// P-256 key, and have more than ReuseMargin left.
func (ca *CA) Reusable(target string, certPEM, keyPEM []byte, now time.Time) error {
	cert, err := oneCert(certPEM)
	if err != nil {
		return ErrLeafUnreadable
	}
	key, err := parseKey(keyPEM)
	if err != nil {
		return ErrLeafUnreadable
	}
	dns, ip, err := san(target)
	if err != nil {
		return err
	}
	switch {
	case dns != "" && (!slices.Equal(cert.DNSNames, []string{dns}) || len(cert.IPAddresses) != 0):
		return ErrLeafSAN
	case ip.IsValid() && (len(cert.DNSNames) != 0 || len(cert.IPAddresses) != 1 || !net.IP(ip.AsSlice()).Equal(cert.IPAddresses[0])):
		return ErrLeafSAN
	case len(cert.URIs) != 0 || len(cert.EmailAddresses) != 0:
		return ErrLeafSAN
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		return ErrLeafChain
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		return ErrLeafKey
	}
	if cert.NotAfter.Sub(now) <= ReuseMargin {
		return ErrLeafExpiring
	}
	return nil
}

// Issue signs a fresh leaf for target with a fresh key.
func (ca *CA) Issue(target string, now time.Time) (Leaf, error) {
	dns, ip, err := san(target)
	if err != nil {
		return Leaf{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Leaf{}, fmt.Errorf("leaf for %s: %w", target, err)
	}
	serial, err := newSerial()
	if err != nil {
		return Leaf{}, fmt.Errorf("leaf for %s: %w", target, err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		NotBefore:    now.Add(-backdate),
		NotAfter:     now.Add(LeafValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if dns != "" {
		tmpl.Subject = pkix.Name{CommonName: dns}
		tmpl.DNSNames = []string{dns}
	} else {
		tmpl.Subject = pkix.Name{CommonName: ip.String()}
		tmpl.IPAddresses = []net.IP{net.IP(ip.AsSlice())}
	}
	if ca.Cert.NotAfter.Before(tmpl.NotAfter) {
		tmpl.NotAfter = ca.Cert.NotAfter // a leaf never outlives its CA
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return Leaf{}, fmt.Errorf("leaf for %s: %w", target, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return Leaf{}, fmt.Errorf("leaf for %s: %w", target, err)
	}
	return Leaf{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// san is the subject alternative name a target's leaf carries: its host as
// a DNS name, or as an IP address (unmapped, canonical) for an IP literal.
func san(target string) (dns string, ip netip.Addr, err error) {
	host, _, err := filter.SplitTarget(target)
	if err != nil {
		return "", netip.Addr{}, fmt.Errorf("leaf for %q: %v", target, err)
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return "", a.Unmap(), nil
	}
	return host, netip.Addr{}, nil
}

// SAN is the name the Custodian verifies on the upstream's certificate and
// its leaf carries for target: the host as a DNS name, or the IP address in
// canonical form. isIP tells which.
func SAN(target string) (name string, isIP bool, err error) {
	dns, ip, err := san(target)
	if err != nil {
		return "", false, err
	}
	if ip.IsValid() {
		return ip.String(), true, nil
	}
	return dns, false, nil
}
