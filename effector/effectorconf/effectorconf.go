// Package effectorconf is the Effector's own effector.json parser, for
// code outside effector/ (controlplane renders the Effector's Kubernetes
// objects from it): one parser, so a file the control plane accepts is one
// the Effector starts with.
//
// Invariant: effector.json holds no value — names of secrets only — and so
// does File.
package effectorconf

import "jr2.dev/boundary/effector/internal/config"

// File is a checked effector.json.
type File struct {
	Placement string
	Commands  bool
	// Secrets are the names the targets may use, each once, in the order
	// first named.
	Secrets []string
	// Pushes are the Repo Slots it pushes.
	Pushes []string
}

// Parse reads effector.json with the Effector's own checks; an error names
// the field and the fix.
func Parse(b []byte) (*File, error) {
	c, err := config.ParseFile(b)
	if err != nil {
		return nil, err
	}
	f := &File{Placement: c.Placement, Commands: c.Commands}
	seen := map[string]bool{}
	for _, t := range c.Targets {
		for _, s := range t.Secrets {
			if !seen[s] {
				seen[s] = true
				f.Secrets = append(f.Secrets, s)
			}
		}
	}
	for _, p := range c.Pushes {
		f.Pushes = append(f.Pushes, p.Slot)
	}
	return f, nil
}
