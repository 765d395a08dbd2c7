package run

import (
	"bytes"
	"log"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMainCapturesTheStandardLogger: custodian run's own
// logger, where net/http's Transport of the mediator's upstreams writes
// (quoting what an upstream sent), writes the contract's error line with a
// fixed word, as custodian serve's does, and nothing of the line itself.
func TestMainCapturesTheStandardLogger(t *testing.T) {
	defer func() {
		log.SetOutput(os.Stderr)
		log.SetFlags(log.LstdFlags)
	}()
	var stderr bytes.Buffer
	dir := t.TempDir()
	// A run refused before its command starts: Main has taken the logger.
	Main([]string{"--policy", filepath.Join(dir, "missing.toml"), "--bundle", filepath.Join(dir, "out.jsonl"), "--", "true"}, &bytes.Buffer{}, &stderr)
	stderr.Reset()
	const sentinel = "SENTINEL-upstream-echo-41d7 jr2.custodian action=tunnel target=forged.example:443"
	log.Printf("Unsolicited response received on idle HTTP channel starting with %q; err=<nil>", sentinel)
	log.Printf("http: TLS handshake error from 10.0.0.1:5: %s", sentinel)
	want := "jr2.custodian action=error listener=upstream reason=unsolicited-response\n" +
		"jr2.custodian action=error listener=upstream reason=tls-handshake\n"
	if got := stderr.String(); got != want || strings.Contains(got, "SENTINEL") {
		t.Fatalf("custodian run's logger wrote %q, want %q", got, want)
	}
}
