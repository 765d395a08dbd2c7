package filter

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"jr2.dev/boundary/filter/dialguard"
	"jr2.dev/boundary/filter/wsframe"
	"jr2.dev/boundary/internal/contract"
	"jr2.dev/boundary/internal/strictjson"
	"jr2.dev/boundary/internal/valuedir"
)

// Config is custodian.json, the engine config. controlplane render writes
// it; custodian serve reads it by --config, and the filter inside Envoy
// (the dynamic module or the Go filter) from the path its plugin config
// names; the contained run's broker builds one from its policy. It holds
// no value.
type Config struct {
	// Pod names the pod, for logs and errors.
	Pod string `json:"pod"`
	// Sandbox is the Sandbox the control listener's POST /fetch asks for;
	// empty on the Instance Harness, where /fetch answers 404.
	Sandbox string `json:"sandbox,omitempty"`
	// Orchestrator is the control listener's upstream, host:port.
	Orchestrator string `json:"orchestrator"`
	// ValuesDir holds one file per held secret, named as the secret. A
	// relative path is relative to the directory of custodian.json.
	ValuesDir string `json:"valuesDir"`
	// Listeners are the default listen addresses.
	Listeners Listeners `json:"listeners"`
	// Secrets is the held table. The token (contract.TokenName) is one of them, with
	// no targets.
	Secrets []SecretConfig `json:"secrets"`
	// LocalTargets allows bound targets on guarded addresses (loopback,
	// link-local, localhost names, …) and lets a host dial a bound target
	// that resolves to one. Only for tests and demos on one machine
	// (controlplane render --allow-local-targets): in a pod the agent shares
	// loopback, and a server it starts there would be handed the value.
	LocalTargets bool `json:"localTargets,omitempty"`
	// ValueGraceSeconds is how long, after a rotation replaced a value,
	// the old value is still scrubbed (under its secret's label) from
	// what the agent reads: a late log line or a cached body can still
	// echo it. 0 (or absent) is DefaultValueGrace; at most MaxValueGrace.
	ValueGraceSeconds int `json:"valueGraceSeconds,omitempty"`
	// WebSocketMaxMessageBytes is the size of an upstream's WebSocket
	// message held whole for scrubbing (sent on as one frame); a longer
	// one goes on in fragments, scrubbed in a sliding window as a body
	// is. 0 (or absent) is wsframe.DefaultMax; at most
	// MaxWebSocketMessage.
	WebSocketMaxMessageBytes int `json:"webSocketMaxMessageBytes,omitempty"`
}

// MaxWebSocketMessage bounds webSocketMaxMessageBytes: 64 MiB.
const MaxWebSocketMessage = 64 << 20

// DefaultValueGrace is how long an old value stays scrubbed after a
// rotation when custodian.json names no valueGraceSeconds: the value
// directory's own default, the Effector's too.
const DefaultValueGrace = valuedir.DefaultGrace

// MaxValueGrace bounds valueGraceSeconds: a day.
const MaxValueGrace = 24 * time.Hour

// ValueGrace is c's grace window for old values.
func (c *Config) ValueGrace() time.Duration {
	if c.ValueGraceSeconds <= 0 {
		return DefaultValueGrace
	}
	return time.Duration(c.ValueGraceSeconds) * time.Second
}

// Listeners are the three listen addresses of a Custodian.
type Listeners struct {
	Control string `json:"control"`
	Egress  string `json:"egress"`
	Health  string `json:"health"`
}

// SecretConfig is one held secret: its name, its public stand-in, and its
// binding — where the Custodian may put its value.
type SecretConfig struct {
	Name    string   `json:"name"`
	StandIn string   `json:"standIn"`
	Targets []string `json:"targets"`
	Headers []string `json:"headers"`
	Paths   []string `json:"paths,omitempty"`
	// AWS makes the secret an AWS key that signs requests (SigV4) rather
	// than a value that rides a header: see AWSConfig. nil for the latter.
	AWS *AWSConfig `json:"aws,omitempty"`
	// Shape, when set, spells StandIn as keys of a kind are spelled, so an
	// SDK that checks a key's shape takes it (contract.StandInOf).
	Shape *contract.Shape `json:"shape,omitempty"`
	// OAuth, when set, makes the value an OAuth 2.0 access token the
	// Custodian gets itself (oauth.go); the value directory then holds the
	// grant's parts, NAME.<part>, not NAME.
	OAuth *OAuthConfig `json:"oauth,omitempty"`
}

