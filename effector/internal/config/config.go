// Package config reads the Effector's env, effector.json, its placement key
// and its secrets once, at start, into a read-only Config. ReadSecrets
// reads the held secrets again, under the same rules, when their directory
// rotates (package rotation).
//
// Invariant: an error names the env variable or the effector.json field and
// the fix, and never carries a secret's value, the key, or a path (the env
// names where things are; a path is the operator's to look up). A secret
// value leaves this package only in Config.Secrets, which the Effector's
// kinds and scrubber read and nothing logs.
//
// Invariant: every held secret is at least 8 bytes and clears the guess
// floor of package strength (2^64 candidates by its estimate), or the
// Effector does not start. The Effector's scrubber replaces each form of
// every held value in every answer, including the output of a command that
// names no secret; a command that prints candidates would otherwise learn
// which one is a held value from the one line replaced. Only here can it
// be checked: nothing upstream of the Effector sees a value.
//
// Invariant: the push credentials (JR2_EFFECTOR_GIT/<entry>/) are read once,
// here, like every secret: each secret file of an entry (identity, password,
// sign.identity, sign.private.asc) is held — at least 8 bytes, past the guess
// floor — and scrubbed as "@git:<entry>:<file>"; known_hosts and entry.json
// are public. The push kind copies the bytes read here into its own scratch
// and never reads the entry's files again.
package config

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"jr2.dev/boundary/effector/internal/oserr"
	"jr2.dev/boundary/effector/internal/wire"
	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/filter/strength"
	"jr2.dev/boundary/internal/effectorkey"
	"jr2.dev/boundary/internal/mode"
	sj "jr2.dev/boundary/internal/strictjson"
)

// Env names.
const (
	EnvPort     = "JR2_EFFECTOR_PORT"
	EnvKey      = "JR2_EFFECTOR_KEY"
	EnvConfig   = "JR2_EFFECTOR_CONFIG"
	EnvSecrets  = "JR2_EFFECTOR_SECRETS"
	EnvCAFile   = "JR2_CA_FILE"
	EnvDrain    = "JR2_EFFECTOR_DRAIN_SECONDS"
	EnvPodName  = "POD_NAME"
	EnvPodIP    = "POD_IP"
	EnvNodeName = "NODE_NAME"
	EnvWork     = "JR2_EFFECTOR_WORK"
	EnvScratch  = "JR2_EFFECTOR_SCRATCH"
	EnvGit      = "JR2_EFFECTOR_GIT"
	EnvRepos    = "JR2_EFFECTOR_REPOS"

	// The receipts and the mode (internal/mode): JR2_EFFECTOR_RECEIPTS
	// names the bundle the Effector writes (it must not exist);
	// JR2_EFFECTOR_MODE is live (the default), read-only, replay, faults
	// or preflight, with its settings.
	EnvReceipts   = "JR2_EFFECTOR_RECEIPTS"
	EnvMode       = "JR2_EFFECTOR_MODE"
	EnvModeFrom   = "JR2_EFFECTOR_MODE_FROM"
	EnvModeTiming = "JR2_EFFECTOR_MODE_TIMING"
	EnvFaultSeed  = "JR2_EFFECTOR_FAULT_SEED"
	EnvFaultsSpec = "JR2_EFFECTOR_FAULTS"

	// Test-only: they shorten waits so a test suite runs in seconds. They
	// can only make the replica answer sooner or forget sooner.
	EnvTestPollMs   = "JR2_EFFECTOR_TEST_POLL_MS"
	EnvTestExpireMs = "JR2_EFFECTOR_TEST_EXPIRE_MS"
	// EnvTestTerminationLog replaces /dev/termination-log, where a start
	// that cannot serve writes its reason (read by package serve).
	EnvTestTerminationLog = "JR2_EFFECTOR_TEST_TERMINATION_LOG"
)

