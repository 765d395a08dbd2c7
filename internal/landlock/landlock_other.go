//go:build !linux

package landlock

// Probe fails: Landlock is Linux-only.
func Probe() (abi int, err error) {
	return 0, &Error{Op: "probe", Err: ErrUnsupported}
}

// Ruleset cannot be made outside Linux.
type Ruleset struct{}

// NewRuleset fails: Landlock is Linux-only.
func NewRuleset(abi int, scopes Scope) (*Ruleset, error) {
	return nil, &Error{Op: "create ruleset", Err: ErrUnsupported}
}

// ABI is 0.
func (r *Ruleset) ABI() int { return 0 }

// Handled is empty.
func (r *Ruleset) Handled() Access { return 0 }

// Scoped is empty.
func (r *Ruleset) Scoped() Scope { return 0 }

// AddPath fails: Landlock is Linux-only.
func (r *Ruleset) AddPath(path string, access Access) (Access, error) {
	return 0, &Error{Op: "add rule", Path: path, Err: ErrUnsupported}
}

// RestrictSelf fails: Landlock is Linux-only.
func (r *Ruleset) RestrictSelf() error {
	return &Error{Op: "restrict self", Err: ErrUnsupported}
}

// Close does nothing.
func (r *Ruleset) Close() error { return nil }
