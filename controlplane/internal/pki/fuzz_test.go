package pki_test

import (
	"bytes"
	"testing"

	"jr2.dev/boundary/controlplane/internal/pki"
)

// FuzzReusable: the leaf and key read back from DIR are whatever the disk
// holds. No bytes panic Reusable, and a leaf it accepts is one a fresh
// check of its own would accept: it parses and serves the target.
func FuzzReusable(f *testing.F) {
	ca, _ := newCA(f)
	const target = "api.github.com:443"
	good, err := ca.Issue(target, now)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good.CertPEM, good.KeyPEM)
	f.Add(good.KeyPEM, good.CertPEM)
	f.Add(append(good.CertPEM, good.CertPEM...), good.KeyPEM)
	f.Fuzz(func(t *testing.T, cert, key []byte) {
		if err := ca.Reusable(target, cert, key, now); err != nil {
			return
		}
		leaf, err := ca.Leaf(target, cert, key, now)
		if err != nil || !leaf.Reused || !bytes.Equal(leaf.CertPEM, cert) {
			t.Fatalf("Reusable accepted a leaf that Leaf did not reuse: %v", err)
		}
	})
}

// FuzzBundles: --ca-bundle is any file a user passes. No bytes panic
// Bundles, and whatever it accepts, upstream.crt never holds the jr2 CA.
func FuzzBundles(f *testing.F) {
	ca, _ := newCA(f)
	root := selfSigned(f, "root")
	f.Add(pemOf(root))
	f.Add(ca.CertPEM)
	f.Add(append(pemOf(root), "junk"...))
	f.Add([]byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"))
	f.Fuzz(func(t *testing.T, extra []byte) {
		tr, err := pki.Bundles(ca, pemOf(root), extra)
		if err != nil {
			return
		}
		for _, c := range certsIn(t, tr.Upstream) {
			if bytes.Equal(c.RawSubjectPublicKeyInfo, ca.Cert.RawSubjectPublicKeyInfo) {
				t.Fatal("upstream.crt holds the jr2 CA")
			}
		}
		if !bytes.Contains(tr.Bundle, bytes.TrimSpace(ca.CertPEM)) || !bytes.Contains(tr.Extra, bytes.TrimSpace(ca.CertPEM)) {
			t.Fatal("bundle.crt or extra.crt lacks the jr2 CA")
		}
	})
}
