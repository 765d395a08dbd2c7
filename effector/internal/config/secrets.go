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
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %s; mount the secrets directory where it points", EnvSecrets, oserr.Why(err))
	}
	var out []Secret
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		full := filepath.Join(dir, name)
		st, err := os.Stat(full)
		if err != nil {
			return nil, fmt.Errorf("%s: secret %s: %s", EnvSecrets, sj.Quote(name), oserr.Why(err))
		}
		if st.IsDir() {
			continue
		}
		if !wire.ValidSecretName(name) || name == KeyLabel {
			return nil, fmt.Errorf("%s: %s cannot name a secret; use 1–253 of A-Z a-z 0-9 . _ - (and not %q)", EnvSecrets, sj.Quote(name), KeyLabel)
		}
		v, _, err := readSecret(dir, name)
		if err != nil {
			return nil, err
		}
		out = append(out, Secret{Name: name, Value: v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
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