// Defaults.
const (
	DefaultPort  = 8082
	DefaultDrain = 30 * time.Second
	DefaultHold  = 25 * time.Second
	// DefaultExpire is how long a settled outcome stays answerable.
	DefaultExpire = 10 * time.Minute
)

// Target is one scheme, host and port an http effect may call, with the
// secrets an effect toward it may name.
type Target struct {
	Scheme  string
	Host    string
	Port    int
	Secrets []string
}

// Secret is one held value.
type Secret struct {
	Name  string
	Value []byte
}

// Config is everything the Effector reads at start. It is never changed
// after Load returns.
type Config struct {
	Port    int
	Replica wire.Replica // POD_NAME and POD_IP:port
	Node    string       // NODE_NAME, or "-"

	Placement string
	Targets   []Target
	Commands  bool
	// Pushes are the Repo Slots this Effector pushes (effector.json's
	// pushes), sorted by slot.
	Pushes []Push
	// GitEntries are the push credentials under JR2_EFFECTOR_GIT, sorted
	// by name.
	GitEntries []GitEntry
	// CAFile is JR2_CA_FILE, absolute, or "": the extra roots a push's
	// git trusts beside the system's.
	CAFile string

	Key     []byte   // the placement key, 32 bytes
	Secrets []Secret // sorted by name

	// Roots are the system roots plus JR2_CA_FILE's certificates.
	Roots *x509.CertPool

	Work    string // JR2_EFFECTOR_WORK, absolute, or "" (the Instance placement)
	Scratch string // JR2_EFFECTOR_SCRATCH, absolute, or ""
	// Receipts is JR2_EFFECTOR_RECEIPTS, absolute, or "".
	Receipts string
	// Mode is JR2_EFFECTOR_MODE and its settings, as given; the mode
	// layer checks them (ModeNames name them in its errors).
	Mode mode.Config

	// Where the Effector's own files are, absolute ("" when unset): what a
	// credentialed command's child is denied (see OwnPaths).
	KeyFile, ConfigFile, SecretsDir, Git, Repos string

	Drain  time.Duration
	Hold   time.Duration
	Expire time.Duration

	// fileOnly: ParseFile, with no secrets read, checks a target's secret
	// names by their form alone.
	fileOnly bool
}

// Sign forms of a push (effector.json pushes[].sign).
const (
	SignSSH = "sshKey" // ssh-keygen -Y sign with the entry's sign.identity
	SignGPG = "gpgKey" // gpg with the entry's sign.private.asc, in its own gpg-agent
)

// Push is one Repo Slot the Effector pushes and how its commits are signed
// ("" for unsigned, SignSSH or SignGPG).
type Push struct {
	Slot string
	Sign string
}

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

