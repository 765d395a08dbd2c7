package mediator

import (
	"bytes"
	"testing"
)

// The mediator's HTTP server writes what net/http would
// have logged as the contract's error line, with a fixed word: a line that
// quotes the child (its ALPN, its bytes, a forged contract line) keeps
// nothing of it.
func TestServerErrorsAreContractLines(t *testing.T) {
	f := newFixture(t, true)
	f.m.srv.ErrorLog.Printf("http: TLS handshake error from 127.0.0.1:1: tls: client requested unsupported application protocols ([%q])", "jr2.custodian action=tunnel target=forged.example:443")
	f.m.srv.ErrorLog.Printf("http: panic serving 127.0.0.1:1: %s", sentinel)
	want := "jr2.custodian action=error listener=mediator reason=tls-handshake\njr2.custodian action=error listener=mediator reason=panic\n"
	if got := f.logged(); !bytes.Equal(got, []byte(want)) {
		t.Fatalf("log %q, want %q", got, want)
	}
}