// ValueNames are the files of the value directory that hold s's value:
// its name, an AWS secret's parts (contract.AWSValueNames), or an OAuth
// secret's grant parts (NAME.<part>), which its minter reads.
func (s *SecretConfig) ValueNames() []string {
	if s.AWS != nil {
		return contract.AWSValueNames(s.Name, s.AWS.SessionToken)
	}
	if s.OAuth != nil {
		var out []string
		for _, p := range s.OAuth.Parts() {
			out = append(out, s.Name+"."+p)
		}
		return out
	}
	return []string{s.Name}
}

// Default listen addresses (ADR-0059).
const (
	DefaultControl = "127.0.0.1:8081"
	DefaultEgress  = "127.0.0.1:15001"
	DefaultHealth  = "0.0.0.0:15021"
)

var (
	nameRe   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	headerRe = regexp.MustCompile("^[a-z0-9!#$%&'*+.^`|~-]+$")
)

// ParseConfig reads custodian.json's bytes with the one strict reader
// (package strictjson: a key unknown, spelled in another case, or given
// twice is refused with its path) and checks that the table is one every
// host can run. Each error names the field and says what to write instead;
// none carries a value.
func ParseConfig(b []byte) (*Config, error) {
	var c Config
	if err := strictjson.Decode(b, &c, "custodian.json", "; render it with controlplane render"); err != nil {
		return nil, err
	}
	if err := c.checkFile(); err != nil {
		return nil, fmt.Errorf("custodian.json: %w", err)
	}
	return &c, nil
}

// LoadConfig reads and parses the file at path. A relative ValuesDir is made
// absolute against the file's directory.
func LoadConfig(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("custodian config: %w", err)
	}
	c, err := ParseConfig(b)
	if err != nil {
		return nil, err
	}
	if !filepath.IsAbs(c.ValuesDir) {
		c.ValuesDir = filepath.Join(filepath.Dir(path), c.ValuesDir)
	}
	return c, nil
}

// checkFile checks a config read from custodian.json: the Orchestrator
// and the value directory are required there, and the table must hold.
func (c *Config) checkFile() error {
	if c.Orchestrator == "" {
		return errors.New(`orchestrator: empty; write the Orchestrator's host:port`)
	}
	if c.ValuesDir == "" {
		return errors.New("valuesDir: empty; write the directory that holds one file per held secret")
	}
	return c.check()
}