// Push returns the slot named slot.
func (c *Config) Push(slot string) (Push, bool) {
	for _, p := range c.Pushes {
		if p.Slot == slot {
			return p, true
		}
	}
	return Push{}, false
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

// KeyLabel is the name the placement key is scrubbed as.
const KeyLabel = "effector-key"

// Load reads the Effector's configuration through getenv.
func Load(getenv func(string) string) (*Config, error) {
	c := &Config{Port: DefaultPort, Drain: DefaultDrain, Hold: DefaultHold, Expire: DefaultExpire}
	var err error
	if v := getenv(EnvPort); v != "" {
		if c.Port, err = strconv.Atoi(v); err != nil || c.Port < 1 || c.Port > 65535 {
			return nil, fmt.Errorf("%s: %s is not a port; want 1 to 65535", EnvPort, sj.Quote(v))
		}
	}
	c.Replica.Name = getenv(EnvPodName)
	if c.Replica.Name == "" {
		return nil, fmt.Errorf("%s: not set; set it from the downward API (metadata.name)", EnvPodName)
	}
	ip := getenv(EnvPodIP)
	if net.ParseIP(ip) == nil {
		return nil, fmt.Errorf("%s: %s is not an IP address; set it from the downward API (status.podIP)", EnvPodIP, sj.Quote(ip))
	}
	c.Replica.Address = net.JoinHostPort(ip, strconv.Itoa(c.Port))
	if c.Node = getenv(EnvNodeName); c.Node == "" {
		c.Node = "-"
	}
	if v := getenv(EnvDrain); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%s: %s is not a number of seconds", EnvDrain, sj.Quote(v))
		}
		c.Drain = time.Duration(n) * time.Second
	}
	if c.Hold, err = testMillis(getenv, EnvTestPollMs, c.Hold); err != nil {
		return nil, err
	}
	if c.Expire, err = testMillis(getenv, EnvTestExpireMs, c.Expire); err != nil {
		return nil, err
	}
	if c.Key, err = loadKey(getenv(EnvKey)); err != nil {
		return nil, err
	}
	if c.Secrets, err = loadSecrets(getenv(EnvSecrets)); err != nil {
		return nil, err
	}
	if err := c.loadFile(getenv(EnvConfig)); err != nil {
		return nil, err
	}
	if c.Roots, err = loadRoots(getenv(EnvCAFile)); err != nil {
		return nil, err
	}
	if c.Work, err = dirEnv(getenv, EnvWork, "mount the worktree's read-only view there, or unset it on the Instance Effector"); err != nil {
		return nil, err
	}
	if c.Scratch, err = dirEnv(getenv, EnvScratch, "mount the Effector's writable scratch there"); err != nil {
		return nil, err
	}
	if c.Commands && (c.Work == "" || c.Scratch == "") {
		return nil, fmt.Errorf("effector.json: commands: true, but a credentialed command needs %s (the worktree it checks out) and %s (where it runs); set both (a Sandbox Effector), or write commands false", EnvWork, EnvScratch)
	}
	for _, p := range []struct {
		dst *string
		env string
	}{{&c.KeyFile, EnvKey}, {&c.ConfigFile, EnvConfig}, {&c.SecretsDir, EnvSecrets}, {&c.Git, EnvGit}, {&c.Repos, EnvRepos}, {&c.CAFile, EnvCAFile}} {
		if *p.dst, err = absEnv(getenv, p.env); err != nil {
			return nil, err
		}
	}
	if c.GitEntries, err = loadGit(c.Git); err != nil {
		return nil, err
	}
	if err := c.loadMode(getenv); err != nil {
		return nil, err
	}
	if len(c.Pushes) > 0 && (c.Work == "" || c.Scratch == "") {
		return nil, fmt.Errorf("effector.json: pushes names a slot, but a push needs %s (the worktree it pushes from) and %s (its clean repository); set both (a Sandbox Effector), or take pushes out", EnvWork, EnvScratch)
	}
	return c, nil
}

