package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"jr2.dev/boundary/effector/internal/oserr"
	"jr2.dev/boundary/effector/internal/wire"
	"jr2.dev/boundary/internal/effectorkey"
	sj "jr2.dev/boundary/internal/strictjson"
	"jr2.dev/boundary/internal/valuedir"
)

// The files of a git.credentials entry (JR2_EFFECTOR_GIT/<entry>/).
const (
	GitEntryFile    = "entry.json"
	GitIdentity     = "identity"    // the ssh transport's private key (held)
	GitKnownHosts   = "known_hosts" // the ssh transport's host keys (public)
	GitPassword     = "password"    // the https token (held)
	GitSignIdentity = "sign.identity"
	GitSignGPG      = "sign.private.asc"
)

// gitHeld are an entry's files that hold a secret.
var gitHeld = []string{GitIdentity, GitPassword, GitSignIdentity, GitSignGPG}

// GitEntry is one git.credentials entry: what entry.json says it is, and
// its files as read at start.
type GitEntry struct {
	Name string
	// URL is the entry's url prefix: a slot's url must be under it.
	URL string
	// Username is the https user the token is sent with.
	Username string
	// Files maps a file name to its bytes as read (a held file keeps its
	// trailing newline here; its scrubbed value is Held's).
	Files map[string][]byte
}

// Label is the name a held file of the entry is scrubbed as.
func (e *GitEntry) Label(file string) string { return "@git:" + e.Name + ":" + file }

// Held lists the entry's held files as secrets: the label and the value
// with one trailing newline taken off.
func (e *GitEntry) Held() []Secret {
	var out []Secret
	for _, f := range gitHeld {
		if b, ok := e.Files[f]; ok {
			out = append(out, Secret{Name: e.Label(f), Value: effectorkey.TrimNewline(b)})
		}
	}
	return out
}

// GitEntry returns the entry named name.
func (c *Config) GitEntry(name string) (*GitEntry, bool) {
	for i := range c.GitEntries {
		if c.GitEntries[i].Name == name {
			return &c.GitEntries[i], true
		}
	}
	return nil, false
}

// loadGit reads every git.credentials entry under dir: one directory per
// entry (a link to one, as a projected volume makes, is followed), holding
// entry.json and the entry's files. Names that begin with "." are a
// volume's own.
func loadGit(dir string) ([]GitEntry, error) {
	if dir == "" {
		return nil, nil
	}
	entries, err := volumeEntries(dir, EnvGit, "mount the push credentials where it points, or unset it")
	if err != nil {
		return nil, err
	}
	var out []GitEntry
	for _, d := range entries {
		if !d.dir {
			return nil, fmt.Errorf("%s: %s is not a directory; each git.credentials entry is a directory of its own", EnvGit, sj.Quote(d.name))
		}
		if !wire.ValidSecretName(d.name) {
			return nil, fmt.Errorf("%s: %s cannot name a git.credentials entry; use 1–253 of A-Z a-z 0-9 . _ -", EnvGit, sj.Quote(d.name))
		}
		e, err := loadGitEntry(d.name, filepath.Join(dir, d.name))
		if err != nil {
			return nil, fmt.Errorf("%s: entry %s: %w", EnvGit, d.name, err)
		}
		out = append(out, e)
	}
	return out, nil
}

func loadGitEntry(name, dir string) (GitEntry, error) {
	e := GitEntry{Name: name, Files: map[string][]byte{}}
	b, err := os.ReadFile(filepath.Join(dir, GitEntryFile))
	if err != nil {
		return e, fmt.Errorf("%s: %s; the operator projects it beside the entry's files", GitEntryFile, oserr.Why(err))
	}
	if err := e.parse(b); err != nil {
		return e, fmt.Errorf("%s: %w", GitEntryFile, err)
	}
	for _, f := range append([]string{GitKnownHosts}, gitHeld...) {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return e, fmt.Errorf("%s: %s", f, oserr.Why(err))
		}
		e.Files[f] = b
	}
	for _, s := range e.Held() {
		if err := valuedir.Check(s.Name[strings.LastIndexByte(s.Name, ':')+1:], s.Value, valuedir.File); err != nil {
			return e, fmt.Errorf("the Effector does not start: %w", err)
		}
	}
	return e, nil
}

// parse reads entry.json: {"url": PREFIX, "username"?: USER}.
func (e *GitEntry) parse(b []byte) error {
	raw, err := sj.Document(b)
	if err != nil {
		return err
	}
	o, err := sj.DecodeObject("", raw, "url", "username")
	if err != nil {
		return err
	}
	if e.URL, _, err = o.Str("url", true); err != nil {
		return err
	}
	if e.URL == "" || strings.ContainsAny(e.URL, " \t\r\n\x00") {
		return sj.Errorf("url", "want the entry's url prefix (https://host/…, ssh://…, user@host:…)")
	}
	if e.Username, _, err = o.Str("username", false); err != nil {
		return err
	}
	if strings.ContainsAny(e.Username, ":\r\n\x00") {
		return sj.Errorf("username", "may not hold ':' or a line break")
	}
	return nil
}
