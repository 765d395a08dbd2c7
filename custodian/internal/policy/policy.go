// Package policy loads the allowlist of a contained run (`custodian run
// --policy POLICY.toml`): the hosts the child may reach, the paths it may
// read and write, and the secrets the run holds for it. Load gives the file
// and its rules; docs/run.md ("The policy") gives every refusal's words.
//
// Invariant: a *Policy exists only if every entry of the file passed every
// rule (Load); it is read-only after Load, and its Hash is the sha256 of the
// bytes read from disk, never of a re-serialisation. A secret's value is
// never in the file and never in a Policy, which names only the runner's
// variables the values come from: Secret.Env for a plain secret, Parts for
// each part of an OAuth grant, the AWS SDKs' own for an AWS key
// (contract.AWSParts). The file's types are checked by this package, the
// aws and oauth tables by the engine's strict reader (kinds.go), never by
// a struct decode that lets a mismatch pass: the TOML decoder silently
// ignores a value whose type does not fit a struct field (`secrets = 3`),
// and a policy must not pass because a key was ignored.
package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"

	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/filter/dialguard"
	"jr2.dev/boundary/internal/contract"
	"jr2.dev/boundary/internal/tchar"
)

// MaxSize bounds the policy file; a larger one is refused unread.
const MaxSize = 1 << 20

// DefaultPort is the port of a host written without one.
const DefaultPort = 443

// DefaultHeaders are the headers a secret is swapped in when its headers key
// is absent: the Custodian's own list.
var DefaultHeaders = contract.DefaultHeaders

// DenyRule is the rule Allows reports when no entry allows a host.
const DenyRule = "default-deny"

// Policy is a loaded, checked policy. Do not modify it.
type Policy struct {
	AllowHosts []Host   // in file order
	ReadPaths  []string // cleaned, in file order
	WritePaths []string // cleaned, in file order
	Secrets    []Secret // sorted by Name
	Hash       string   // hex sha256 of the file's bytes
	Raw        []byte   // the file's bytes, as hashed
	index      map[Host]string
}

// Host is one allowed destination.
type Host struct {
	Name string // lowercase host name, checked by contract.CheckName
	Port uint16 // DefaultPort when the entry has none
}

// String renders h as "name:port".
func (h Host) String() string { return h.Name + ":" + strconv.Itoa(int(h.Port)) }

// Secret is a held secret of the run. It holds no value.
type Secret struct {
	Name    string   // the key under [secrets]
	Env     string   // the runner's variable the value is read from
	Hosts   []Host   // each also in AllowHosts
	Headers []string // lowercase; DefaultHeaders when the file has none
	// Shape is the stand-in's shape (shape = "github", or { prefix = "…",
	// length = N }); nil for jr2-held-Name.
	Shape *contract.Shape
	// StandIn is contract.StandInOf(Name, Shape).
	StandIn string
	// AWS, when set, makes the secret an AWS key that signs requests
	// (custodian.json's aws object, read into the engine's own type): its
	// parts come from the runner's AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY
	// and, with SessionToken, AWS_SESSION_TOKEN (contract.AWSParts); Env is
	// empty and Headers are filter.AWSHeaders.
	AWS *filter.AWSConfig
	// OAuth, when set, makes the value an access token the run mints
	// itself (custodian.json's oauth object, the engine's type): Env is
	// the child's variable that gets the stand-in, and Parts names the
	// runner's variable of each of the grant's parts.
	OAuth *filter.OAuthConfig
	// Parts maps each part of the OAuth grant (filter.OAuthConfig.Parts)
	// to the runner's variable that holds it; nil for any other secret.
	Parts map[string]string
}

