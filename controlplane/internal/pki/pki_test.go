package pki_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"jr2.dev/boundary/controlplane/internal/pki"
	"jr2.dev/boundary/internal/testkit/testpki"
)

var now = time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)

func newCA(t testing.TB) (*pki.CA, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ca")
	if err := pki.InitCA(dir, now); err != nil {
		t.Fatal(err)
	}
	ca, err := pki.LoadCA(dir, now)
	if err != nil {
		t.Fatal(err)
	}
	return ca, dir
}

func TestInitCA(t *testing.T) {
	ca, dir := newCA(t)
	if !ca.Cert.IsCA || !ca.Cert.MaxPathLenZero || ca.Cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		t.Errorf("not a CA: IsCA %v, MaxPathLenZero %v, KeyUsage %v", ca.Cert.IsCA, ca.Cert.MaxPathLenZero, ca.Cert.KeyUsage)
	}
	pub, ok := ca.Cert.PublicKey.(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P256() {
		t.Errorf("CA key is %T; want ECDSA P-256", ca.Cert.PublicKey)
	}
	if got := ca.Cert.NotAfter.Sub(now); got < 9*365*24*time.Hour {
		t.Errorf("CA valid for %v; want about ten years", got)
	}
	st, err := os.Stat(filepath.Join(dir, pki.CAKeyFile))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("ca.key mode %v, %v; want 0600", st.Mode().Perm(), err)
	}
	before, _ := os.ReadFile(filepath.Join(dir, pki.CAKeyFile))

	// Refused while either file exists; nothing changes.
	err = pki.InitCA(dir, now)
	if err == nil || !strings.Contains(err.Error(), "never replaces a CA") {
		t.Errorf("second init: %v; want a refusal", err)
	}
	after, _ := os.ReadFile(filepath.Join(dir, pki.CAKeyFile))
	if !bytes.Equal(before, after) {
		t.Error("second init changed ca.key")
	}
	for _, keep := range []string{pki.CACertFile, pki.CAKeyFile} {
		d := t.TempDir()
		if err := os.WriteFile(filepath.Join(d, keep), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := pki.InitCA(d, now); err == nil {
			t.Errorf("init beside an existing %s succeeded", keep)
		}
		if _, err := os.Stat(filepath.Join(d, otherOf(keep))); err == nil {
			t.Errorf("init beside an existing %s wrote the other file", keep)
		}
	}
}

func otherOf(name string) string {
	if name == pki.CACertFile {
		return pki.CAKeyFile
	}
	return pki.CACertFile
}

func TestLoadCARefusals(t *testing.T) {
	_, dirA := newCA(t)
	_, dirB := newCA(t)
	mixed := t.TempDir()
	copyFile(t, filepath.Join(dirA, pki.CACertFile), filepath.Join(mixed, pki.CACertFile))
	copyFile(t, filepath.Join(dirB, pki.CAKeyFile), filepath.Join(mixed, pki.CAKeyFile))
	keyBytes, _ := os.ReadFile(filepath.Join(dirB, pki.CAKeyFile))

	for _, tc := range []struct {
		name, dir, want string
		when            time.Time
	}{
		{"missing", t.TempDir(), "controlplane ca init", now},
		{"key of another CA", mixed, "is not the key of", now},
		{"expired", dirA, "expired", now.Add(pki.CAValidity + time.Hour)},
	} {
		_, err := pki.LoadCA(tc.dir, tc.when)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error with %q", tc.name, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), string(keyBytes[30:60])) {
			t.Errorf("%s: the error carries key bytes", tc.name)
		}
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestLeafSAN: the SAN is the target's host, a DNS name or an IP address,
// and nothing else; the leaf chains to the CA for serverAuth.
func TestLeafSAN(t *testing.T) {
	ca, _ := newCA(t)
	for _, tc := range []struct {
		target, dns, ip string
	}{
		{"api.github.com:443", "api.github.com", ""},
		{"gw_internal.svc:8443", "gw_internal.svc", ""},
		{"10.0.0.7:443", "", "10.0.0.7"},
		{"[fd00::10]:8443", "", "fd00::10"},
		{"[::ffff:10.0.0.8]:443", "", "10.0.0.8"},
	} {
		leaf, err := ca.Issue(tc.target, now)
		if err != nil {
			t.Fatalf("%s: %v", tc.target, err)
		}
		cert := parseCert(t, leaf.CertPEM)
		switch {
		case tc.dns != "" && (len(cert.DNSNames) != 1 || cert.DNSNames[0] != tc.dns || len(cert.IPAddresses) != 0):
			t.Errorf("%s: SAN DNS %v IP %v; want DNS %s only", tc.target, cert.DNSNames, cert.IPAddresses, tc.dns)
		case tc.ip != "" && (len(cert.IPAddresses) != 1 || !cert.IPAddresses[0].Equal(net.ParseIP(tc.ip)) || len(cert.DNSNames) != 0):
			t.Errorf("%s: SAN DNS %v IP %v; want IP %s only", tc.target, cert.DNSNames, cert.IPAddresses, tc.ip)
		}
		roots := x509.NewCertPool()
		roots.AddCert(ca.Cert)
		host := tc.dns + tc.ip
		if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: host, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("%s: does not verify for %s: %v", tc.target, host, err)
		}
		if got := cert.NotAfter.Sub(now); got > pki.LeafValidity || got < pki.LeafValidity-2*time.Hour {
			t.Errorf("%s: valid for %v more; want %v", tc.target, got, pki.LeafValidity)
		}
		if pub, ok := cert.PublicKey.(*ecdsa.PublicKey); !ok || pub.Curve != elliptic.P256() {
			t.Errorf("%s: key %T; want ECDSA P-256", tc.target, cert.PublicKey)
		}
		if name, isIP, err := pki.SAN(tc.target); err != nil || name != host || isIP != (tc.ip != "") {
			t.Errorf("SAN(%s) = %q, %v, %v; want %q", tc.target, name, isIP, err, host)
		}
	}
}

