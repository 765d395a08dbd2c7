//go:build !linux

package run

import "errors"

const (
	capSysAdmin = 21
	capNetAdmin = 12
)

// privileged fails outside Linux: a contained run is Linux's.
func privileged() error { return errors.New("custodian run: Linux only") }
