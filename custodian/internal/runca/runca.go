// Package runca is the certificate authority of one contained run: made
// when the run starts, gone when it ends, it signs the leaf the mediator
// shows the child for each host it intercepts.
//
// Invariant: the CA's private key exists only in this process's memory. No
// function or method returns it, nothing in this package writes it, and
// the CA cannot sign another CA (path length 0); what leaves the package is
// the CA certificate and leaves, each with its own fresh key.
//
// The CA is ECDSA P-256, valid 24 hours from a minute before it is made,
// with path length 0 (MaxPathLenZero). A leaf is valid as long as the CA;
// a name goes into its DNS SAN, an IP literal into its IP SAN (a client
// dialling an IP checks that one). Leaves are cached per host, at most
// MaxCached of them.
package runca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"sync"
	"time"

	"jr2.dev/boundary/internal/contract"
)

// Validity is the lifetime of the CA and of every leaf.
const Validity = 24 * time.Hour

// MaxCached bounds the leaf cache; past it, leaves are made but not kept.
const MaxCached = 1024

// CA is a run's certificate authority. It is safe for concurrent use.
type CA struct {
	key  *ecdsa.PrivateKey // never returned, never written
	cert *x509.Certificate
	pem  []byte

	mu     sync.Mutex
	leaves map[string]*tls.Certificate
}

// New makes a CA whose subject names the run (e.g. "jr2 run 7f3a").
func New(run string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("runca: key: %w", err)
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	start := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: run, Organization: []string{"jr2 contained run"}},
		NotBefore:             start,
		NotAfter:              start.Add(Validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            0,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("runca: sign: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("runca: %w", err)
	}
	return &CA{
		key:    key,
		cert:   cert,
		pem:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		leaves: map[string]*tls.Certificate{},
	}, nil
}

func serialNumber() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("runca: serial: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}

// Certificate returns the CA certificate. Do not modify it.
func (c *CA) Certificate() *x509.Certificate { return c.cert }

// PEM returns the CA certificate in PEM, for the child's trust file.
func (c *CA) PEM() []byte { return append([]byte(nil), c.pem...) }

// Pool returns a pool holding only the CA, for clients in tests.
func (c *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c.cert)
	return p
}

// Leaf returns the certificate for host, a host name (lowercase, checked
// by contract.CheckName) or an IP literal, made on first use and cached.
func (c *CA) Leaf(host string) (*tls.Certificate, error) {
	c.mu.Lock()
	leaf, ok := c.leaves[host]
	c.mu.Unlock()
	if ok {
		return leaf, nil
	}
	leaf, err := c.sign(host)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.leaves[host]; ok {
		return prev, nil // made concurrently: keep one
	}
	if len(c.leaves) < MaxCached {
		c.leaves[host] = leaf
	}
	return leaf, nil
}

func (c *CA) sign(host string) (*tls.Certificate, error) {
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: host},
		NotBefore:             c.cert.NotBefore,
		NotAfter:              c.cert.NotAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip.Zone() != "" {
			return nil, errors.New("runca: an IP with a zone cannot be certified")
		}
		tmpl.IPAddresses = []net.IP{ip.AsSlice()}
	} else if err := contract.CheckName(host); err == nil {
		tmpl.DNSNames = []string{host}
	} else {
		return nil, fmt.Errorf("runca: not a host name or IP literal: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("runca: leaf key: %w", err)
	}
	if tmpl.SerialNumber, err = serialNumber(); err != nil {
		return nil, err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		return nil, fmt.Errorf("runca: sign leaf: %w", err)
	}
	parsed, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("runca: %w", err)
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: parsed}, nil
}

// GetCertificate serves tls.Config.GetCertificate: the leaf for the
// ClientHello's server name, or, when the client sent none (it dialled an
// IP literal), for the local address it connected to.
func (c *CA) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	if hello.ServerName != "" {
		return c.Leaf(contract.Lower(hello.ServerName))
	}
	if hello.Conn != nil {
		if ap, err := netip.ParseAddrPort(hello.Conn.LocalAddr().String()); err == nil {
			return c.Leaf(ap.Addr().Unmap().WithZone("").String())
		}
	}
	return nil, errors.New("runca: no server name and no local address to certify")
}

// TrustVars are the variables through which common clients take a CA
// file: OpenSSL and Go (SSL_CERT_FILE), Python requests, Node, git.
var TrustVars = []string{"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "GIT_SSL_CAINFO"}

// TrustEnv returns "VAR=caFile" for each of TrustVars, for the child's
// environment.
func TrustEnv(caFile string) []string {
	env := make([]string, len(TrustVars))
	for i, v := range TrustVars {
		env[i] = v + "=" + caFile
	}
	return env
}