// TestReuse: a leaf is reused while its SAN is the same, it chains to the
// current CA, its key matches and more than 30 days remain.
func TestReuse(t *testing.T) {
	ca, _ := newCA(t)
	other, _ := newCA(t)
	const target = "api.github.com:443"
	fresh, _ := ca.Issue(target, now)
	otherHost, _ := ca.Issue("github.com:443", now)
	otherCA, _ := other.Issue(target, now)
	nearEnd, _ := ca.Issue(target, now.Add(-pki.LeafValidity+pki.ReuseMargin))              // exactly 30 days left
	justOver, _ := ca.Issue(target, now.Add(-pki.LeafValidity+pki.ReuseMargin+2*time.Hour)) // 30 days and 2 hours left
	second, _ := ca.Issue(target, now)
	for _, tc := range []struct {
		name      string
		cert, key []byte
		want      error
	}{
		{"fresh", fresh.CertPEM, fresh.KeyPEM, nil},
		{"more than 30 days left", justOver.CertPEM, justOver.KeyPEM, nil},
		{"30 days left", nearEnd.CertPEM, nearEnd.KeyPEM, pki.ErrLeafExpiring},
		{"another host", otherHost.CertPEM, otherHost.KeyPEM, pki.ErrLeafSAN},
		{"another CA", otherCA.CertPEM, otherCA.KeyPEM, pki.ErrLeafChain},
		{"another key", fresh.CertPEM, second.KeyPEM, pki.ErrLeafKey},
		{"garbage", []byte("not pem"), fresh.KeyPEM, pki.ErrLeafUnreadable},
		{"a key as the cert", fresh.KeyPEM, fresh.KeyPEM, pki.ErrLeafUnreadable},
	} {
		if err := ca.Reusable(target, tc.cert, tc.key, now); !errors.Is(err, tc.want) {
			t.Errorf("%s: Reusable = %v; want %v", tc.name, err, tc.want)
		}
		leaf, err := ca.Leaf(target, tc.cert, tc.key, now)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if leaf.Reused != (tc.want == nil) {
			t.Errorf("%s: reused %v; want %v", tc.name, leaf.Reused, tc.want == nil)
		}
		if leaf.Reused && (!bytes.Equal(leaf.CertPEM, tc.cert) || !bytes.Equal(leaf.KeyPEM, tc.key)) {
			t.Errorf("%s: reused leaf is not the one given", tc.name)
		}
		if !leaf.Reused && ca.Reusable(target, leaf.CertPEM, leaf.KeyPEM, now) != nil {
			t.Errorf("%s: the re-issued leaf is not itself reusable", tc.name)
		}
	}
	if leaf, _ := ca.Leaf(target, nil, nil, now); leaf.Reused {
		t.Error("no leaf on disk, yet reused")
	}
}

func parseCert(t testing.TB, b []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "CERTIFICATE" {
		t.Fatalf("not a PEM certificate: %q", b)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func certsIn(t testing.TB, b []byte) []*x509.Certificate {
	t.Helper()
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			return out
		}
		out = append(out, parseCert(t, pem.EncodeToMemory(block)))
	}
}

