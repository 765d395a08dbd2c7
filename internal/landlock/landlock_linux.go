//go:build linux

package landlock

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Probe asks the kernel for the newest Landlock ABI it offers
// (landlock_create_ruleset with LANDLOCK_CREATE_RULESET_VERSION). An error
// is an *Error keeping the errno: ENOSYS when the kernel lacks Landlock or
// did not enable it, EOPNOTSUPP when it was disabled at boot.
func Probe() (abi int, err error) {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0, &Error{Op: "probe", Err: errno}
	}
	if int(v) < 1 {
		return 0, &Error{Op: "probe", Err: fmt.Errorf("the kernel answered ABI %d", int(v))}
	}
	return int(v), nil
}

// Ruleset is a kernel Landlock ruleset being filled. It is not safe for
// concurrent use. Close releases it; RestrictSelf does not.
type Ruleset struct {
	fd      int
	abi     int
	handled Access
	scoped  Scope
}

// NewRuleset makes a ruleset that handles every filesystem right of ABI
// versions 1 through abi (FS(abi)) and the scopes asked for that abi offers.
// abi is what Probe returned; a caller that needs a floor (say ABI 2)
// checks it before.
func NewRuleset(abi int, scopes Scope) (*Ruleset, error) {
	if abi < 1 {
		return nil, &Error{Op: "create ruleset", Err: fmt.Errorf("ABI %d: run Probe first; Landlock needs ABI 1 or later", abi)}
	}
	r := &Ruleset{fd: -1, abi: abi, handled: FS(abi), scoped: scopes & Scopes(abi)}
	attr := unix.LandlockRulesetAttr{
		Handled_access_fs: uint64(r.handled),
		Scoped:            uint64(r.scoped),
	}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET,
		uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
	if errno != 0 {
		return nil, &Error{Op: "create ruleset", Err: errno}
	}
	r.fd = int(fd)
	return r, nil
}

// ABI is the version the ruleset was made for.
func (r *Ruleset) ABI() int { return r.abi }

// Handled is the set of filesystem rights the ruleset denies unless a rule
// grants them.
func (r *Ruleset) Handled() Access { return r.handled }

// Scoped is the set of IPC scopes the ruleset applies.
func (r *Ruleset) Scoped() Scope { return r.scoped }

// AddPath grants access beneath path: on everything under it when path is
// a directory, on the file alone otherwise. access is masked to Handled(),
// and to FileRights for a file, and never keeps MakeDevice; a rule left
// with no right is not added.
// A symbolic link is followed: the rule binds to what it names, as the
// kernel resolves it now. It returns the rights granted.
func (r *Ruleset) AddPath(path string, access Access) (Access, error) {
	if r.fd < 0 {
		return 0, &Error{Op: "add rule", Path: path, Err: unix.EBADF}
	}
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, &Error{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, &Error{Op: "open", Path: path, Err: err}
	}
	access &= r.handled &^ MakeDevice
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		access &= FileRights
	}
	if access == 0 {
		return 0, nil
	}
	attr := unix.LandlockPathBeneathAttr{Allowed_access: uint64(access), Parent_fd: int32(fd)}
	_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(r.fd),
		unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&attr)), 0, 0, 0)
	if errno != 0 {
		return 0, &Error{Op: "add rule", Path: path, Err: errno}
	}
	return access, nil
}

// RestrictSelf sets PR_SET_NO_NEW_PRIVS and then restricts the calling
// thread to the ruleset (landlock_restrict_self). It cannot be undone: the
// thread, and every program it executes and their descendants, stay in the
// domain.
//
// The caller must have called runtime.LockOSThread before Probe, must never
// unlock it, and must execve on this same thread: Landlock restricts one
// thread, and another goroutine's thread is not in the domain (other
// goroutines' threads stay unconfined until execve ends them). Rules added
// after RestrictSelf do not change the domain. The use:
//
//	runtime.LockOSThread() // never unlocked: the domain is the thread's
//	abi, err := landlock.Probe()
//	if err != nil { return landlock.Unavailable(node, err) }
//	rs, err := landlock.NewRuleset(abi, landlock.ScopeSignal)
//	if err != nil { … }
//	defer rs.Close()
//	_, err = rs.AddPath("/usr", landlock.ReadExec)
//	_, err = rs.AddPath(scratch, landlock.ReadWrite)
//	err = rs.RestrictSelf()          // NO_NEW_PRIVS, then restrict this thread
//	err = unix.Exec(path, argv, env) // on the same thread
func (r *Ruleset) RestrictSelf() error {
	if r.fd < 0 {
		return &Error{Op: "restrict self", Err: unix.EBADF}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return &Error{Op: "no_new_privs", Err: err}
	}
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(r.fd), 0, 0); errno != 0 {
		return &Error{Op: "restrict self", Err: errno}
	}
	return nil
}

// Close releases the ruleset's descriptor. It is safe to call twice.
func (r *Ruleset) Close() error {
	if r.fd < 0 {
		return nil
	}
	err := unix.Close(r.fd)
	r.fd = -1
	return err
}
