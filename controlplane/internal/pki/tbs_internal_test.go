package pki

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"fmt"
	"math/big"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestIssueTBSIsStdlibs: the to-be-signed bytes Issue signs are, byte for
// byte, those x509.CreateCertificate signs for the same template, key and
// CA — DNS names, IPv4 and IPv6 literals, a leaf capped at the CA's end,
// a CA with and without a subject key id — and an issued leaf parses,
// carries the CA's signature and chains for serverAuth.
func TestIssueTBSIsStdlibs(t *testing.T) {
	now := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	ca := loadCA(t, now)
	noSKID := *ca.Cert
	noSKID.SubjectKeyId = nil
	// A CA made in 2049: its leaves end past 2049, in GeneralizedTime.
	late := loadCA(t, time.Date(2049, 6, 1, 0, 0, 0, 0, time.UTC))
	cas := map[string]*CA{"ca": ca, "ca without a key id": {Cert: &noSKID, key: ca.key}, "ca of 2049": late}
	targets := []string{"api.example.com:443", "svc-001.example.com:8443", "a_b.example.com:443", "10.1.2.3:443", "[2001:db8::1]:8443", "[::ffff:10.0.0.1]:443"}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range cas {
		for _, when := range []time.Time{c.Cert.NotBefore.Add(2 * time.Hour), c.Cert.NotAfter.Add(-time.Hour)} {
			for _, target := range targets {
				serial := big.NewInt(0x1234567890)
				tmpl, err := c.leafTemplate(target, serial, when)
				if err != nil {
					t.Fatal(err)
				}
				der, err := x509.CreateCertificate(rand.Reader, tmpl, c.Cert, &key.PublicKey, c.key)
				if err != nil {
					t.Fatal(err)
				}
				want, err := x509.ParseCertificate(der)
				if err != nil {
					t.Fatal(err)
				}
				got, err := c.leafTBS(target, serial, &key.PublicKey, when)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want.RawTBSCertificate) {
					t.Errorf("%s, %s at %s: TBS\n%x\nwant (crypto/x509's)\n%x", name, target, when, got, want.RawTBSCertificate)
				}
			}
		}
	}
	for _, target := range targets {
		l, err := ca.Issue(target, now)
		if err != nil {
			t.Fatal(err)
		}
		block, _ := pem.Decode(l.CertPEM)
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatalf("%s: %v", target, err)
		}
		if err := cert.CheckSignatureFrom(ca.Cert); err != nil {
			t.Errorf("%s: %v", target, err)
		}
		if err := ca.Reusable(target, l.CertPEM, l.KeyPEM, now); err != nil {
			t.Errorf("%s: a fresh leaf is not reusable: %v", target, err)
		}
	}
}

func loadCA(t *testing.T, at time.Time) *CA {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ca")
	if err := InitCA(dir, at); err != nil {
		t.Fatal(err)
	}
	ca, err := LoadCA(dir, at)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// TestPKCS8IsStdlibs: the key Issue writes is, byte for byte, what
// x509.MarshalPKCS8PrivateKey writes for it (keys whose scalar or point
// coordinates begin with zero bytes included, by drawing many), and it
// parses back to the same key.
func TestPKCS8IsStdlibs(t *testing.T) {
	for range 300 {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		got := sameAsStdlib(t, "PKCS #8", func() ([]byte, error) { return pkcs8P256(key) }, func() ([]byte, error) { return x509.MarshalPKCS8PrivateKey(key) })
		back, err := x509.ParsePKCS8PrivateKey(got)
		if err != nil || !key.Equal(back) {
			t.Fatalf("PKCS #8 does not read back: %v", err)
		}
	}
	other, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pkcs8P256(other); err == nil {
		t.Error("a P-384 key was written as P-256")
	}
}

// TestSubjectIsStdlibs: a leaf's subject is asn1.Marshal's of the same
// name, for the names a target's host can be and the ones that take the
// library's own path (a '_', a '*', non-ASCII, empty).
func TestSubjectIsStdlibs(t *testing.T) {
	for _, cn := range []string{"api.example.com", "svc-001.example.com", "A-Z.example", "10.1.2.3", "2001:db8::1", "a_b.example.com", "*.example.com", "bücher.example", "", strings.Repeat("a", 200) + ".example.com"} {
		sameAsStdlib(t, fmt.Sprintf("%q: subject", cn), func() ([]byte, error) { return subjectCN(cn) }, func() ([]byte, error) { return asn1.Marshal(pkix.Name{CommonName: cn}.ToRDNSequence()) })
	}
}

// sameAsStdlib fails the test unless ours writes the bytes the standard
// library's function does, and returns them.
func sameAsStdlib(t *testing.T, what string, ours, stdlib func() ([]byte, error)) []byte {
	t.Helper()
	want, err := stdlib()
	if err != nil {
		t.Fatal(err)
	}
	got, err := ours()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s\n%x\nwant (the standard library's)\n%x", what, got, want)
	}
	return got
}

// TestPEMIsStdlibs: a leaf's PEM is pem.EncodeToMemory's, for every
// length across three lines and a certificate's and a key's own.
func TestPEMIsStdlibs(t *testing.T) {
	b := make([]byte, 1200)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	for n := 0; n <= len(b); n++ {
		for _, typ := range []string{"CERTIFICATE", "PRIVATE KEY"} {
			block := &pem.Block{Type: typ, Bytes: b[:n]}
			sameAsStdlib(t, fmt.Sprintf("%s of %d bytes", typ, n), func() ([]byte, error) { return pemOf(typ, b[:n]), nil }, func() ([]byte, error) { return pem.EncodeToMemory(block), nil })
		}
	}
}