// Load reads and checks the policy at file. The error names the key at
// fault and what to write instead; with several faults, each is on its own
// line.
//
// # The file
//
//	allow_hosts = ["api.example.com", "example.com:8443", "s3.us-east-1.amazonaws.com"]
//	read_paths  = ["/usr", "/lib", "/etc/ssl"]
//	write_paths = ["/home/agent/project"]
//	[secrets]
//	EXAMPLE_TOKEN = { env = "EXAMPLE_TOKEN", hosts = ["api.example.com"], headers = ["authorization"] }
//	AWS = { hosts = ["s3.us-east-1.amazonaws.com"], aws = { sessionToken = true } }
//	[secrets.API]
//	env   = "API_TOKEN"
//	hosts = ["example.com:8443"]
//	oauth = { grant = "client-credentials", tokenURL = "https://auth.example.com/token" }
//	parts = { client-id = "API_CLIENT_ID", client-secret = "API_CLIENT_SECRET" }
//
// # Rules (each refusal names the key and says what to write instead)
//
//   - Unknown keys are refused, at the top level and in a secret.
//   - A host is an exact name or name:port, lowercased; no wildcard, scheme,
//     path, query, userinfo, trailing dot, IP literal or guarded name
//     (dialguard: loopback, link-local, metadata). A name without a port
//     means port 443: plain HTTP on 80 needs "name:80" written out.
//   - Paths are absolute, cleaned with path.Clean (they are Linux paths
//     whatever the OS parsing them), and free of control bytes.
//   - No duplicates: a host (name and name:443 are one host), a path (also
//     across read_paths and write_paths: a write path is readable already),
//     a secret's env, a secret's host or header, and no two secrets on one
//     host in one header.
//   - A secret names env (a variable name, not a JR2_, proxy or trust
//     variable, which the run sets itself), one or more hosts each listed in
//     allow_hosts, and optionally headers (lowercase tokens that neither frame
//     nor route a request; default: DefaultHeaders).
//   - A secret with an aws table is an AWS key (kinds.go): its parts come
//     from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and, with sessionToken,
//     AWS_SESSION_TOKEN, so it names no env, headers, shape or parts, a
//     policy holds at most one, and each host names an AWS region and
//     service. A secret with an oauth table has an access token the run
//     mints: env is the child's variable of its stand-in, and parts names
//     the runner's variable of each part of its grant. Both tables are
//     custodian.json's, read by its reader.
//   - A key spelled in another case is refused, naming the spelling to
//     write; TOML refuses a key given twice.
func Load(file string) (*Policy, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	if len(b) > MaxSize {
		return nil, fmt.Errorf("policy: larger than %d bytes; a policy is a short allowlist", MaxSize)
	}
	return Parse(b)
}

// Parse checks the policy in b, as Load does for a file's bytes.
func Parse(b []byte) (*Policy, error) {
	var doc map[string]any
	if _, err := toml.Decode(string(b), &doc); err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("policy: line %d: %s", pe.Position.Line, pe.Message)
		}
		return nil, fmt.Errorf("policy: %w", err)
	}
	sum := sha256.Sum256(b)
	c := &checker{p: &Policy{
		Hash:  hex.EncodeToString(sum[:]),
		Raw:   append([]byte(nil), b...),
		index: map[Host]string{},
	}}
	c.document(doc)
	if len(c.errs) > 0 {
		return nil, errors.Join(c.errs...)
	}
	return c.p, nil
}

// Allows reports whether the policy allows name on port, and the rule that
// decided: "allow_hosts[i]" or DenyRule. name must already be lowercase.
func (p *Policy) Allows(name string, port uint16) (rule string, ok bool) {
	if r, ok := p.index[Host{name, port}]; ok {
		return r, true
	}
	return DenyRule, false
}

// Exposes reports which path entry would let the child reach target (the
// bundle, for one): an error naming the key when target is one of the paths
// or lies beneath one, nil otherwise. target must be absolute.
func (p *Policy) Exposes(target string) error {
	target = path.Clean(target)
	for _, l := range []struct {
		key   string
		paths []string
	}{{"read_paths", p.ReadPaths}, {"write_paths", p.WritePaths}} {
		for i, dir := range l.paths {
			if Within(dir, target) {
				return fmt.Errorf("%s[%d]: %q would let the child reach %q; list paths that do not contain it, or write it elsewhere", l.key, i, dir, target)
			}
		}
	}
	return nil
}