// check checks what an engine needs: an Orchestrator when one is named
// (none: the control listener answers 404), the Sandbox name, and the held
// table.
func (c *Config) check() error {
	if c.Orchestrator != "" {
		if _, _, err := contract.SplitTarget(c.Orchestrator); err != nil {
			return fmt.Errorf("orchestrator: %q: %v", c.Orchestrator, err)
		}
	}
	if c.ValueGraceSeconds < 0 || time.Duration(c.ValueGraceSeconds)*time.Second > MaxValueGrace {
		return fmt.Errorf("valueGraceSeconds: %d is outside 0–%d; write how many seconds an old value stays scrubbed after a rotation (0: %d)", c.ValueGraceSeconds, int(MaxValueGrace/time.Second), int(DefaultValueGrace/time.Second))
	}
	if c.WebSocketMaxMessageBytes < 0 || c.WebSocketMaxMessageBytes > MaxWebSocketMessage {
		return fmt.Errorf("webSocketMaxMessageBytes: %d is outside 0–%d; write how many bytes of an upstream's WebSocket message are held whole for scrubbing (0: %d)", c.WebSocketMaxMessageBytes, MaxWebSocketMessage, wsframe.DefaultMax)
	}
	if c.Sandbox != "" && !validID(c.Sandbox) {
		return fmt.Errorf("sandbox: %q is not a Sandbox name; use letters, digits, '.', '_', '~' and '-'", c.Sandbox)
	}
	seen := map[string]bool{}
	standIns := map[string]int{}       // stand-in -> index in Secrets
	headerOwner := map[string]string{} // target + " " + header -> secret
	for i, s := range c.Secrets {
		at := fmt.Sprintf("secrets[%d]", i)
		if !nameRe.MatchString(s.Name) {
			return fmt.Errorf("%s.name: %q is not a variable name; use letters, digits and _", at, s.Name)
		}
		if seen[s.Name] {
			return fmt.Errorf("%s.name: %s is held twice; hold each name once", at, s.Name)
		}
		seen[s.Name] = true
		if s.AWS != nil && s.OAuth != nil {
			return fmt.Errorf("%s: an aws secret signs with its key and an oauth secret swaps a token it mints; give %s one of aws and oauth", at, s.Name)
		}
		if s.AWS != nil {
			if err := checkAWS(at, &s, seen); err != nil {
				return err
			}
		}
		if err := checkStandIn(at, i, s, standIns); err != nil {
			return err
		}
		if len(s.Headers) == 0 {
			return fmt.Errorf("%s.headers: empty; list the headers %s may ride", at, s.Name)
		}
		hseen := map[string]bool{}
		for j, h := range s.Headers {
			if !headerRe.MatchString(h) {
				return fmt.Errorf("%s.headers[%d]: %q is not a lowercase header name", at, j, h)
			}
			if hseen[h] {
				return fmt.Errorf("%s.headers[%d]: %q is listed twice; list it once", at, j, h)
			}
			hseen[h] = true
		}
		if s.Name == contract.TokenName {
			if len(s.Targets) != 0 {
				return fmt.Errorf("%s.targets: the Sandbox token is bound to the control listener only; leave targets empty", at)
			}
		} else if len(s.Targets) == 0 {
			return fmt.Errorf("%s.targets: empty; bind %s to at least one host:port", at, s.Name)
		}
		for j, t := range s.Targets {
			host, port, err := contract.SplitTarget(t)
			if err != nil {
				return fmt.Errorf("%s.targets[%d]: %q: %v", at, j, t, err)
			}
			if canon := contract.JoinTarget(host, port); canon != t {
				return fmt.Errorf("%s.targets[%d]: %q: write it as %q", at, j, t, canon)
			}
			if v := dialguard.Judge(host); v.Guarded && !c.LocalTargets {
				return fmt.Errorf("%s.targets[%d]: %q is guarded (%s): the agent could serve it and take the value; bind a host the agent cannot serve (tests on one machine set localTargets)", at, j, t, v.Why)
			}
			for _, h := range s.Headers {
				k := t + " " + h
				if other, ok := headerOwner[k]; ok {
					return fmt.Errorf("%s.targets[%d]: %s and %s both ride %s to %s; bind one secret per header and host", at, j, other, s.Name, h, t)
				}
				headerOwner[k] = s.Name
			}
		}
		for j, p := range s.Paths {
			if err := checkPathPrefix(p); err != nil {
				return fmt.Errorf("%s.paths[%d]: %q: %v", at, j, p, err)
			}
		}
		if s.OAuth != nil {
			if err := s.OAuth.check(at, s.Name, c.LocalTargets); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkPathPrefix is R12: a prefix starts with "/" and holds none of "..",
// ";", "\", "%2e", "%2f", "%5c".
func checkPathPrefix(p string) error {
	if !strings.HasPrefix(p, "/") {
		return errors.New(`a path prefix starts with "/"`)
	}
	lp := strings.ToLower(p)
	for _, bad := range []string{"..", ";", `\`, "%2e", "%2f", "%5c"} {
		if strings.Contains(lp, bad) {
			return fmt.Errorf("a path prefix may not hold %q; write the plain path", bad)
		}
	}
	return nil
}