// OwnPaths lists every place the Effector's own files are: the key,
// effector.json, the secrets directory, the push credentials, the
// worktree, the repo caches and the scratch root. A credentialed command's
// child is denied each (effector confine --deny).
func (c *Config) OwnPaths() []string {
	var out []string
	for _, p := range []string{c.KeyFile, c.ConfigFile, c.SecretsDir, c.Git, c.Work, c.Repos, c.Scratch} {
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}

// absEnv is the env variable's path made absolute, or "" when unset.
func absEnv(getenv func(string) string, name string) (string, error) {
	v := getenv(name)
	if v == "" {
		return "", nil
	}
	abs, err := filepath.Abs(v)
	if err != nil {
		return "", fmt.Errorf("%s: cannot be made absolute (%s); give an absolute path", name, oserr.Why(err))
	}
	return abs, nil
}

// dirEnv is absEnv for a directory that must exist.
func dirEnv(getenv func(string) string, name, fix string) (string, error) {
	p, err := absEnv(getenv, name)
	if err != nil || p == "" {
		return p, err
	}
	if st, err := os.Stat(p); err != nil || !st.IsDir() {
		return "", fmt.Errorf("%s: not a directory; %s", name, fix)
	}
	return p, nil
}

func testMillis(getenv func(string) string, name string, def time.Duration) (time.Duration, error) {
	v := getenv(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%s: %s is not a number of milliseconds (test-only; unset it)", name, sj.Quote(v))
	}
	return time.Duration(n) * time.Millisecond, nil
}

func loadKey(path string) ([]byte, error) {
	if path == "" {
		return nil, fmt.Errorf("%s: not set; point it at the placement key file", EnvKey)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %s; mount the placement key where it points", EnvKey, oserr.Why(err))
	}
	k, err := effectorkey.ParseHexKey(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvKey, err)
	}
	return k, nil
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
		return nil, filter.RuleMissing, fmt.Errorf("%s: secret %s: its file is gone; project it there again", EnvSecrets, name)
	}
	if err != nil {
		return nil, filter.RuleUnreadable, fmt.Errorf("%s: secret %s: %s", EnvSecrets, sj.Quote(name), oserr.Why(err))
	}
	if !st.Mode().IsRegular() {
		return nil, filter.RuleUnreadable, fmt.Errorf("%s: secret %s is not a regular file", EnvSecrets, name)
	}
	b, err := os.ReadFile(full)
	if err != nil {
		return nil, filter.RuleUnreadable, fmt.Errorf("%s: secret %s: %s", EnvSecrets, name, oserr.Why(err))
	}
	v := effectorkey.TrimNewline(b)
	if len(v) < 8 {
		word := filter.RuleShort
		if len(v) == 0 {
			word = filter.RuleEmpty
		}
		return nil, word, fmt.Errorf("%s: secret %s is %d bytes; a value shorter than 8 bytes would match ordinary text, so the Effector does not start: write the real value and roll the pod", EnvSecrets, name, len(v))
	}
	if err := strength.Check(v); err != nil {
		return nil, filter.RuleGuessable, fmt.Errorf("%s: secret %s: the Effector does not start: %w", EnvSecrets, name, err)
	}
	return v, "", nil
}

// ReadSecrets reads the held names of dir again, each under the rules of
// the start (at least 8 bytes, past the guess floor, a regular file): the
// whole new set, or, at the first secret that breaks a rule, a
// *filter.ValueError naming it and the rule's word. A name the directory
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
			return nil, filter.NewValueError(name, word, err)
		}
		out[name] = v
	}
	return out, nil
}

// loadFile reads effector.json.
func (c *Config) loadFile(path string) error {
	if path == "" {
		return fmt.Errorf("%s: not set; point it at effector.json", EnvConfig)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%s: %s; mount effector.json where it points", EnvConfig, oserr.Why(err))
	}
	if err := c.parseFile(b); err != nil {
		return fmt.Errorf("effector.json: %w", err)
	}
	return nil
}

// ParseFile reads effector.json alone — placement, targets, commands,
// pushes — with the checks Load makes of it, for the control plane that
// renders the Effector's objects (package effector/effectorconf). Every
// other field of the Config is left zero.
func ParseFile(b []byte) (*Config, error) {
	c := &Config{fileOnly: true}
	if err := c.parseFile(b); err != nil {
		return nil, fmt.Errorf("effector.json: %w", err)
	}
	return c, nil
}

