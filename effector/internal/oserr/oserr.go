// Package oserr words a file error by its cause alone.
//
// Invariant: the text never holds the path the error names (an *fs.PathError
// carries it): the Effector's reasons and exit lines name env variables and
// fields, never a path.
package oserr

import (
	"errors"
	"io/fs"
)

// Why is err's cause without its path: "no such file", "permission denied",
// or the underlying error's own words.
func Why(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "no such file"
	case errors.Is(err, fs.ErrPermission):
		return "permission denied"
	}
	return err.Error()
}
