// Package keep is `effector keep`: a keeper between the Effector and the
// confiner, so that nothing a credentialed command's child leaves behind
// outlives it, and its own end is still read.
//
//	effector keep --report-fd 3 -- effector confine … -- ARGV
//
// Invariant: when the keeper reports, every process it was the parent of
// — the child, and every descendant orphaned to it — has been killed and
// reaped; the report is written on a descriptor the child never held, so the
// child cannot forge its own end. Main says how.
//
// Not covered: SIGKILL to the keeper ends the keeper alone; what it held is
// reparented to the Effector, whose settle loop (package reap) ends it.
package keep

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Report is the child's own end, as the keeper writes it: one line,
// "exited code=N", "exited signal=SIGNAME", or "failed REASON" when the
// child could not be started or its end could not be read.
type Report struct {
	Code   int    // the exit code; -1 when a signal ended the child or it did not start
	Signal string // the signal's name (SIGTERM) when one ended the child
	Failed string // why the child did not start
}

// String renders r as the report line, without the newline.
func (r Report) String() string {
	switch {
	case r.Failed != "":
		return "failed " + strings.NewReplacer("\n", " ", "\r", " ").Replace(r.Failed)
	case r.Signal != "":
		return "exited signal=" + r.Signal
	default:
		return "exited code=" + strconv.Itoa(r.Code)
	}
}

// ParseReport reads a report line (one trailing newline allowed). An empty
// line means the keeper ended without reporting (it was killed).
func ParseReport(line string) (Report, error) {
	line = strings.TrimSuffix(line, "\n")
	if strings.ContainsAny(line, "\r\n") {
		return Report{}, errors.New("keep: a report is one line")
	}
	if reason, ok := strings.CutPrefix(line, "failed "); ok && reason != "" {
		return Report{Code: -1, Failed: reason}, nil
	}
	if v, ok := strings.CutPrefix(line, "exited code="); ok {
		code, err := strconv.Atoi(v)
		if err != nil || code < 0 || code > 255 || strconv.Itoa(code) != v {
			return Report{}, fmt.Errorf("keep: report %q: the code is not 0-255", line)
		}
		return Report{Code: code}, nil
	}
	if v, ok := strings.CutPrefix(line, "exited signal="); ok {
		if !signalName(v) {
			return Report{}, fmt.Errorf("keep: report %q: not a signal name", line)
		}
		return Report{Code: -1, Signal: v}, nil
	}
	if line == "" {
		return Report{}, errors.New("keep: no report: the keeper ended before its child's end was known")
	}
	return Report{}, fmt.Errorf("keep: report %q: want exited code=N, exited signal=NAME or failed REASON", line)
}

// signalName: "SIG" and upper-case letters or digits (SIGTERM, SIG34).
func signalName(s string) bool {
	rest, ok := strings.CutPrefix(s, "SIG")
	if !ok || rest == "" {
		return false
	}
	for _, c := range rest {
		if (c < 'A' || c > 'Z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}
