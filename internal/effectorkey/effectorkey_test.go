package effectorkey

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDerive(t *testing.T) {
	// The derivation written out with the standard library, independently.
	m := hmac.New(sha256.New, []byte("signing-key-bytes"))
	m.Write([]byte("effector:instance"))
	want := hex.EncodeToString(m.Sum(nil))
	if got := Hex([]byte("signing-key-bytes"), "instance"); got != want {
		t.Fatalf("Hex = %s, want %s", got, want)
	}
	if Hex([]byte("k"), "a") == Hex([]byte("k"), "b") {
		t.Fatal("two placements share a key")
	}
}

func TestTrimNewline(t *testing.T) {
	for in, want := range map[string]string{
		"abc\n": "abc", "abc\r\n": "abc", "abc": "abc", "abc\n\n": "abc\n", "abc\r": "abc\r", "\n": "", "": "",
	} {
		if got := string(TrimNewline([]byte(in))); got != want {
			t.Errorf("TrimNewline(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestReadSigningKey(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "key")
	os.WriteFile(p, []byte("sekrit-SENTINEL\r\n"), 0o600)
	k, err := ReadSigningKey(p)
	if err != nil || string(k) != "sekrit-SENTINEL" {
		t.Fatalf("%q %v", k, err)
	}
	os.WriteFile(p, []byte("\n"), 0o600)
	if _, err := ReadSigningKey(p); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Fatalf("empty key: %v", err)
	}
}

func TestParseHexKey(t *testing.T) {
	good := strings.Repeat("ab", 32)
	if k, err := ParseHexKey([]byte(good + "\n")); err != nil || len(k) != 32 {
		t.Fatalf("%v", err)
	}
	for _, bad := range []string{strings.ToUpper(good), good[:62], good + "00", strings.Repeat("zz", 32)} {
		_, err := ParseHexKey([]byte(bad))
		if err == nil {
			t.Errorf("accepted %q", bad)
		} else if strings.Contains(err.Error(), bad) {
			t.Errorf("error holds the key: %v", err)
		}
	}
}
