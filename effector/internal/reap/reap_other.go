//go:build !linux

package reap

import (
	"errors"
	"os/exec"
)

var errLinux = errors.New("reap: the subreaper and /proc are Linux-only")

// SetChildSubreaper fails outside Linux.
func SetChildSubreaper() error { return errLinux }

// Children fails outside Linux.
func Children(parent int) ([]Proc, error) { return nil, errLinux }

// KillAndReapAll fails outside Linux.
func KillAndReapAll() error { return errLinux }

// Settle fails outside Linux.
func Settle(groups []int, live func(pgid int) bool) error { return errLinux }

// Tracker fails every Start outside Linux.
type Tracker struct{}

// NewTracker returns a Tracker that starts nothing.
func NewTracker() *Tracker { return &Tracker{} }

// Start fails outside Linux.
func (t *Tracker) Start(effect string, cmd *exec.Cmd) error { return errLinux }

// Wait fails outside Linux.
func (t *Tracker) Wait(cmd *exec.Cmd) error { return errLinux }

// Groups is empty outside Linux.
func (t *Tracker) Groups(effect string) []int { return nil }

// Live is false outside Linux.
func (t *Tracker) Live(pgid int) bool { return false }

// Settle fails outside Linux.
func (t *Tracker) Settle(effect string) error { return errLinux }