// Within reports whether target is dir or lies beneath it. Both are clean
// absolute paths.
func Within(dir, target string) bool {
	return target == dir || dir == "/" || strings.HasPrefix(target, dir+"/")
}

type checker struct {
	p    *Policy
	errs []error
}

func (c *checker) fail(key, format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
}

var topKeys = []string{"allow_hosts", "read_paths", "write_paths", "secrets"}

func (c *checker) document(doc map[string]any) {
	unknown(c, "", doc, topKeys, "the policy knows allow_hosts, read_paths, write_paths and [secrets]")
	for _, e := range c.strings(doc, "allow_hosts") {
		key, h := fmt.Sprintf("allow_hosts[%d]", e.i), e.s
		host, ok := c.host(key, h)
		if !ok {
			continue
		}
		if prev, dup := c.p.index[host]; dup {
			c.fail(key, "%q: %s already allows %s; list it once", h, prev, host)
			continue
		}
		c.p.index[host] = key
		c.p.AllowHosts = append(c.p.AllowHosts, host)
	}
	seen := map[string]string{}
	c.p.ReadPaths = c.paths(doc, "read_paths", seen)
	c.p.WritePaths = c.paths(doc, "write_paths", seen)
	c.secrets(doc)
}

// unknown reports every key of m not in known, in sorted order.
func unknown(c *checker, prefix string, m map[string]any, known []string, hint string) {
	var extra []string
	for k := range m {
		if !contains(known, k) {
			extra = append(extra, k)
		}
	}
	sort.Strings(extra)
	for _, k := range extra {
		if w := foldMatch(known, k); w != "" {
			c.fail(prefix+k, "spelled %q; write %q (keys are matched exactly)", k, w)
			continue
		}
		c.fail(prefix+k, "unknown key; %s", hint)
	}
}