func (c *Config) parseFile(b []byte) error {
	raw, err := sj.Document(b)
	if err != nil {
		return err
	}
	o, err := sj.DecodeObject("", raw, "placement", "targets", "commands", "pushes")
	if err != nil {
		return err
	}
	if c.Placement, _, err = o.Str("placement", true); err != nil {
		return err
	}
	if c.Placement == "" {
		return sj.Errorf("placement", "empty; name the placement (\"instance\", or the Sandbox's)")
	}
	if c.Commands, _, err = o.Bool("commands", false); err != nil {
		return err
	}
	targets, _, err := o.Array("targets", false)
	if err != nil {
		return err
	}
	seen := map[string]int{}
	for i, r := range targets {
		p := sj.Index("targets", i)
		t, err := c.parseTarget(p, r)
		if err != nil {
			return err
		}
		key := t.Scheme + "://" + net.JoinHostPort(t.Host, strconv.Itoa(t.Port))
		if j, dup := seen[key]; dup {
			return sj.Errorf(p, "the same scheme, host and port as targets[%d]; list each target once, with all its secrets", j)
		}
		seen[key] = i
		c.Targets = append(c.Targets, t)
	}
	return c.parsePushes(o)
}

// parsePushes reads effector.json's pushes: [{"slot": NAME, "sign"?:
// "sshKey"|"gpgKey"}], each slot once.
func (c *Config) parsePushes(o *sj.Object) error {
	pushes, _, err := o.Array("pushes", false)
	if err != nil {
		return err
	}
	seen := map[string]int{}
	for i, r := range pushes {
		p := sj.Index("pushes", i)
		po, err := sj.DecodeObject(p, r, "slot", "sign")
		if err != nil {
			return err
		}
		var push Push
		if push.Slot, _, err = po.Str("slot", true); err != nil {
			return err
		}
		if !wire.ValidSecretName(push.Slot) {
			return sj.Errorf(sj.Join(p, "slot"), "%s is not a Repo Slot name (1–253 of A-Z a-z 0-9 . _ -)", sj.Quote(push.Slot))
		}
		if j, dup := seen[push.Slot]; dup {
			return sj.Errorf(p, "the same slot as pushes[%d]; list each slot once", j)
		}
		seen[push.Slot] = i
		if push.Sign, _, err = po.Str("sign", false); err != nil {
			return err
		}
		if po.Has("sign") && push.Sign != SignSSH && push.Sign != SignGPG {
			return sj.Errorf(sj.Join(p, "sign"), "%s is not a signing form; want %q or %q, or leave it out for unsigned commits", sj.Quote(push.Sign), SignSSH, SignGPG)
		}
		c.Pushes = append(c.Pushes, push)
	}
	sort.Slice(c.Pushes, func(i, j int) bool { return c.Pushes[i].Slot < c.Pushes[j].Slot })
	return nil
}

