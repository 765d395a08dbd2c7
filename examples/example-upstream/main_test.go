package main

import (
	"bytes"
	"net"
	"path/filepath"
	"testing"

	"jr2.dev/boundary/internal/testkit/usagetest"
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

// TestAddressInUse: a --listen address another process holds is refused
// with the flag that moves it and what may hold it (net/http's "address
// already in use" names neither).
func TestAddressInUse(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	var stdout, stderr bytes.Buffer
	code := run([]string{"--listen", held.Addr().String(), "--ca-out", filepath.Join(t.TempDir(), "ca.pem")}, &stdout, &stderr)
	want := "example-upstream: the upstream's listener: listen tcp " + held.Addr().String() + ": bind: address already in use; something else listens there (another example-upstream may be running): stop it, or move this listener with --listen HOST:PORT\n"
	if code != 1 || stderr.String() != want {
		t.Errorf("exit %d\n got: %q\nwant: %q", code, stderr.String(), want)
	}
}