// foldMatch is the key of known that s spells in another case, "" when
// none.
func foldMatch(known []string, s string) string {
	for _, k := range known {
		if strings.EqualFold(k, s) {
			return k
		}
	}
	return ""
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// entry is one string of a list, with its index in the file.
type entry struct {
	i int
	s string
}

// strings returns the strings of the list at m[key]: nil when the key is
// absent or not a list, empty and non-nil for an empty list. An element that
// is not a string is reported and left out.
func (c *checker) strings(m map[string]any, key string, prefix ...string) []entry {
	full := strings.Join(append(prefix, key), ".")
	v, ok := m[key]
	if !ok {
		return nil
	}
	list, ok := v.([]any)
	if !ok {
		c.fail(full, "must be a list of strings, like [\"…\"]")
		return nil
	}
	out := make([]entry, 0, len(list))
	for i, e := range list {
		s, ok := e.(string)
		if !ok {
			c.fail(fmt.Sprintf("%s[%d]", full, i), "must be a string")
			continue
		}
		out = append(out, entry{i, s})
	}
	return out
}

// host checks one host entry written at key.
func (c *checker) host(key, entry string) (Host, bool) {
	s := contract.Lower(entry)
	switch {
	case strings.Contains(s, "*"):
		c.fail(key, "%q: wildcards are not allowed; list each host", entry)
	case strings.Contains(s, "://"):
		c.fail(key, "%q: a host has no scheme; write the host alone, like \"api.example.com\"", entry)
	case strings.ContainsAny(s, "/?#"):
		c.fail(key, "%q: a host has no path, query or fragment; write the host alone, like \"api.example.com\"", entry)
	case strings.Contains(s, "@"):
		c.fail(key, "%q: a host has no userinfo; credentials belong in [secrets]", entry)
	case strings.HasPrefix(s, "["):
		c.fail(key, "%q: IP literals are not allowed (a literal-IP dial is always denied); name the host", entry)
	default:
		name, portText, hasPort := strings.Cut(s, ":")
		port := DefaultPort
		if hasPort {
			n, err := strconv.Atoi(portText)
			if err != nil || n < 1 || n > 65535 || portText[0] == '0' || portText[0] == '+' {
				c.fail(key, "%q: the port must be a number from 1 to 65535, like \"example.com:8443\"", entry)
				return Host{}, false
			}
			port = n
		}
		switch err := contract.CheckName(name); {
		case errors.Is(err, contract.ErrNumeric):
			c.fail(key, "%q: IP literals are not allowed (a literal-IP dial is always denied); name the host", entry)
		case errors.Is(err, contract.ErrEmptyLabel) && strings.HasSuffix(name, "."):
			c.fail(key, "%q: write the host without the trailing dot", entry)
		case err != nil:
			c.fail(key, "%q: not a host name: %v", entry, err)
		case dialguard.Judge(name).Guarded:
			c.fail(key, "%q: guarded (%s): the mediator never dials it; name a host outside loopback, link-local and metadata addresses", entry, dialguard.Judge(name).Why)
		default:
			return Host{Name: name, Port: uint16(port)}, true
		}
	}
	return Host{}, false
}

// paths checks the list at key; seen maps each cleaned path to the key that
// listed it first, across lists.
func (c *checker) paths(doc map[string]any, key string, seen map[string]string) []string {
	var out []string
	for _, e := range c.strings(doc, key) {
		k, p := fmt.Sprintf("%s[%d]", key, e.i), e.s
		switch {
		case !strings.HasPrefix(p, "/"):
			c.fail(k, "%q: paths must be absolute, like \"/usr\"", p)
			continue
		case strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f }):
			c.fail(k, "%q: a path must not hold control characters", p)
			continue
		}
		clean := path.Clean(p)
		if prev, dup := seen[clean]; dup {
			c.fail(k, "%q: %s already lists %q; list each path once (a write path is readable already)", p, prev, clean)
			continue
		}
		seen[clean] = k
		out = append(out, clean)
	}
	return out
}

var secretKeys = []string{"env", "hosts", "headers", "shape", "aws", "oauth", "parts"}

// secretHint ends the refusal of a secret's unknown key.
const secretHint = "a secret knows env, hosts, headers, shape, aws, oauth and parts"

func (c *checker) secrets(doc map[string]any) {
	v, ok := doc["secrets"]
	if !ok {
		return
	}
	table, ok := v.(map[string]any)
	if !ok {
		c.fail("secrets", "must be a table: [secrets] with NAME = { env = \"…\", hosts = [\"…\"] }")
		return
	}
	names := make([]string, 0, len(table))
	for name := range table {
		names = append(names, name)
	}
	sort.Strings(names)
	envs := map[string]string{}
	bound := map[string]string{}    // "host header" -> secret key
	standIns := map[string]string{} // stand-in -> secret key
	for _, name := range names {
		key := "secrets." + name
		m, ok := table[name].(map[string]any)
		if !ok {
			c.fail(key, "must be a table: %s = { env = \"…\", hosts = [\"…\"] }", name)
			continue
		}
		if !secretName(name) {
			c.fail(key, "a secret's name is letters, digits and '_' (it becomes the stand-in jr2-held-NAME, or names a shaped one)")
			continue
		}
		unknown(c, key+".", m, secretKeys, secretHint)
		s := Secret{Name: name}
		var kindOK bool
		if s.AWS, s.OAuth, kindOK = c.kinds(key, name, m); !kindOK {
			continue
		}
		if s.AWS != nil {
			c.awsSecret(key, m, &s, envs, standIns)
		} else {
			s.Env = c.env(key, m, envs)
			s.Hosts = c.secretHosts(key, m)
			s.Headers = c.headers(key, m)
			s.Shape, s.StandIn = c.shape(key, name, m, standIns)
			s.Parts = c.parts(key, s.OAuth, m, envs)
		}
		for _, h := range s.Hosts {
			for _, hd := range s.Headers {
				slot := h.String() + " " + hd
				if other, taken := bound[slot]; taken {
					c.fail(key+".headers", "%q on %s is already bound to %s; one secret per host and header", hd, h, other)
					continue
				}
				bound[slot] = key
			}
		}
		c.p.Secrets = append(c.p.Secrets, s)
	}
}