// selfSigned is a root made in code (never a committed PEM).
func selfSigned(t testing.TB, cn string) *x509.Certificate { return testpki.NewCA(t, cn).Cert }

func pemOf(cs ...*x509.Certificate) []byte {
	var b bytes.Buffer
	for _, c := range cs {
		pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return b.Bytes()
}

func names(cs []*x509.Certificate) string {
	var n []string
	for _, c := range cs {
		n = append(n, c.Subject.CommonName)
	}
	return strings.Join(n, ",")
}

// TestBundles: extra = --ca-bundle + CA; bundle = roots + --ca-bundle + CA;
// upstream = roots + --ca-bundle and never the CA.
func TestBundles(t *testing.T) {
	ca, _ := newCA(t)
	r1, r2, x1 := selfSigned(t, "root-1"), selfSigned(t, "root-2"), selfSigned(t, "extra-1")
	system := append([]byte("# a comment\n"), pemOf(r1, r2)...)
	system = append(system, pem.EncodeToMemory(&pem.Block{Type: "TRUSTED CERTIFICATE", Bytes: []byte{1, 2}})...)
	system = append(system, pemOf(ca.Cert)...) // a machine that installed the jr2 CA

	tr, err := pki.Bundles(ca, system, pemOf(x1, r1))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		got  []byte
		want string
	}{
		{"extra", tr.Extra, "extra-1,root-1,jr2 instance CA"},
		{"bundle", tr.Bundle, "root-1,root-2,extra-1,jr2 instance CA"},
		{"upstream", tr.Upstream, "root-1,root-2,extra-1"},
	} {
		if got := names(certsIn(t, tc.got)); got != tc.want {
			t.Errorf("%s: %s; want %s", tc.name, got, tc.want)
		}
	}
	again, _ := pki.Bundles(ca, system, pemOf(x1, r1))
	if !bytes.Equal(again.Bundle, tr.Bundle) || !bytes.Equal(again.Upstream, tr.Upstream) || !bytes.Equal(again.Extra, tr.Extra) {
		t.Error("the same inputs gave different trust files")
	}
	if tr, err := pki.Bundles(ca, system, nil); err != nil || names(certsIn(t, tr.Extra)) != "jr2 instance CA" {
		t.Errorf("no --ca-bundle: extra %v, %v; want the CA alone", names(certsIn(t, tr.Extra)), err)
	}

	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte("SENTINEL-KEY-BYTES")})
	for _, tc := range []struct {
		name          string
		system, extra []byte
		want          string
	}{
		{"no system roots", []byte("nothing"), nil, "system roots: no certificate found"},
		{"the CA in --ca-bundle", system, pemOf(x1, ca.Cert), "certificate 2 is the jr2 CA"},
		{"a key in --ca-bundle", system, append(pemOf(x1), keyPEM...), `block 2 is a "PRIVATE KEY" block`},
		{"no certificate in --ca-bundle", system, []byte("hello"), "no PEM certificate found"},
		{"text after the PEM", system, append(pemOf(x1), "junk"...), "text after the last PEM block"},
	} {
		_, err := pki.Bundles(ca, tc.system, tc.extra)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want %q", tc.name, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "SENTINEL") {
			t.Errorf("%s: error carries the file's bytes: %v", tc.name, err)
		}
	}
}

// TestTrustOverTLS: a real handshake. A client trusting extra.crt or
// bundle.crt accepts a leaf for its host; one trusting upstream.crt — what
// the Custodian verifies bound targets against — refuses it.
func TestTrustOverTLS(t *testing.T) {
	ca, _ := newCA(t)
	tr, err := pki.Bundles(ca, pemOf(selfSigned(t, "root-1")), nil)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Issue("127.0.0.1:443", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}, NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	for _, tc := range []struct {
		name  string
		roots []byte
		ok    bool
	}{
		{"extra.crt", tr.Extra, true},
		{"bundle.crt", tr.Bundle, true},
		{"upstream.crt", tr.Upstream, false},
	} {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(tc.roots) {
			t.Fatalf("%s: no certificate", tc.name)
		}
		c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", NextProtos: []string{"http/1.1"}})
		if (err == nil) != tc.ok {
			t.Errorf("%s: handshake error %v; want ok=%v", tc.name, err, tc.ok)
		}
		if err == nil {
			if p := c.ConnectionState().NegotiatedProtocol; p != "http/1.1" {
				t.Errorf("%s: ALPN %q", tc.name, p)
			}
			c.Close()
		} else {
			var unknown x509.UnknownAuthorityError
			if !errors.As(err, &unknown) {
				t.Errorf("%s: %v; want an unknown-authority error", tc.name, err)
			}
		}
	}
}
