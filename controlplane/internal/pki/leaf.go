package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"slices"
	"time"

	"jr2.dev/boundary/internal/contract"
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
	// Certificate: the TBS, the algorithm, the signature as a BIT STRING.
	cert := der(0x30, tbs, derECDSAWithSHA256, der(0x03, []byte{0}, sig))
	keyDER, err := pkcs8P256(key)
	if err != nil {
		return Leaf{}, fmt.Errorf("leaf for %s: %w", target, err)
	}
	return Leaf{CertPEM: pemOf("CERTIFICATE", cert), KeyPEM: pemOf("PRIVATE KEY", keyDER)}, nil
}

// pemOf is pem.EncodeToMemory of a block of typ without headers, byte for
// byte (TestPEMIsStdlibs), into one buffer of its size: the library's
// line breaker and base64 encoder (a kilobyte each) grew a buffer for
// each of a render's 800 files.
func pemOf(typ string, b []byte) []byte {
	const line = 48 // bytes per 64-character line
	n := (len(b) + line - 1) / line
	out := make([]byte, 0, len("-----BEGIN -----\n-----END -----\n")+2*len(typ)+base64.StdEncoding.EncodedLen(len(b))+n)
	out = append(out, "-----BEGIN "+typ+"-----\n"...)
	for len(b) > 0 {
		chunk := b[:min(line, len(b))]
		out = base64.StdEncoding.AppendEncode(out, chunk)
		out = append(out, '\n')
		b = b[len(chunk):]
	}
	return append(out, "-----END "+typ+"-----\n"...)
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

// DER of RFC 5280 §4.1 as crypto/x509 writes it for a leaf, built by hand
// (asn1.Marshal's reflection was a tenth of a render's CPU).
var (
	// AlgorithmIdentifier ecdsa-with-SHA256 (1.2.840.10045.4.3.2), no parameters.
	derECDSAWithSHA256 = []byte{0x30, 0x0a, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02}
	// SubjectPublicKeyInfo's head for an uncompressed P-256 point:
	// id-ecPublicKey, prime256v1, a BIT STRING of 66 bytes.
	derP256SPKIHead = []byte{0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01,
		0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00}
	// keyUsage (2.5.29.15), critical, digitalSignature only.
	derKeyUsage = []byte{0x30, 0x0e, 0x06, 0x03, 0x55, 0x1d, 0x0f, 0x01, 0x01, 0xff, 0x04, 0x04, 0x03, 0x02, 0x07, 0x80}
	// extKeyUsage (2.5.29.37), serverAuth only.
	derExtKeyUsage = []byte{0x30, 0x13, 0x06, 0x03, 0x55, 0x1d, 0x25, 0x04, 0x0c, 0x30, 0x0a,
		0x06, 0x08, 0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x01}
	derOIDAuthorityKeyID = []byte{0x06, 0x03, 0x55, 0x1d, 0x23}
	derOIDSubjectAltName = []byte{0x06, 0x03, 0x55, 0x1d, 0x11}
	derOIDCommonName     = []byte{0x06, 0x03, 0x55, 0x04, 0x03}
	// PKCS #8's version 0 and AlgorithmIdentifier id-ecPublicKey with
	// the named curve prime256v1 as its parameters.
	derPKCS8P256Head = []byte{0x02, 0x01, 0x00, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01,
		0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07}
)

// pkcs8P256 is x509.MarshalPKCS8PrivateKey of a P-256 key, byte for byte
// (TestPKCS8IsStdlibs), built by hand as the certificate is: PKCS #8 v0,
// id-ecPublicKey on prime256v1, and the SEC 1 ECPrivateKey version 1 with
// the 32-byte scalar and the public point, the curve left to PKCS #8's
// algorithm as crypto/x509 leaves it. asn1.Marshal's reflection was 2 %
// of a 400-target render's CPU.
func pkcs8P256(key *ecdsa.PrivateKey) ([]byte, error) {
	if key.Curve != elliptic.P256() {
		return nil, errors.New("the leaf's key is not an ECDSA P-256 key")
	}
	scalar, err := key.Bytes()
	if err != nil {
		return nil, err
	}
	point, err := key.PublicKey.Bytes()
	if err != nil {
		return nil, err
	}
	ec := der(0x30,
		[]byte{0x02, 0x01, 0x01}, // version 1
		der(0x04, scalar),
		der(0xa1, der(0x03, []byte{0}, point)), // [1] EXPLICIT publicKey BIT STRING
	)
	return der(0x30, derPKCS8P256Head, der(0x04, ec)), nil
}

// subjectCN is the DER of a Name whose one attribute is the common name
// cn, as asn1.Marshal writes pkix.Name{CommonName: cn}.ToRDNSequence():
// a PrintableString when every character is one of a host name's or an
// IP literal's ("A-Za-z0-9.-:"), else (such as a '_') asn1.Marshal's own
// choice.
func subjectCN(cn string) ([]byte, error) {
	if cn == "" {
		return asn1.Marshal(pkix.Name{}.ToRDNSequence())
	}
	for i := 0; i < len(cn); i++ {
		if c := cn[i]; !(isLetter(c) || c >= '0' && c <= '9' || c == '.' || c == '-' || c == ':') {
			return asn1.Marshal(pkix.Name{CommonName: cn}.ToRDNSequence())
		}
	}
	return der(0x30, der(0x31, der(0x30, derOIDCommonName, der(0x13, []byte(cn))))), nil
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// der is one DER element: tag, definite length, content.
func der(tag byte, content ...[]byte) []byte {
	n := 0
	for _, c := range content {
		n += len(c)
	}
	out := make([]byte, 0, n+6)
	out = append(out, tag)
	switch {
	case n < 0x80:
		out = append(out, byte(n))
	case n < 0x100:
		out = append(out, 0x81, byte(n))
	case n < 0x10000:
		out = append(out, 0x82, byte(n>>8), byte(n))
	default:
		out = append(out, 0x83, byte(n>>16), byte(n>>8), byte(n))
	}
	for _, c := range content {
		out = append(out, c...)
	}
	return out
}

// derInteger is a non-negative INTEGER, minimal two's complement.
func derInteger(v *big.Int) []byte {
	b := v.Bytes()
	if len(b) == 0 || b[0]&0x80 != 0 {
		b = append([]byte{0}, b...)
	}
	return der(0x02, b)
}

// derTime is UTCTime for 1950 through 2049, GeneralizedTime otherwise,
// to the second, in UTC (RFC 5280 §4.1.2.5).
func derTime(t time.Time) []byte {
	t = t.UTC()
	if y := t.Year(); y >= 1950 && y < 2050 {
		return der(0x17, []byte(t.Format("060102150405Z")))
	}
	return der(0x18, []byte(t.Format("20060102150405Z")))
}

// leafTBS is the to-be-signed part of leafTemplate's certificate for pub,
// byte for byte what x509.CreateCertificate signs: version 3, the CA's
// subject as issuer, keyUsage (critical), extKeyUsage, the CA's key id as
// authorityKeyIdentifier when it has one, and the SAN.
func (ca *CA) leafTBS(target string, serial *big.Int, pub *ecdsa.PublicKey, now time.Time) ([]byte, error) {
	tmpl, err := ca.leafTemplate(target, serial, now)
	if err != nil {
		return nil, err
	}
	point, err := pub.Bytes()
	if err != nil || len(point) != 65 || pub.Curve != elliptic.P256() {
		return nil, errors.New("the leaf's key is not an ECDSA P-256 key")
	}
	subject, err := subjectCN(tmpl.Subject.CommonName)
	if err != nil {
		return nil, err
	}
	name := der(0x82, []byte(tmpl.Subject.CommonName)) // [2] dNSName
	if len(tmpl.IPAddresses) == 1 {
		ip := tmpl.IPAddresses[0]
		if v4 := ip.To4(); v4 != nil {
			ip = v4
		}
		name = der(0x87, ip) // [7] iPAddress
	}
	exts := [][]byte{derKeyUsage, derExtKeyUsage}
	if id := ca.Cert.SubjectKeyId; len(id) > 0 {
		exts = append(exts, der(0x30, derOIDAuthorityKeyID, der(0x04, der(0x30, der(0x80, id)))))
	}
	exts = append(exts, der(0x30, derOIDSubjectAltName, der(0x04, der(0x30, name))))
	return der(0x30,
		[]byte{0xa0, 0x03, 0x02, 0x01, 0x02}, // [0] EXPLICIT version v3
		derInteger(serial),
		derECDSAWithSHA256,
		ca.Cert.RawSubject,
		der(0x30, derTime(tmpl.NotBefore), derTime(tmpl.NotAfter)),
		subject,
		derP256SPKIHead, point,
		der(0xa3, der(0x30, exts...)), // [3] EXPLICIT extensions
	), nil
}

// san is the subject alternative name a target's leaf carries: its host as
// a DNS name, or as an IP address (unmapped, canonical) for an IP literal.
func san(target string) (dns string, ip netip.Addr, err error) {
	host, _, err := contract.SplitTarget(target)
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