func secretName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func (c *checker) env(key string, m map[string]any, envs map[string]string) string {
	v, ok := m["env"]
	if !ok {
		c.fail(key, "no env; name the runner's variable that holds the value, like env = \"EXAMPLE_TOKEN\"")
		return ""
	}
	return c.variable(key+".env", key, v, envs)
}

// variable checks v, written at k for the secret at key, as a variable
// of the runner's the secret reads (or, for an OAuth secret's env, the
// child's variable of its stand-in); envs maps each variable claimed so
// far to its secret's key.
func (c *checker) variable(k, key string, v any, envs map[string]string) string {
	env, ok := v.(string)
	switch {
	case !ok:
		c.fail(k, "must be a string, like \"EXAMPLE_TOKEN\"")
		return ""
	case !secretName(env) || env[0] >= '0' && env[0] <= '9':
		c.fail(k, "%q: a variable name is letters, digits and '_', not starting with a digit", env)
		return ""
	case strings.HasPrefix(strings.ToUpper(env), "JR2_") || contract.ProxyOrTrustVar(env):
		c.fail(k, "%q: the run sets this variable itself; hold the value in another one", env)
		return ""
	}
	if prev, dup := envs[env]; dup {
		c.fail(k, "%q: %s already reads it; one secret per variable", env, prev)
		return ""
	}
	envs[env] = key
	return env
}

func (c *checker) secretHosts(key string, m map[string]any) []Host {
	if _, present := m["hosts"]; !present {
		c.fail(key, "no hosts; bind the secret to one or more of allow_hosts, like hosts = [\"api.example.com\"]")
		return nil
	}
	entries := c.strings(m, "hosts", key)
	if entries != nil && len(entries) == 0 {
		c.fail(key+".hosts", "empty; bind the secret to one or more of allow_hosts, like hosts = [\"api.example.com\"]")
	}
	var out []Host
	seen := map[Host]bool{}
	for _, e := range entries {
		k := fmt.Sprintf("%s.hosts[%d]", key, e.i)
		h, ok := c.host(k, e.s)
		switch {
		case !ok:
		case seen[h]:
			c.fail(k, "%q: listed twice; list each host once", e.s)
		case c.p.index[h] == "":
			c.fail(k, "%q: not in allow_hosts; a secret is bound only to an allowed host, so add it there too", e.s)
		default:
			seen[h] = true
			out = append(out, h)
		}
	}
	return out
}

func (c *checker) headers(key string, m map[string]any) []string {
	if _, ok := m["headers"]; !ok {
		return append([]string(nil), DefaultHeaders...)
	}
	entries := c.strings(m, "headers", key)
	if entries != nil && len(entries) == 0 {
		c.fail(key+".headers", "empty; list the headers the value goes in, or leave the key out for %s", strings.Join(DefaultHeaders, ", "))
	}
	var out []string
	for _, e := range entries {
		k, h := fmt.Sprintf("%s.headers[%d]", key, e.i), e.s
		switch {
		case !token(h):
			c.fail(k, "%q: a header name is a lowercase token, like \"authorization\"", h)
		case contract.Frames(h):
			c.fail(k, "%q: this header frames or routes the request; a secret cannot go in it", h)
		case contains(out, h):
			c.fail(k, "%q: listed twice; list each header once", h)
		default:
			out = append(out, h)
		}
	}
	return out
}

// token reports whether s is a lowercase HTTP token (package tchar, no
// uppercase letter).
func token(s string) bool { return tchar.Token(s) && strings.ToLower(s) == s }
