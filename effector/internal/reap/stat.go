package reap

import (
	"bytes"
	"fmt"
	"strconv"
)

// Proc is what /proc/PID/stat says of one process.
type Proc struct {
	PID   int
	State byte // R, S, D, Z, T, …
	PPID  int
	PGID  int
	SID   int
}

// ParseStat reads the first fields of a /proc/PID/stat line. The command
// name between the parentheses is the process's own choice (prctl
// PR_SET_NAME) and may hold spaces and parentheses, so the fields are read
// after the last ')'.
func ParseStat(b []byte) (Proc, error) {
	open := bytes.IndexByte(b, '(')
	end := bytes.LastIndexByte(b, ')')
	if open < 1 || end < open {
		return Proc{}, fmt.Errorf("proc stat: no (comm) field")
	}
	var p Proc
	var err error
	if p.PID, err = positive(bytes.TrimSpace(b[:open])); err != nil {
		return Proc{}, fmt.Errorf("proc stat: pid: %w", err)
	}
	f := bytes.Fields(b[end+1:])
	if len(f) < 4 || len(f[0]) != 1 {
		return Proc{}, fmt.Errorf("proc stat: %d fields after (comm), want state ppid pgrp session", len(f))
	}
	p.State = f[0][0]
	for i, dst := range []*int{&p.PPID, &p.PGID, &p.SID} {
		// A process being reaped reads "X 0 -1 -1": -1 is its group and
		// session once it is gone, not a malformed line.
		v, err := strconv.Atoi(string(f[i+1]))
		if err != nil || v < -1 {
			return Proc{}, fmt.Errorf("proc stat: field %d: not a pid", i+2)
		}
		*dst = v
	}
	return p, nil
}

func positive(b []byte) (int, error) {
	v, err := strconv.Atoi(string(b))
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("%q is not a positive number", b)
	}
	return v, nil
}
