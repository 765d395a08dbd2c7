package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"jr2.dev/boundary/effector/internal/oserr"
	"jr2.dev/boundary/effector/internal/wire"
	"jr2.dev/boundary/internal/effectorkey"
	sj "jr2.dev/boundary/internal/strictjson"
	"jr2.dev/boundary/internal/valuedir"
)

// Secret is one held value.
type Secret struct {
	Name  string
	Value []byte
}

// Secret returns the value held under name.
func (c *Config) Secret(name string) ([]byte, bool) {
	i := sort.Search(len(c.Secrets), func(i int) bool { return c.Secrets[i].Name >= name })
	if i < len(c.Secrets) && c.Secrets[i].Name == name {
		return c.Secrets[i].Value, true
	}
	return nil, false
}

// SecretNames lists the held names, sorted.
func (c *Config) SecretNames() []string {
	names := make([]string, len(c.Secrets))
	for i, s := range c.Secrets {
		names[i] = s.Name
	}
	return names
}

// loadSecrets reads every secret file in dir. A Kubernetes Secret volume
// holds each key as a link into a "..data" directory; names that begin with
// "." and directories (a push's "@git") are not secrets.
func loadSecrets(dir string) ([]Secret, error) {
	if dir == "" {
		return nil, nil
	}
	entries, err := volumeEntries(dir, EnvSecrets, "mount the secrets directory where it points")
	if err != nil {
		return nil, err
	}
	var out []Secret
	for _, e := range entries {
		if e.dir {
			continue
		}
		if !wire.ValidSecretName(e.name) || e.name == KeyLabel {
			return nil, fmt.Errorf("%s: %s cannot name a secret; use 1–253 of A-Z a-z 0-9 . _ - (and not %q)", EnvSecrets, sj.Quote(e.name), KeyLabel)
		}
		v, _, err := readSecret(dir, e.name)
		if err != nil {
			return nil, err
		}
		out = append(out, Secret{Name: e.name, Value: v})
	}
	return out, nil
}

// volumeEntry is one name of a mounted volume's directory, as its link
// (a projected volume's "..data" link, followed) resolves.
type volumeEntry struct {
	name string
	dir  bool
}

// volumeEntries lists dir, the directory env points at, as a Kubernetes
// volume holds it: names that begin with "." are the volume's own (its
// "..data" and timestamped directories) and are left out; every other name
// is followed through its link. In name order; an error names env, and
// fix when dir itself cannot be read.
func volumeEntries(dir, env, fix string) ([]volumeEntry, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %s; %s", env, oserr.Why(err), fix)
	}
	var out []volumeEntry
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %s", env, sj.Quote(name), oserr.Why(err))
		}
		out = append(out, volumeEntry{name: name, dir: st.IsDir()})
	}
	return out, nil // os.ReadDir's order: by name
}

// readSecret reads the secret name of dir (through links, as a Secret
// volume holds it) under the rules of the start, and returns its value, or
// the rule's word (filter's Rule words) and the error naming the secret.
func readSecret(dir, name string) ([]byte, string, error) {
	full := filepath.Join(dir, name)
	st, err := os.Stat(full)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, valuedir.RuleMissing, fmt.Errorf("%s: secret %s: its file is gone; project it there again", EnvSecrets, name)
	}
	if err != nil {
		return nil, valuedir.RuleUnreadable, fmt.Errorf("%s: secret %s: %s", EnvSecrets, sj.Quote(name), oserr.Why(err))
	}
	if !st.Mode().IsRegular() {
		return nil, valuedir.RuleUnreadable, fmt.Errorf("%s: secret %s is not a regular file", EnvSecrets, name)
	}
	b, err := os.ReadFile(full)
	if err != nil {
		return nil, valuedir.RuleUnreadable, fmt.Errorf("%s: secret %s: %s", EnvSecrets, name, oserr.Why(err))
	}
	v := effectorkey.TrimNewline(b)
	if err := valuedir.Check(name, v, valuedir.File); err != nil {
		clear(b)
		var ve *valuedir.ValueError
		errors.As(err, &ve)
		return nil, ve.Word, fmt.Errorf("%s: the Effector does not start: %w", EnvSecrets, err)
	}
	return v, "", nil
}

// ReadSecrets reads the held names of dir again, each under the rules of
// the start (at least 8 bytes, past the guess floor, a regular file): the
// whole new set, or, at the first secret that breaks a rule, a
// *valuedir.ValueError naming it and the rule's word. A name the directory
// gained since the start is not read: the Effector holds what it started
// with.
func ReadSecrets(dir string, names []string) (map[string][]byte, error) {
	out := make(map[string][]byte, len(names))
	for _, name := range names {
		v, word, err := readSecret(dir, name)
		if err != nil {
			for _, v := range out {
				clear(v)
			}
			return nil, valuedir.NewValueError(name, word, err)
		}
		out[name] = v
	}
	return out, nil
}
