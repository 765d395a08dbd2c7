package runca

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net"
	"reflect"
	"sync"
	"testing"
	"time"
)

func newCA(t testing.TB) *CA {
	t.Helper()
	ca, err := New("jr2 run test")
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func TestCACertificate(t *testing.T) {
	ca := newCA(t)
	block, rest := pem.Decode(ca.PEM())
	if block == nil || block.Type != "CERTIFICATE" || len(rest) != 0 {
		t.Fatalf("PEM: %q", ca.PEM())
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	pub, ok := c.PublicKey.(*ecdsa.PublicKey)
	switch {
	case !ok || pub.Curve != elliptic.P256():
		t.Errorf("key %T, want ECDSA P-256", c.PublicKey)
	case !c.IsCA || !c.BasicConstraintsValid:
		t.Error("not a CA")
	case c.MaxPathLen != 0 || !c.MaxPathLenZero:
		t.Errorf("path length %d (zero %v), want 0", c.MaxPathLen, c.MaxPathLenZero)
	case c.NotAfter.Sub(c.NotBefore) != Validity:
		t.Errorf("valid %v, want %v", c.NotAfter.Sub(c.NotBefore), Validity)
	case c.NotBefore.After(time.Now()) || time.Until(c.NotAfter) > Validity:
		t.Errorf("validity %v to %v", c.NotBefore, c.NotAfter)
	case c.KeyUsage&x509.KeyUsageCertSign == 0:
		t.Error("cannot sign certificates")
	case c.Subject.CommonName != "jr2 run test":
		t.Errorf("subject %v", c.Subject)
	}
	other := newCA(t)
	if other.Certificate().Equal(ca.Certificate()) || other.Certificate().SerialNumber.Cmp(ca.Certificate().SerialNumber) == 0 {
		t.Error("two runs made the same CA")
	}
}

// TestNoKeyAccessor: no exported method or field of *CA yields a private
// key or a signer; the key stays in this process's memory.
func TestNoKeyAccessor(t *testing.T) {
	typ := reflect.TypeOf(&CA{})
	signer := reflect.TypeOf((*crypto.Signer)(nil)).Elem()
	for i := range typ.Elem().NumField() {
		if f := typ.Elem().Field(i); f.IsExported() {
			t.Errorf("exported field %s", f.Name)
		}
	}
	for i := range typ.NumMethod() {
		m := typ.Method(i)
		for j := range m.Type.NumOut() {
			out := m.Type.Out(j)
			if out.Implements(signer) || out == reflect.TypeOf((*crypto.PrivateKey)(nil)).Elem() {
				t.Errorf("%s returns %s", m.Name, out)
			}
		}
	}
}

func TestLeaves(t *testing.T) {
	ca := newCA(t)
	pool := ca.Pool()
	for _, tc := range []struct {
		host  string
		dns   []string
		ips   int
		check string
	}{
		{"api.example.com", []string{"api.example.com"}, 0, "api.example.com"},
		{"10.231.0.1", nil, 1, "10.231.0.1"},
		{"fd00::1", nil, 1, "fd00::1"},
	} {
		leaf, err := ca.Leaf(tc.host)
		if err != nil {
			t.Fatal(err)
		}
		l := leaf.Leaf
		if !reflect.DeepEqual(l.DNSNames, tc.dns) || len(l.IPAddresses) != tc.ips {
			t.Errorf("%s: DNS %v, IPs %v", tc.host, l.DNSNames, l.IPAddresses)
		}
		if l.IsCA || !l.NotAfter.Equal(ca.Certificate().NotAfter) {
			t.Errorf("%s: IsCA %v, NotAfter %v", tc.host, l.IsCA, l.NotAfter)
		}
		if _, err := l.Verify(x509.VerifyOptions{DNSName: tc.check, Roots: pool}); err != nil {
			t.Errorf("%s: %v", tc.host, err)
		}
		if _, err := l.Verify(x509.VerifyOptions{DNSName: "other.example", Roots: pool}); err == nil {
			t.Errorf("%s: leaf verifies for another name", tc.host)
		}
		again, _ := ca.Leaf(tc.host)
		if again != leaf {
			t.Errorf("%s: not cached", tc.host)
		}
	}
	for _, bad := range []string{"", "Upper.example", "a b", "*.example.com", "fe80::1%eth0"} {
		if _, err := ca.Leaf(bad); err == nil {
			t.Errorf("Leaf(%q) made a certificate", bad)
		}
	}
}

// TestLeafCannotSign: a leaf's key is handed to the TLS server, so a
// certificate it signs must not chain to the run's CA (the leaf is not a CA,
// and the CA's path length 0 would refuse it as an intermediate anyway).
func TestLeafCannotSign(t *testing.T) {
	ca := newCA(t)
	leaf, _ := ca.Leaf("api.example.com")
	tmpl := &x509.Certificate{SerialNumber: leaf.Leaf.SerialNumber, DNSNames: []string{"evil.example"},
		NotBefore: leaf.Leaf.NotBefore, NotAfter: leaf.Leaf.NotAfter}
	key := leaf.PrivateKey.(*ecdsa.PrivateKey)
	der, err := x509.CreateCertificate(nil, tmpl, leaf.Leaf, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	forged, _ := x509.ParseCertificate(der)
	inter := x509.NewCertPool()
	inter.AddCert(leaf.Leaf)
	if _, err := forged.Verify(x509.VerifyOptions{DNSName: "evil.example", Roots: ca.Pool(), Intermediates: inter}); err == nil {
		t.Fatal("a certificate signed by a leaf verified")
	}
}

// TestTLS: a crypto/tls client trusting only the run's CA completes a
// handshake with a server using GetCertificate, by name and by IP literal.
func TestTLS(t *testing.T) {
	ca := newCA(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
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
			go func() {
				s := tls.Server(c, &tls.Config{GetCertificate: ca.GetCertificate})
				io.WriteString(s, "ok")
				s.Close()
			}()
		}
	}()
	for _, name := range []string{"api.example.com", "127.0.0.1"} {
		c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{ServerName: name, RootCAs: ca.Pool()})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b, _ := io.ReadAll(c)
		c.Close()
		if string(b) != "ok" {
			t.Fatalf("%s: read %q", name, b)
		}
	}
	// The system's roots do not know the run's CA.
	if c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{ServerName: "api.example.com"}); err == nil {
		c.Close()
		t.Fatal("a client without the run's CA trusted the leaf")
	}
}

func TestConcurrentLeaves(t *testing.T) {
	ca := newCA(t)
	var wg sync.WaitGroup
	got := make([]*tls.Certificate, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], _ = ca.Leaf("api.example.com")
		}()
	}
	wg.Wait()
	for _, g := range got {
		if g == nil || g != got[0] {
			t.Fatal("concurrent callers got different leaves for one host")
		}
	}
}

func TestTrustEnv(t *testing.T) {
	want := []string{"SSL_CERT_FILE=/run/ca.pem", "REQUESTS_CA_BUNDLE=/run/ca.pem", "NODE_EXTRA_CA_CERTS=/run/ca.pem", "GIT_SSL_CAINFO=/run/ca.pem"}
	if got := TrustEnv("/run/ca.pem"); !reflect.DeepEqual(got, want) {
		t.Errorf("TrustEnv = %q", got)
	}
}

// BenchmarkLeafMiss is the cost of a first connection to a new host.
func BenchmarkLeafMiss(b *testing.B) {
	ca := newCA(b)
	for b.Loop() {
		if _, err := ca.sign("api.example.com"); err != nil {
			b.Fatal(err)
		}
	}
}
