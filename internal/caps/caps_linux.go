//go:build linux

package caps

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Drop empties the calling thread's capability sets and sets NO_NEW_PRIVS
// (see the package doc for what it leaves), but for the capabilities in
// keep that the thread holds (permitted): those stay in every set a
// program executed next needs to keep them (permitted, effective,
// inheritable, ambient, bounding — so they survive execve, as root and as
// another uid through the ambient set), and are the only ones left. On an
// error the thread must not execute the program.
//
// NO_NEW_PRIVS keeps execve from raising the euid or the permitted set
// past the (empty) one the thread had, and the empty bounding set would
// cap them even without it; DAC checks apply as owner, never overridden.
//
// The order: NO_NEW_PRIVS first (it cannot be undone and needs nothing);
// then the ambient set; then CAP_SETPCAP is raised into the effective set
// when it is only permitted, and the bounding set is emptied one
// capability at a time, which needs it; then permitted, effective and
// inheritable at once. The other way round, an empty permitted set would
// strand the bounding set full. Last, the sets are read back: Drop fails
// unless they are empty and NO_NEW_PRIVS is set.
func Drop(keep ...int) error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("set no_new_privs: %w", err)
	}
	// EINVAL: a kernel older than ambient capabilities (4.3) has none.
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("clear the ambient set: %w", err)
	}
	s, err := get()
	if err != nil {
		return err
	}
	var kept set
	for _, c := range keep {
		if c >= 0 && c < 64 && s.permitted().has(c) {
			kept |= 1 << c
		}
	}
	bounding := s.permitted().has(unix.CAP_SETPCAP)
	if bounding {
		if !s.effective().has(unix.CAP_SETPCAP) {
			s.put(s.permitted(), s.effective()|1<<unix.CAP_SETPCAP, s.inheritable())
			if err := s.set(); err != nil {
				return fmt.Errorf("raise CAP_SETPCAP to empty the bounding set: %w", err)
			}
		}
		if err := dropBounding(kept); err != nil {
			return err
		}
	}
	s.put(kept, kept, kept)
	if err := s.set(); err != nil {
		return fmt.Errorf("empty the permitted, effective and inheritable sets: %w", err)
	}
	for c := range 64 {
		if kept.has(c) {
			if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_RAISE, uintptr(c), 0, 0); err != nil {
				return fmt.Errorf("keep capability %d in the ambient set: %w", c, err)
			}
		}
	}
	return check(bounding, kept)
}

// dropBounding drops every capability the kernel knows but kept from the
// bounding set; PR_CAPBSET_DROP answers EINVAL past the last one.
func dropBounding(kept set) error {
	for c := 0; ; c++ {
		if kept.has(c) {
			continue
		}
		err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0)
		if errors.Is(err, unix.EINVAL) {
			if c == 0 {
				return errors.New("empty the bounding set: the kernel knows no capability to drop")
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("drop capability %d from the bounding set: %w", c, err)
		}
	}
}

// check reads the sets back: each one kept exactly (the bounding set no
// more than kept when it was to be emptied), and NO_NEW_PRIVS set.
func check(bounding bool, kept set) error {
	s, err := get()
	if err != nil {
		return err
	}
	if s.permitted() != kept || s.effective() != kept || s.inheritable() != kept {
		return fmt.Errorf("capabilities left after capset (effective %#x, permitted %#x, inheritable %#x; kept %#x)",
			uint64(s.effective()), uint64(s.permitted()), uint64(s.inheritable()), uint64(kept))
	}
	for c := 0; ; c++ {
		in, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, uintptr(c), 0, 0, 0)
		if errors.Is(err, unix.EINVAL) {
			break
		}
		if err != nil {
			return fmt.Errorf("read the bounding set: %w", err)
		}
		if bounding && in != 0 && !kept.has(c) {
			return fmt.Errorf("capability %d left in the bounding set", c)
		}
		amb, err := unix.PrctlRetInt(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_IS_SET, uintptr(c), 0, 0)
		if err == nil && (amb != 0) != kept.has(c) {
			return fmt.Errorf("capability %d: in the ambient set %d, kept %v", c, amb, kept.has(c))
		}
	}
	if v, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0); err != nil || v != 1 {
		return fmt.Errorf("no_new_privs not set (%d, %v)", v, err)
	}
	return nil
}

// set is a capability set, bit c for capability c.
type set uint64

func (s set) has(c int) bool { return c >= 0 && c < 64 && s&(1<<c) != 0 }

// sets is the thread's capability sets, as capget and capset read and
// write them (version 3: two 32-bit words per set).
type sets struct {
	hdr  unix.CapUserHeader
	data [2]unix.CapUserData
}

func get() (*sets, error) {
	s := &sets{hdr: unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}}
	if err := unix.Capget(&s.hdr, &s.data[0]); err != nil {
		return nil, fmt.Errorf("capget: %w", err)
	}
	return s, nil
}

func (s *sets) set() error {
	s.hdr = unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	if err := unix.Capset(&s.hdr, &s.data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}

func join(lo, hi uint32) set { return set(lo) | set(hi)<<32 }

func (s *sets) permitted() set   { return join(s.data[0].Permitted, s.data[1].Permitted) }
func (s *sets) effective() set   { return join(s.data[0].Effective, s.data[1].Effective) }
func (s *sets) inheritable() set { return join(s.data[0].Inheritable, s.data[1].Inheritable) }

func (s *sets) put(permitted, effective, inheritable set) {
	for i := range s.data {
		shift := 32 * i
		s.data[i] = unix.CapUserData{
			Permitted:   uint32(permitted >> shift),
			Effective:   uint32(effective >> shift),
			Inheritable: uint32(inheritable >> shift),
		}
	}
}

// Effective reports whether the calling thread holds capability c in its
// effective set (c is a unix.CAP_* number).
func Effective(c int) (bool, error) {
	s, err := get()
	if err != nil {
		return false, err
	}
	return s.effective().has(c), nil
}
