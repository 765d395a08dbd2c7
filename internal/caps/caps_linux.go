//go:build linux

package caps

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Drop empties the calling thread's capability sets and sets NO_NEW_PRIVS
// (see the package doc for the order and what it leaves). It returns the
// step that failed; on an error the thread must not execute the program.
func Drop() error {
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
	bounding := s.permitted(unix.CAP_SETPCAP)
	if bounding {
		if !s.effective(unix.CAP_SETPCAP) {
			s.data[0].Effective |= 1 << unix.CAP_SETPCAP
			if err := s.set(); err != nil {
				return fmt.Errorf("raise CAP_SETPCAP to empty the bounding set: %w", err)
			}
		}
		if err := dropBounding(); err != nil {
			return err
		}
	}
	s.data = [2]unix.CapUserData{}
	if err := s.set(); err != nil {
		return fmt.Errorf("empty the permitted, effective and inheritable sets: %w", err)
	}
	return check(bounding)
}

// dropBounding drops every capability the kernel knows from the bounding
// set; PR_CAPBSET_DROP answers EINVAL past the last one.
func dropBounding() error {
	for c := 0; ; c++ {
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

// check reads the sets back: every one empty, the bounding set too when
// it was to be emptied (bounding), and NO_NEW_PRIVS set.
func check(bounding bool) error {
	s, err := get()
	if err != nil {
		return err
	}
	for i, d := range s.data {
		if d.Effective|d.Permitted|d.Inheritable != 0 {
			return fmt.Errorf("capabilities left after capset (word %d: effective %#x, permitted %#x, inheritable %#x)", i, d.Effective, d.Permitted, d.Inheritable)
		}
	}
	for c := 0; ; c++ {
		in, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, uintptr(c), 0, 0, 0)
		if errors.Is(err, unix.EINVAL) {
			break
		}
		if err != nil {
			return fmt.Errorf("read the bounding set: %w", err)
		}
		if bounding && in != 0 {
			return fmt.Errorf("capability %d left in the bounding set", c)
		}
		amb, err := unix.PrctlRetInt(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_IS_SET, uintptr(c), 0, 0)
		if err == nil && amb != 0 {
			return fmt.Errorf("capability %d left in the ambient set", c)
		}
	}
	if v, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0); err != nil || v != 1 {
		return fmt.Errorf("no_new_privs not set (%d, %v)", v, err)
	}
	return nil
}

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

func (s *sets) permitted(c int) bool { return s.data[c/32].Permitted&(1<<(c%32)) != 0 }
func (s *sets) effective(c int) bool { return s.data[c/32].Effective&(1<<(c%32)) != 0 }
