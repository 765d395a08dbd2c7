package listenerr_test

import (
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"

	"jr2.dev/boundary/internal/listenerr"
)

// TestWrapNamesTheFix: a real address in use is named with the listener,
// the flag that moves it and what may be holding it, and the errno stays
// reachable; nil stays nil.
func TestWrapNamesTheFix(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	_, err = net.Listen("tcp", held.Addr().String())
	got := listenerr.Wrap(err, "control listener", "--control ADDR", "another custodian serve")
	want := "control listener: listen tcp " + held.Addr().String() + ": bind: address already in use; something else listens there (another custodian serve may be running): stop it, or move this listener with --control ADDR"
	if got == nil || got.Error() != want {
		t.Errorf("got  %v\nwant %s", got, want)
	}
	if !errors.Is(got, syscall.EADDRINUSE) {
		t.Error("the wrapped error lost EADDRINUSE")
	}
	if listenerr.Wrap(nil, "x", "y", "z") != nil {
		t.Error("Wrap(nil) is not nil")
	}
	_, err = net.Listen("tcp", "192.0.2.1:0") // TEST-NET-1: on no interface here
	if got := listenerr.Wrap(err, "health listener", "--health ADDR", "x"); err == nil || !strings.HasSuffix(got.Error(), "; the address is not one of this machine's: move this listener with --health ADDR") {
		t.Errorf("an address not here: %v", got)
	}
}
