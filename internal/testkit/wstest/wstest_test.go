package wstest

import "testing"

// TestAccept: RFC 6455 section 1.3's example.
func TestAccept(t *testing.T) {
	if got := Accept("dGhlIHNhbXBsZSBub25jZQ=="); got != "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" {
		t.Fatalf("Accept = %q", got)
	}
}