// loadGit reads every git.credentials entry under dir: one directory per
// entry (a link to one, as a projected volume makes, is followed), holding
// entry.json and the entry's files. Names that begin with "." are a
// volume's own.
func loadGit(dir string) ([]GitEntry, error) {
	if dir == "" {
		return nil, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %s; mount the push credentials where it points, or unset it", EnvGit, oserr.Why(err))
	}
	var out []GitEntry
	for _, d := range entries {
		name := d.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		full := filepath.Join(dir, name)
		if st, err := os.Stat(full); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("%s: %s is not a directory; each git.credentials entry is a directory of its own", EnvGit, sj.Quote(name))
		}
		if !wire.ValidSecretName(name) {
			return nil, fmt.Errorf("%s: %s cannot name a git.credentials entry; use 1–253 of A-Z a-z 0-9 . _ -", EnvGit, sj.Quote(name))
		}
		e, err := loadGitEntry(name, full)
		if err != nil {
			return nil, fmt.Errorf("%s: entry %s: %w", EnvGit, name, err)
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
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
		if len(s.Value) < 8 {
			return e, fmt.Errorf("%s is %d bytes; a value shorter than 8 bytes would match ordinary text, so the Effector does not start: write the real value and roll the pod", s.Name[strings.LastIndexByte(s.Name, ':')+1:], len(s.Value))
		}
		if err := strength.Check(s.Value); err != nil {
			return e, fmt.Errorf("%s: the Effector does not start: %w", s.Name[strings.LastIndexByte(s.Name, ':')+1:], err)
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

func (c *Config) parseTarget(p string, r []byte) (Target, error) {
	var t Target
	o, err := sj.DecodeObject(p, r, "scheme", "host", "port", "secrets")
	if err != nil {
		return t, err
	}
	if t.Scheme, _, err = o.Str("scheme", true); err != nil {
		return t, err
	}
	if t.Scheme != "https" && t.Scheme != "http" {
		return t, sj.Errorf(sj.Join(p, "scheme"), "%s: want https or http", sj.Quote(t.Scheme))
	}
	if t.Host, _, err = o.Str("host", true); err != nil {
		return t, err
	}
	if err := checkHost(t.Host); err != nil {
		return t, sj.Errorf(sj.Join(p, "host"), "%s: %v", sj.Quote(t.Host), err)
	}
	port, _, err := o.Int("port", true, 1, 65535)
	if err != nil {
		return t, err
	}
	t.Port = int(port)
	if v, ok, err := o.Raw("secrets"); err != nil {
		return t, err
	} else if ok {
		if t.Secrets, err = sj.Strings(sj.Join(p, "secrets"), v); err != nil {
			return t, err
		}
	}
	for j, name := range t.Secrets {
		if c.fileOnly {
			if !wire.ValidSecretName(name) {
				return t, sj.Errorf(sj.Index(sj.Join(p, "secrets"), j), "%s is not a secret name (1–253 of A-Z a-z 0-9 . _ -)", sj.Quote(name))
			}
			continue
		}
		if _, held := c.Secret(name); !held {
			return t, sj.Errorf(sj.Index(sj.Join(p, "secrets"), j), "%s: no such secret in %s; project it there, or take it off this target", sj.Quote(name), EnvSecrets)
		}
	}
	return t, nil
}

// checkHost holds a target's host to one lowercase name or IP address.
func checkHost(h string) error {
	switch {
	case h == "":
		return errors.New("empty; name the host")
	case strings.Contains(h, "*"):
		return errors.New("wildcards are not allowed; list each host")
	case strings.ContainsAny(h, "/:@?#[] ") && net.ParseIP(h) == nil:
		return errors.New("want a host name or an IP address alone; give the scheme and port in their own fields")
	case strings.ToLower(h) != h:
		return errors.New("write the host in lowercase")
	}
	return nil
}

func loadRoots(path string) (*x509.CertPool, error) {
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if path == "" {
		return pool, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %s; mount the instance's CA bundle where it points, or unset it", EnvCAFile, oserr.Why(err))
	}
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s: holds no PEM certificate; write the instance's CA bundle there", EnvCAFile)
	}
	return pool, nil
}

// ModeNames name the mode's settings in its errors.
var ModeNames = mode.Names{Mode: EnvMode, From: EnvModeFrom, Seed: EnvFaultSeed, Faults: EnvFaultsSpec, Timing: EnvModeTiming}

// loadMode reads the receipts' path and the mode. A mode other than live
// writes records (a plan, a fault, a divergence), so it needs receipts.
func (c *Config) loadMode(getenv func(string) string) error {
	var err error
	if c.Receipts, err = absEnv(getenv, EnvReceipts); err != nil {
		return err
	}
	c.Mode = mode.Config{Mode: getenv(EnvMode), From: getenv(EnvModeFrom), Timing: getenv(EnvModeTiming), Faults: getenv(EnvFaultsSpec)}
	if v := getenv(EnvFaultSeed); v != "" {
		if c.Mode.Seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			return fmt.Errorf("%s: %q is not a whole number; give the faults' seed, e.g. 7", EnvFaultSeed, v)
		}
	}
	if c.Mode.Mode != "" && c.Mode.Mode != mode.Live && c.Receipts == "" {
		return fmt.Errorf("%s=%s records what it does, and %s is unset; name the receipts file (it must not exist), or unset %s", EnvMode, c.Mode.Mode, EnvReceipts, EnvMode)
	}
	return nil
}
