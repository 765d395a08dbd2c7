// Package efftest holds what the Effector's tests share: a test PKI made in
// code (no PEM is committed), a TLS upstream on loopback, and the forms of
// a value an echo server reflects and an answer must not hold.
//
// Invariant: nothing here is imported by a non-test build of the Effector;
// it exists so the server, httpkind, client and process tests use one
// upstream and one definition of "a form of the secret".
package efftest

import (
	"crypto/tls"
	"crypto/x509"
	"testing"

	"jr2.dev/boundary/internal/testkit/testpki"
)

// PKI is a CA and one server leaf it signed.
type PKI struct {
	// CAPEM is the CA certificate, for JR2_CA_FILE.
	CAPEM []byte
	// Pool holds the CA alone.
	Pool *x509.CertPool
	// Server is a TLS config serving the leaf.
	Server *tls.Config
}

// NewPKI makes a CA and a leaf for hosts (names or IP addresses).
func NewPKI(t testing.TB, hosts ...string) *PKI {
	t.Helper()
	ca := testpki.NewCA(t, "jr2 effector test CA")
	leaf := ca.Leaf(t, hosts...)
	return &PKI{CAPEM: ca.CertPEM, Pool: ca.Pool(), Server: &tls.Config{Certificates: []tls.Certificate{leaf.TLS}}}
}
