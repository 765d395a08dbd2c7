package main

import (
	"bytes"
	"testing"

	"jr2.dev/boundary/internal/usagetest"
)

// TestUsage: the usage names every flag the command defines and no other,
// --help prints it on stdout and exits 0, and a run without its flags is a
// usage error.
func TestUsage(t *testing.T) {
	fs, _, _ := flags()
	// The flag list, not the prose (which names controlplane's --ca-bundle).
	usagetest.Check(t, "example-upstream", usagetest.Section(t, usage, "  --listen", ""), usagetest.Defined(fs))
	var stdout, stderr bytes.Buffer
	if code := run([]string{"--help"}, &stdout, &stderr); code != 0 || stdout.String() != usage || stderr.Len() != 0 {
		t.Errorf("--help: exit %d, stdout %q, stderr %q; want the usage on stdout", code, stdout.String(), stderr.String())
	}
	stdout.Reset()
	if code := run(nil, &stdout, &stderr); code != 2 {
		t.Errorf("no flags: exit %d, want 2", code)
	}
}
