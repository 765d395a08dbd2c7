package landlock

import (
	"errors"
	"fmt"
	"syscall"
	"testing"
)

// The table must stay ordered: versions 1, 2, 3, … with no gap, no version
// re-adding a right or scope an older one added, and so every version's
// folded set a superset of the one before.
func TestABITableOrdered(t *testing.T) {
	var seenFS Access
	var seenScopes Scope
	for i, v := range ABIs {
		if v.Version != i+1 {
			t.Fatalf("ABIs[%d].Version = %d, want %d", i, v.Version, i+1)
		}
		if v.FS&seenFS != 0 {
			t.Errorf("ABI %d re-adds %v", v.Version, v.FS&seenFS)
		}
		if v.Scopes&seenScopes != 0 {
			t.Errorf("ABI %d re-adds scopes %b", v.Version, v.Scopes&seenScopes)
		}
		seenFS |= v.FS
		seenScopes |= v.Scopes
		if FS(v.Version) != seenFS {
			t.Errorf("FS(%d) = %v, want %v", v.Version, FS(v.Version), seenFS)
		}
		if Scopes(v.Version) != seenScopes {
			t.Errorf("Scopes(%d) = %b, want %b", v.Version, Scopes(v.Version), seenScopes)
		}
		if v.Version > 1 && FS(v.Version)&FS(v.Version-1) != FS(v.Version-1) {
			t.Errorf("FS(%d) is not a superset of FS(%d)", v.Version, v.Version-1)
		}
		if v.Note == "" {
			t.Errorf("ABI %d has no note", v.Version)
		}
	}
}

func TestFoldEdges(t *testing.T) {
	tests := []struct {
		abi  int
		want Access
	}{
		{-1, 0},
		{0, 0},
		{1, 0x1fff},
		{2, 0x3fff},
		{3, 0x7fff},
		{4, 0x7fff},
		{5, 0xffff},
		{7, 0xffff},
		{9, 0x1ffff},
		{LastABI() + 5, FS(LastABI())},
	}
	for _, tt := range tests {
		if got := FS(tt.abi); got != tt.want {
			t.Errorf("FS(%d) = %#x, want %#x", tt.abi, got, tt.want)
		}
	}
	if Scopes(5) != 0 || Scopes(6) != ScopeAbstractUnix|ScopeSignal {
		t.Errorf("Scopes(5) = %b, Scopes(6) = %b", Scopes(5), Scopes(6))
	}
}

func TestNamedSets(t *testing.T) {
	if want := FS(LastABI()) &^ MakeDevice; ReadWrite != want {
		t.Errorf("ReadWrite = %v, want every right the table knows but making a device: %v", ReadWrite, want)
	}
	if MakeDevice != MakeChar|MakeBlock || ReadWrite&MakeDevice != 0 {
		t.Errorf("MakeDevice = %v, ReadWrite holds %v of it", MakeDevice, ReadWrite&MakeDevice)
	}
	if ReadExec&^FS(1) != 0 {
		t.Errorf("ReadExec needs more than ABI 1: %v", ReadExec&^FS(1))
	}
	if FileRights&^ReadWrite != 0 {
		t.Errorf("FileRights has rights outside the table: %v", FileRights&^ReadWrite)
	}
	if got := (ReadExec | Truncate).String(); got != "execute|read_file|read_dir|truncate" {
		t.Errorf("String = %q", got)
	}
	if got := Access(0).String(); got != "none" {
		t.Errorf("String(0) = %q", got)
	}
}

func TestExplain(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{syscall.ENOSYS, "ENOSYS: not supported by kernel or not enabled at boot time"},
		{syscall.EOPNOTSUPP, "EOPNOTSUPP: disabled at boot time"},
		{fmt.Errorf("wrapped: %w", syscall.EACCES), "EACCES: permission denied"},
		{errors.New("plain"), "plain"},
	}
	for _, tt := range tests {
		if got := Explain(tt.err); got != tt.want {
			t.Errorf("Explain(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
	e := &Error{Op: "probe", Err: syscall.ENOSYS}
	if !errors.Is(e, syscall.ENOSYS) {
		t.Error("Error does not keep its errno")
	}
	if got := e.Error(); got != "landlock: probe: ENOSYS: not supported by kernel or not enabled at boot time" {
		t.Errorf("Error() = %q", got)
	}
	if got := Unavailable("", syscall.EOPNOTSUPP); got != "landlock: unavailable on node unknown (EOPNOTSUPP: disabled at boot time)" {
		t.Errorf("Unavailable = %q", got)
	}
}
