package wire

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"testing"
)

// TestSigningLinesAsPinned writes the pinned lines by hand, so a change of
// order, a trailing newline or another hash spelling fails here, and checks
// Sign against an HMAC computed apart.
func TestSigningLinesAsPinned(t *testing.T) {
	const emptySHA = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	req := RequestLines("GET", "10.0.0.7:8082", "/effects/e1?x=1", "1760000000000", "n-1_A", nil)
	if want := "jr2-effector-request\nGET\n10.0.0.7:8082\n/effects/e1?x=1\n1760000000000\nn-1_A\n" + emptySHA; req != want {
		t.Errorf("request lines\n%q\nwant\n%q", req, want)
	}
	resp := ResponseLines(202, "POST", "/effects/e1", "n-1_A", []byte("abc"))
	if want := "jr2-effector-response\n202\nPOST\n/effects/e1\nn-1_A\nba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"; resp != want {
		t.Errorf("response lines\n%q\nwant\n%q", resp, want)
	}
	key := []byte("0123456789abcdef0123456789abcdef")
	m := hmac.New(sha256.New, key)
	m.Write([]byte(req))
	want := base64.URLEncoding.EncodeToString(m.Sum(nil))
	want = strings.TrimRight(want, "=")
	if got := Sign(key, req); got != want {
		t.Errorf("Sign = %s, want %s", got, want)
	}
}

func TestVerifyRefuses(t *testing.T) {
	key := []byte("k")
	lines := RequestLines("POST", "10.0.0.7:8082", "/effects/e1", "1", "n", []byte("{}"))
	good := Sign(key, lines)
	for _, c := range []struct {
		name, lines, sig string
		key              []byte
	}{
		{"padded", lines, good + "=", key},
		{"standard alphabet", lines, strings.NewReplacer("-", "+", "_", "/").Replace(good) + "", key},
		{"other key", lines, good, []byte("k2")},
		{"other address", RequestLines("POST", "10.0.0.8:8082", "/effects/e1", "1", "n", []byte("{}")), good, key},
		{"other body", RequestLines("POST", "10.0.0.7:8082", "/effects/e1", "1", "n", []byte("{ }")), good, key},
		{"empty", lines, "", key},
		{"short", lines, good[:20], key},
		{"trailing newline", lines + "\n", good, key},
	} {
		if c.name == "standard alphabet" && !strings.ContainsAny(good, "-_") {
			continue // this signature has no character the alphabets spell apart
		}
		if Verify(c.key, c.lines, c.sig) {
			t.Errorf("%s: verified", c.name)
		}
	}
	if !Verify(key, lines, good) {
		t.Error("the good signature does not verify")
	}
}

func TestParseTimeAndWords(t *testing.T) {
	for s, ok := range map[string]bool{"1760000000000": true, "0": true, "": false, "01": false, "+1": false, "-1": false,
		"1.5": false, " 1": false, "12345678901234567": false, "1234567890123456": true} {
		if _, got := ParseTime(s); got != ok {
			t.Errorf("ParseTime(%q) ok=%v, want %v", s, got, ok)
		}
	}
	for s, ok := range map[string]bool{"a": true, strings.Repeat("a", 64): true, strings.Repeat("a", 65): false, "": false,
		"a.b": false, "a/b": false, "A-z_0": true} {
		if got := ValidNonce(s); got != ok {
			t.Errorf("ValidNonce(%q) = %v", s, got)
		}
	}
	for s, ok := range map[string]bool{"a.b": true, "..": true, strings.Repeat("a", 128): true, strings.Repeat("a", 129): false,
		"a/b": false, "a%2f": false, "": false} {
		if got := ValidID(s); got != ok {
			t.Errorf("ValidID(%q) = %v", s, got)
		}
	}
}
