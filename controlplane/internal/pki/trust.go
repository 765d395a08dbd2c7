package pki

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
)

// Trust is the three trust files of a rendered directory (ADR-0059), PEM.
type Trust struct {
	// Extra is the user's extra roots and the jr2 CA: NODE_EXTRA_CA_CERTS,
	// which adds to Node's own store.
	Extra []byte
	// Bundle is the system roots, the extra roots and the jr2 CA: for the
	// tools whose variable replaces their store (SSL_CERT_FILE,
	// REQUESTS_CA_BUNDLE, GIT_SSL_CAINFO).
	Bundle []byte
	// Upstream is the system roots and the extra roots, never the jr2 CA:
	// what the Custodian verifies a bound target's certificate against.
	Upstream []byte
}

// Bundles builds the trust files from the system roots (PEM, as read by
// SystemRoots), the user's extra roots (PEM, --ca-bundle; may be nil) and
// the CA. Output is deterministic: certificates in input order, each once.
//
// The extra roots must be certificates only; one that is the jr2 CA (same
// public key) is refused, since Upstream must never trust it. A system root
// that is the jr2 CA (a machine that installed it) is left out of Upstream
// and Bundle, and the CA appended to Bundle as usual.
func Bundles(ca *CA, systemPEM, extraPEM []byte) (Trust, error) {
	roots := certsOf(systemPEM)
	if len(roots) == 0 {
		return Trust{}, errors.New("system roots: no certificate found; install the ca-certificates package or point SSL_CERT_FILE at a PEM bundle")
	}
	var extra []*x509.Certificate
	if extraPEM != nil {
		var err error
		if extra, err = ReadCerts(extraPEM); err != nil {
			return Trust{}, fmt.Errorf("--ca-bundle: %v", err)
		}
		for i, c := range extra {
			if sameKey(c, ca.Cert) {
				return Trust{}, fmt.Errorf("--ca-bundle: certificate %d is the jr2 CA; the Custodian must never trust it upstream, so leave it out (render adds it where the Harness needs it)", i+1)
			}
		}
	}
	var kept []*x509.Certificate
	for _, c := range roots {
		if !sameKey(c, ca.Cert) {
			kept = append(kept, c)
		}
	}
	return Trust{
		Extra:    encode(extra, []*x509.Certificate{ca.Cert}),
		Bundle:   encode(kept, extra, []*x509.Certificate{ca.Cert}),
		Upstream: encode(kept, extra),
	}, nil
}

// certsOf reads every PEM CERTIFICATE block of a system bundle that parses,
// skipping anything else (comments, "TRUSTED CERTIFICATE" blocks).
func certsOf(b []byte) []*x509.Certificate {
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			return out
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		if c, err := x509.ParseCertificate(block.Bytes); err == nil {
			out = append(out, c)
		}
	}
}

// CertsFault is what ReadCerts found wrong with a user's PEM bundle.
type CertsFault int

const (
	NotCertificate CertsFault = iota + 1 // a block of another type (a key): Block, Type
	NotParsed                            // a CERTIFICATE block that does not parse: Block
	NoCertificate                        // no PEM block at all
	TrailingText                         // text after the last block that is not PEM
)

// CertsError names the fault and the block (1-based) it is in, never the
// block's bytes; each reader of a bundle words its own fix for it.
type CertsError struct {
	Fault CertsFault
	Block int
	Type  string
}

func (e *CertsError) Error() string {
	switch e.Fault {
	case NotCertificate:
		return fmt.Sprintf("block %d is a %q block; pass certificates only", e.Block, e.Type)
	case NotParsed:
		return fmt.Sprintf("certificate %d does not parse", e.Block)
	case NoCertificate:
		return "no PEM certificate found; pass a PEM file of root certificates"
	}
	return "text after the last PEM block is not PEM; pass a PEM file of root certificates"
}

// ReadCerts reads a user's PEM bundle: at least one block, every block a
// certificate that parses, nothing after the last. A private key or
// anything else is refused by its position and type (a *CertsError),
// never its bytes.
func ReadCerts(b []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for n := 1; ; n++ {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return nil, &CertsError{Fault: NotCertificate, Block: n, Type: block.Type}
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, &CertsError{Fault: NotParsed, Block: n}
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, &CertsError{Fault: NoCertificate}
	}
	if len(bytes.TrimSpace(b)) != 0 {
		return nil, &CertsError{Fault: TrailingText}
	}
	return out, nil
}

func sameKey(a, b *x509.Certificate) bool {
	return bytes.Equal(a.RawSubjectPublicKeyInfo, b.RawSubjectPublicKeyInfo)
}

// encode writes the certificates of each list in order as PEM, each
// distinct certificate once.
func encode(lists ...[]*x509.Certificate) []byte {
	var buf bytes.Buffer
	seen := map[string]bool{}
	for _, l := range lists {
		for _, c := range l {
			if seen[string(c.Raw)] {
				continue
			}
			seen[string(c.Raw)] = true
			pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
		}
	}
	return buf.Bytes()
}
