package envoybin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseVersion(t *testing.T) {
	for _, tc := range []struct {
		out, want, err string
	}{
		{"/x/envoy  version: 6eb0d2d97489ec1b4e1584a004f5de443d97a41b/1.39.3/Clean/RELEASE/BoringSSL\n", "1.39.3", ""},
		{"envoy  version: abc/1.40.0/Modified/DEBUG/BoringSSL-FIPS", "1.40.0", ""},
		{"", "", "printed no version line"},
		{"envoy version: abc", "", "printed no version line"},
		{"hello world", "", "printed no version line"},
	} {
		got, err := parseVersion(tc.out)
		if got != tc.want || (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%q: %q, %v; want %q, %q", tc.out, got, err, tc.want, tc.err)
		}
	}
}

// TestFindRefusesAnotherVersion: an Envoy that reports another release is
// refused with the fix, by a fake binary that prints that line.
func TestFindRefusesAnotherVersion(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "envoy")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho \"$0  version: abc/1.38.0/Clean/RELEASE/BoringSSL\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ENVOY_BIN", bin)
	_, err := Find()
	if err == nil || !strings.Contains(err.Error(), "is Envoy 1.38.0; the tests are pinned to "+Pinned) || !strings.Contains(err.Error(), Install) {
		t.Fatalf("Find: %v", err)
	}
}

// TestFindPinned: the Envoy this machine has is the pinned one (or there
// is none, and a run without Envoy says so loudly).
func TestFindPinned(t *testing.T) {
	bin, err := Find()
	if err == ErrNone && os.Getenv("JR2_E2E_HOST") == "serve" {
		t.Skip("NOT RUN: no Envoy, and JR2_E2E_HOST=serve says so on purpose")
	}
	if err != nil {
		t.Fatal(err)
	}
	if v, err := Version(bin); err != nil || v != Pinned {
		t.Fatalf("%s: %q %v", bin, v, err)
	}
}

// TestFindCached: without ENVOY_BIN, the Envoy make test installed into
// .cache/ of a directory above the working one is found first.
func TestFindCached(t *testing.T) {
	root := t.TempDir()
	bin := filepath.Join(root, ".cache", "envoy-"+Pinned, "envoy")
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho \"$0  version: abc/"+Pinned+"/Clean/RELEASE/BoringSSL\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(root, "e2e")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(sub)
	t.Setenv("ENVOY_BIN", "")
	if got, err := Find(); err != nil || got != bin {
		t.Fatalf("Find: %q, %v; want %s", got, err, bin)
	}
}
