package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
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
//
// The certificate is the one x509.CreateCertificate makes of leafTemplate
// (TestIssueTBSIsStdlibs holds the to-be-signed bytes equal), encoded here
// and signed with the CA's key directly: CreateCertificate verifies every
// signature it makes (an ECDSA verify, twice a signature's cost, 24 % of a
// 400-target render's CPU), which guards a crypto.Signer we do not use;
// the CA's key is an *ecdsa.PrivateKey of this process.
func (ca *CA) Issue(target string, now time.Time) (Leaf, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Leaf{}, fmt.Errorf("leaf for %s: %w", target, err)
	}
	serial, err := newSerial()
	if err != nil {
		return Leaf{}, fmt.Errorf("leaf for %s: %w", target, err)
	}
	tbs, err := ca.leafTBS(target, serial, &key.PublicKey, now)
	if err != nil {
		return Leaf{}, fmt.Errorf("leaf for %s: %w", target, err)
	}
	digest := sha256.Sum256(tbs)
	sig, err := ecdsa.SignASN1(rand.Reader, ca.key, digest[:])
	if err != nil {
		return Leaf{}, fmt.Errorf("leaf for %s: %w", target, err)
	}
	der, err := asn1.Marshal(certificate{
		TBS:       asn1.RawValue{FullBytes: tbs},
		Algorithm: pkix.AlgorithmIdentifier{Algorithm: oidECDSAWithSHA256},
		Signature: asn1.BitString{Bytes: sig, BitLength: 8 * len(sig)},
	})
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

// leafTemplate is the certificate a target's leaf is: its host as the
// subject's CN and the only SAN, digitalSignature, serverAuth, valid from
// backdate before now for LeafValidity and never past the CA.
func (ca *CA) leafTemplate(target string, serial *big.Int, now time.Time) (*x509.Certificate, error) {
	dns, ip, err := san(target)
	if err != nil {
		return nil, err
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
	return tmpl, nil
}

// The DER shapes of RFC 5280 §4.1 as crypto/x509 writes them.
type (
	certificate struct {
		TBS       asn1.RawValue
		Algorithm pkix.AlgorithmIdentifier
		Signature asn1.BitString
	}
	tbsCertificate struct {
		Version    int `asn1:"optional,explicit,default:0,tag:0"`
		Serial     *big.Int
		Algorithm  pkix.AlgorithmIdentifier
		Issuer     asn1.RawValue
		Validity   struct{ NotBefore, NotAfter time.Time }
		Subject    asn1.RawValue
		PublicKey  asn1.RawValue
		Extensions []pkix.Extension `asn1:"omitempty,optional,explicit,tag:3"`
	}
	authorityKeyID struct {
		ID []byte `asn1:"optional,tag:0"`
	}
)

var (
	oidECDSAWithSHA256 = asn1.ObjectIdentifier{1, 2, 840, 10045, 4, 3, 2}
	oidKeyUsage        = asn1.ObjectIdentifier{2, 5, 29, 15}
	oidExtKeyUsage     = asn1.ObjectIdentifier{2, 5, 29, 37}
	oidAuthorityKeyID  = asn1.ObjectIdentifier{2, 5, 29, 35}
	oidSubjectAltName  = asn1.ObjectIdentifier{2, 5, 29, 17}
	oidServerAuth      = asn1.ObjectIdentifier{1, 3, 6, 1, 5, 5, 7, 3, 1}
)

// leafTBS is the to-be-signed part of leafTemplate's certificate for pub,
// byte for byte what x509.CreateCertificate signs: version 3, the CA's
// subject as issuer, keyUsage (critical), extKeyUsage, the CA's key id as
// authorityKeyIdentifier when it has one, and the SAN.
func (ca *CA) leafTBS(target string, serial *big.Int, pub *ecdsa.PublicKey, now time.Time) ([]byte, error) {
	tmpl, err := ca.leafTemplate(target, serial, now)
	if err != nil {
		return nil, err
	}
	spki, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	subject, err := asn1.Marshal(tmpl.Subject.ToRDNSequence())
	if err != nil {
		return nil, err
	}
	// digitalSignature is bit 0: one bit, the byte's top one.
	ku, err := asn1.Marshal(asn1.BitString{Bytes: []byte{0x80}, BitLength: 1})
	if err != nil {
		return nil, err
	}
	eku, err := asn1.Marshal([]asn1.ObjectIdentifier{oidServerAuth})
	if err != nil {
		return nil, err
	}
	name := asn1.RawValue{Class: asn1.ClassContextSpecific, Tag: 2, Bytes: []byte(tmpl.Subject.CommonName)}
	if len(tmpl.IPAddresses) == 1 {
		ip := tmpl.IPAddresses[0]
		if v4 := ip.To4(); v4 != nil {
			ip = v4
		}
		name = asn1.RawValue{Class: asn1.ClassContextSpecific, Tag: 7, Bytes: ip}
	}
	sans, err := asn1.Marshal([]asn1.RawValue{name})
	if err != nil {
		return nil, err
	}
	exts := []pkix.Extension{{Id: oidKeyUsage, Critical: true, Value: ku}, {Id: oidExtKeyUsage, Value: eku}}
	if len(ca.Cert.SubjectKeyId) > 0 {
		akid, err := asn1.Marshal(authorityKeyID{ca.Cert.SubjectKeyId})
		if err != nil {
			return nil, err
		}
		exts = append(exts, pkix.Extension{Id: oidAuthorityKeyID, Value: akid})
	}
	exts = append(exts, pkix.Extension{Id: oidSubjectAltName, Value: sans})
	t := tbsCertificate{
		Version:    2,
		Serial:     serial,
		Algorithm:  pkix.AlgorithmIdentifier{Algorithm: oidECDSAWithSHA256},
		Issuer:     asn1.RawValue{FullBytes: ca.Cert.RawSubject},
		Subject:    asn1.RawValue{FullBytes: subject},
		PublicKey:  asn1.RawValue{FullBytes: spki},
		Extensions: exts,
	}
	t.Validity.NotBefore, t.Validity.NotAfter = tmpl.NotBefore.UTC(), tmpl.NotAfter.UTC()
	return asn1.Marshal(t)
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
