//go:build linux

package run

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"jr2.dev/boundary/internal/bundle"
)

// TestRefusedBeforeStartWritesNoBundle: a run refused once the namespaces
// are made, before its command started (the contained child's setup
// fails: the program does not exist), writes no bundle and says so; the
// same command line with a command that exists then runs, and its bundle
// verifies. Before the fix the refusal left a sealed
// bundle and the second run failed on "file exists".
func TestRefusedBeforeStartWritesNoBundle(t *testing.T) {
	requireRun(t)
	pol := writePolicy(t, nil, nil, []string{"/dev/null"}, "")
	bundlePath := filepath.Join(t.TempDir(), "run.jsonl")
	for _, tc := range []struct {
		name   string
		argv   []string
		code   int
		stderr string // in stderr; "" for none
		bundle bool
	}{
		{"no such program", []string{"/nonexistent-jr2-program"}, -1, "the command did not start, and no bundle was written", false},
		{"the same line, fixed", []string{"true"}, 0, "custodian run: the bundle's key is ed25519:", true},
	} {
		var stdout, stderr bytes.Buffer
		code := Main(append([]string{"--policy", pol, "--bundle", bundlePath, "--"}, tc.argv...), &stdout, &stderr)
		if tc.code >= 0 && code != tc.code || tc.code < 0 && (code < 110 || code > 127) {
			t.Errorf("%s: exit %d; want %d (-1: 110-127); stderr %q", tc.name, code, tc.code, stderr.String())
		}
		if tc.stderr != "" && !strings.Contains(stderr.String(), tc.stderr) || tc.stderr == "" && stderr.Len() != 0 {
			t.Errorf("%s: stderr %q; want %q", tc.name, stderr.String(), tc.stderr)
		}
		_, err := os.Stat(bundlePath)
		if exists := err == nil; exists != tc.bundle {
			t.Fatalf("%s: the bundle exists: %v; want %v", tc.name, exists, tc.bundle)
		}
	}
	v, err := bundle.Verify(bundlePath)
	if err != nil || v.ExitCode() != 0 {
		t.Errorf("the run's bundle: %v, %v; want VERIFIED", v, err)
	}
}
