// Package config reads the Effector's env, effector.json, its placement key
// and its secrets once, at start, into a read-only Config. ReadSecrets
// reads the held secrets again, under the same rules, when their directory
// rotates (package rotation).
//
// Invariants:
//   - An error names the env variable or the effector.json field and the
//     fix, and never carries a secret's value, the key, or a path (a path
//     is the operator's to look up). A secret value leaves this package
//     only in Config.Secrets, which the kinds and scrubber read and nothing
//     logs.
//   - Every held secret is at least 8 bytes and clears package strength's
//     guess floor, or the Effector does not start: the scrubber replaces
//     every held value in every answer, so a command that prints candidates
//     would otherwise learn which one is held. Only here can it be checked:
//     nothing upstream of the Effector sees a value.
//   - The push credentials (JR2_EFFECTOR_GIT/<entry>/) are read once, here,
//     and each secret file of an entry is held and scrubbed like any secret
//     (git.go); the push kind never reads the entry's files again.
//
// Each input is read in a file of its own: config.go the environment
// (Load), key.go the placement key, secrets.go the held secrets,
// effectorjson.go effector.json, git.go the push credentials, roots.go
// JR2_CA_FILE's roots.
package config

import (
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"jr2.dev/boundary/effector/internal/oserr"
	"jr2.dev/boundary/effector/internal/wire"
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
