// Package manifest reads a pod's held manifest — the names and bindings of
// the secrets its Custodian holds, never a value — and refuses one that
// breaks one of ADR-0059's rules R2–R6 and R12, or is not a manifest.
// docs/manifest.md is the contract: the file, every rule and every
// refusal's words (TestDocsManifestRefusals holds the two together).
//
// Invariant: a *Manifest exists only when every rule passed, and it is not
// modified after Parse. The manifest carries no value, and a message quotes
// at most 64 bytes of any input. A name that is not a variable name is never
// quoted back (a pasted value would be); hosts, headers and paths are. Every
// refusal names the manifest path (secrets[2].hosts[0]) and says what to
// write instead, all of them at once (Refused).
//
// A binding to a guarded address (loopback, link-local, a metadata address,
// localhost: anything the dial guard refuses, by spelling) is refused: the
// agent shares the pod's loopback, so a server it starts there would be
// handed the value (Options.AllowLocalTargets lifts that for tests and demos
// on one machine, where the upstreams are local by necessity). Not covered
// here: a name that resolves to a guarded address (a Custodian that dials
// bound targets with the guard covers it; see filter.Config); whether a
// value file exists is the Custodian's check at start, not render's.
package manifest

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/filter/dialguard"
	"jr2.dev/boundary/internal/contract"
	"jr2.dev/boundary/internal/tchar"
)

// Manifest is a checked held manifest. Its file:
//
//	{
//	  "pod": "ws-7f3a",
//	  "orchestrator": "jr2-orchestrator.jr2.svc:4000",
//	  "sandbox": "ws-7f3a",
//	  "secrets": [
//	    { "name": "ANTHROPIC_API_KEY", "hosts": ["api.anthropic.com"], "headers": ["x-api-key"], "paths": ["/v1/"] },
//	    { "name": "GITHUB_TOKEN", "hosts": ["api.github.com", "github.com:443"] }
//	  ]
//	}
type Manifest struct {
	Pod          string
	Orchestrator string // canonical host:port
	Sandbox      string // empty on the Instance Harness
	// Secrets are the manifest's held secrets in manifest order. The
	// Sandbox token is not among them, even when the manifest names it.
	Secrets []Secret
	// TokenFrom is where the Sandbox token's value lives in the cluster,
	// when the manifest names the token with a valueFrom; nil otherwise.
	TokenFrom *SecretKeyRef
}

// SecretKeyRef names a key of a Kubernetes Secret of the user's that holds
// a held secret's value (ADR-0059's valueFrom.secretKeyRef). It is a
// reference, never the value: the pod's Custodian container gets the key
// as a file of its value directory (package kube), and render never reads
// the Secret.
type SecretKeyRef struct {
	Name string // the Secret's name (a DNS-1123 subdomain)
	Key  string // the key in its data ([-._a-zA-Z0-9]+)
}

// Secret is one held secret's binding.
type Secret struct {
	Name string
	// Targets are canonical host:port targets (contract.JoinTarget), in
	// manifest order.
	Targets []string
	// Headers are the headers it may ride: the manifest's list, or
	// contract.DefaultHeaders when the manifest gives none.
	Headers []string
	// Paths are allowed path prefixes; nil allows every path.
	Paths []string
	// Shape is the stand-in's shape (contract.Shape); nil for
	// "jr2-held-NAME".
	Shape *contract.Shape
	// StandIn is the stand-in: contract.StandInOf(Name, Shape).
	StandIn string
	// OAuth makes the value an access token the Custodian gets itself
	// (filter.OAuthConfig); nil for a value read from its file.
	OAuth *filter.OAuthConfig
	// From is where the value lives in the cluster (valueFrom); nil
	// means the per-pod convention Secret, jr2-held-secrets-<pod>, key
	// Name.
	From *SecretKeyRef
	// AWS is set on a secret of the AWS kind (the manifest's "aws"
	// object): an access key that signs requests, held as its parts
	// (ValueNames), which ride no header the manifest names.
	AWS *AWS
}

// AWS is the "aws" object of a held secret: {"sessionToken": true} when
// the key is a temporary one with a session token.
type AWS struct {
	SessionToken bool
}

// ValueNames are the value files (and convention Secret keys) of s: its
// name, an AWS secret's parts (contract.AWSValueNames), or an OAuth
// secret's grant parts — the names custodian.json's secret has too
// (filter.SecretConfig.ValueNames).
func (s *Secret) ValueNames() []string {
	c := filter.SecretConfig{Name: s.Name, OAuth: s.OAuth}
	if s.AWS != nil {
		c.AWS = &filter.AWSConfig{SessionToken: s.AWS.SessionToken}
	}
	return c.ValueNames()
}

// Problem is one refusal.
type Problem struct {
	Path string // the manifest path, e.g. "secrets[2].hosts[0]"; empty for the whole file
	Rule string // "R2", "R3", "R4", "R5", "R6", "R12", "oauth", or "shape"
	Msg  string
}

func (p Problem) String() string {
	if p.Path == "" {
		return p.Msg
	}
	return p.Path + ": " + p.Msg
}

// Refused is Parse's error: every problem found, in document order.
type Refused struct {
	Problems []Problem
}

func (r *Refused) Error() string {
	lines := make([]string, len(r.Problems))
	for i, p := range r.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// MaxSize bounds a manifest: far above any real pod's (a few KiB), far below
// what would make render slow.
const MaxSize = 4 << 20

// Options change what Parse accepts.
type Options struct {
	// AllowLocalTargets accepts a bound host that spells a guarded address
	// (127.0.0.1, [::1], localhost, …). Only for tests and demos on one
	// machine: in a pod the agent shares loopback and could serve the target.
	AllowLocalTargets bool
}

// checker collects problems.
type checker struct {
	opts     Options
	problems []Problem
}

func (c *checker) add(path, rule, format string, a ...any) {
	c.problems = append(c.problems, Problem{Path: path, Rule: rule, Msg: fmt.Sprintf(format, a...)})
}

// Parse reads and checks a held manifest.
func Parse(b []byte) (*Manifest, error) { return ParseWith(b, Options{}) }

// ParseWith is Parse with options.
//
// Every problem is reported at once: the top-level fields first, then each
// secret in order (its name, headers, hosts, paths).
//
//   - Shape: one JSON object; an unknown field, a field given twice, a value
//     of the wrong type, an empty pod or a missing orchestrator is refused.
//   - R2: a JR2_* name other than the Sandbox token (any case); a proxy or
//     trust variable (contract.ProxyOrTrustVar: the table of
//     docs/harness-env.md, git's GIT_CONFIG_* among them) — render sets
//     those in the Harness, and a tool reads each to choose its route or
//     its roots; or a signing credential (contract.SigningVars:
//     AWS_SECRET_ACCESS_KEY, GOOGLE_APPLICATION_CREDENTIALS, …), whose value
//     signs a request and never rides one, so no stand-in of it is ever
//     swapped: the refusal points at the Effector.
//   - R3: one name held twice, or two names whose stand-ins are one (a
//     shape of the user's own too short to tell them apart).
//   - R4: a value field, or a valueFrom that is not
//     {"secretKeyRef": {"name", "key"}} with a Secret's name and one of its
//     keys (the value's place in the cluster, never the value).
//   - R5: no hosts; a wildcard, userinfo, a scheme other than https, a path
//     (or query) on a host, a bad port, an IPv6 address out of brackets; one
//     target listed twice; two secrets on one host in one header.
//   - R6: a header that is not a lowercase token, that frames or routes a
//     request (contract.Frames), that the request's own signature covers
//     (contract.SigningHeader: x-amz-*, under SigV4), or that is listed twice.
//   - R12: a path prefix that does not start with "/", or holds "..", ";",
//     "\", "%2e", "%2f" or "%5c" (any case), or a byte outside printable
//     ASCII, "?" or "#" (a prefix is matched against the path alone).
//
// An aws secret (aws.go) and an oauth secret (oauth.go) have refusals of
// their own, under these rules and "oauth"; docs/manifest.md lists each.
//
// A secret's shape (contract.Shape) spells its stand-in as keys of a kind
// are spelled, so an SDK that checks a key's shape takes it: a kind of
// the table as a string ("github"), or {"prefix": …, "length": …}; a shape
// Resolve refuses is refused here with its words.
//
// The Sandbox token (contract.TokenName) is the kit's own: render always holds
// it. A manifest may name it bare ({"name": "JR2_SANDBOX_TOKEN"}); any
// binding on it is refused, since it rides the control listener only.
func ParseWith(b []byte, opts Options) (*Manifest, error) {
	if len(b) > MaxSize {
		return nil, &Refused{[]Problem{{Rule: "shape", Msg: fmt.Sprintf("the manifest is larger than %d bytes; a held manifest holds names and bindings only", MaxSize)}}}
	}
	root, err := readJSON(b)
	if err != nil {
		return nil, &Refused{[]Problem{{Rule: "shape", Msg: err.Error()}}}
	}
	c := &checker{opts: opts}
	m := c.manifest(root)
	if len(c.problems) > 0 {
		return nil, &Refused{c.problems}
	}
	return m, nil
}

func (c *checker) manifest(root *value) *Manifest {
	if root.kind != kObject {
		c.add("", "shape", `the manifest is %s; write one object: {"pod": …, "orchestrator": …, "secrets": […]}`, root.kind)
		return nil
	}
	c.unknown(root, "", []string{"pod", "orchestrator", "sandbox", "secrets"}, "a manifest has pod, orchestrator, sandbox and secrets")
	m := &Manifest{}
	switch v, missing := c.text(root, "", "pod"); {
	case missing:
		c.add("pod", "shape", "missing or empty; write the pod's name")
	case v == "": // the wrong type, refused by text
	case !podName(v):
		c.add("pod", "shape", "%s is not a pod name; use lowercase letters, digits and '-', starting and ending with a letter or digit (at most 63): it names the pod's Kubernetes objects", quote(v))
	default:
		m.Pod = v
	}
	switch v, missing := c.text(root, "", "orchestrator"); {
	case missing:
		c.add("orchestrator", "shape", `missing or empty; write the Orchestrator's host:port, as "jr2-orchestrator.jr2.svc:4000"`)
	case v == "":
	default:
		host, port, err := contract.SplitTarget(v)
		if err != nil {
			c.add("orchestrator", "shape", `%s: %v; write the Orchestrator's host:port, as "jr2-orchestrator.jr2.svc:4000"`, quote(v), err)
			break
		}
		m.Orchestrator = contract.JoinTarget(host, port)
	}
	if v, _ := c.text(root, "", "sandbox"); v != "" {
		if !sandboxName(v) {
			c.add("sandbox", "shape", "%s is not a Sandbox name; use 1–256 letters, digits, '.', '_', '~' and '-', or leave sandbox out on the Instance Harness", quote(v))
		} else {
			m.Sandbox = v
		}
	}
	secrets := c.list(root, "", "secrets")
	s := &secretsChecker{checker: c, names: map[string]string{}, owner: map[string]string{}, token: &m.TokenFrom}
	for i, item := range secrets {
		if sec, ok := s.secret(index("secrets", i), item); ok {
			m.Secrets = append(m.Secrets, sec)
		}
	}
	return m
}

// unknown refuses every key of obj that is not in known.
func (c *checker) unknown(obj *value, path string, known []string, has string) {
	for _, k := range obj.keys {
		if !contains(known, k) {
			c.add(member(path, k), "shape", "unknown field; %s", has)
		}
	}
}

// text returns the string field key of obj. missing is true when it is
// absent, null or empty; a field of another type is refused here and
// returned as "" with missing false, so the caller reports nothing more.
func (c *checker) text(obj *value, path, key string) (s string, missing bool) {
	v := obj.fields[key]
	switch {
	case v == nil || v.kind == kNull || v.kind == kString && v.str == "":
		return "", true
	case v.kind != kString:
		c.add(member(path, key), "shape", "%s; write a string", v.kind)
		return "", false
	}
	return v.str, false
}

// list returns the list field key of obj; nil when absent or null. A field
// of another type is refused.
func (c *checker) list(obj *value, path, key string) []*value {
	v := obj.fields[key]
	if v == nil || v.kind == kNull {
		return nil
	}
	if v.kind != kArray {
		c.add(member(path, key), "shape", "%s; write a list", v.kind)
		return nil
	}
	return v.items
}

// stringList is a list field of strings, each with its manifest path.
type stringList struct {
	present bool // the field is there and not null
	empty   bool // the field is an empty list
	items   []string
	paths   []string
}

// stringList reads the list field key of obj. A field of another type, or
// an element that is not a string, is refused and left out.
func (c *checker) stringList(obj *value, path, key, what string) stringList {
	v := obj.fields[key]
	if v == nil || v.kind == kNull {
		return stringList{}
	}
	l := stringList{present: true}
	if v.kind != kArray {
		c.add(member(path, key), "shape", "%s; write a list of %s", v.kind, what)
		return l
	}
	l.empty = len(v.items) == 0
	for i, item := range v.items {
		at := index(member(path, key), i)
		if item.kind != kString {
			c.add(at, "shape", "%s; write each of %s as a string", item.kind, what)
			continue
		}
		l.items = append(l.items, item.str)
		l.paths = append(l.paths, at)
	}
	return l
}

type secretsChecker struct {
	*checker
	awsAt string            // the path of the first aws secret
	names map[string]string // name -> path of its first entry
	owner map[string]string // target + " " + header -> secret
	token **SecretKeyRef    // Manifest.TokenFrom
	// standIns maps each stand-in claimed so far to its secret and path.
	standIns map[string]string
}

func (s *secretsChecker) secret(at string, v *value) (Secret, bool) {
	if v.kind != kObject {
		s.add(at, "shape", `%s; write a secret as {"name": …, "hosts": […]}`, v.kind)
		return Secret{}, false
	}
	before := len(s.problems)
	if f := v.fields["value"]; f != nil {
		s.add(member(at, "value"), "R4", "a held manifest never holds a value (render would write it into files and objects); put the value in a Secret of yours and write valueFrom: {\"secretKeyRef\": {\"name\": …, \"key\": …}}")
	}
	s.unknown(v, at, []string{"name", "hosts", "headers", "paths", "shape", "oauth", "aws", "valueFrom", "value"}, "a secret has name, hosts, headers, paths, shape, oauth, aws and valueFrom")
	name, missing := s.text(v, at, "name")
	if missing {
		s.add(member(at, "name"), "shape", "missing or empty; write the variable name the Harness reads")
	}
	if name == "" || !s.name(member(at, "name"), name) {
		return Secret{}, false
	}
	if name == contract.TokenName {
		for _, k := range []string{"hosts", "headers", "paths", "shape", "oauth"} {
			if f := v.fields[k]; f != nil && f.kind != kNull {
				s.add(member(at, k), "R2", "%s rides the control listener only, and render binds it; name it bare or leave it out", contract.TokenName)
			}
		}
		*s.token = s.valueFrom(at, v)
		return Secret{}, false
	}
	sec := Secret{Name: name, From: s.valueFrom(at, v)}
	headers := s.stringList(v, at, "headers", "header names")
	sec.AWS = s.aws(at, name, v, headers.present)
	switch {
	case sec.AWS != nil:
		sec.Headers = append([]string(nil), filter.AWSHeaders...)
	case !headers.present:
		sec.Headers = append([]string(nil), contract.DefaultHeaders...)
	case headers.empty:
		s.add(member(at, "headers"), "R6", "empty; leave headers out for the default list (%s), or list the headers %s rides", strings.Join(contract.DefaultHeaders, ", "), name)
	default:
		sec.Headers = s.headers(headers.items, headers.paths)
	}
	hosts := s.stringList(v, at, "hosts", "hosts")
	if !hosts.present || hosts.empty {
		s.add(member(at, "hosts"), "R5", "missing or empty; list the hosts %s is bound to, as \"host\" or \"host:port\"", name)
	}
	sec.Targets = s.targets(name, hosts.items, hosts.paths, sec.Headers)
	if sec.AWS != nil {
		s.awsHosts(hosts.items, hosts.paths)
	}
	paths := s.stringList(v, at, "paths", "path prefixes")
	if paths.empty {
		s.add(member(at, "paths"), "R12", "empty; leave paths out to allow every path, or list path prefixes such as \"/v1/\"")
	}
	sec.Paths = s.paths(paths.items, paths.paths)
	sec.Shape, sec.StandIn = s.shape(at, name, v)
	sec.OAuth = s.oauth(at, name, v)
	return sec, len(s.problems) == before
}

// name checks a held secret's name: a variable name (never quoted back
// when it is not one), R2 and R3.
func (s *secretsChecker) name(at, name string) bool {
	if !varName(name) {
		s.add(at, "shape", "not a variable name; use letters, digits and _, not starting with a digit")
		return false
	}
	upper := strings.ToUpper(name)
	switch {
	case name == contract.TokenName:
	case strings.HasPrefix(upper, "JR2_"):
		s.add(at, "R2", "%s: JR2_* names are the kit's own; hold the credential under another name", name)
		return false
	case contract.ProxyOrTrustVar(upper):
		s.add(at, "R2", "%s: render sets the Harness's proxy and trust variables itself, so none can be held; hold the credential under another name", name)
		return false
	case contract.SigningVar(upper) && strings.HasPrefix(upper, "AWS_"):
		s.add(at, "R2", "%s is a part of an AWS key, which signs the request and never rides it; hold the key as one secret with an aws object ({\"name\": \"AWS\", \"hosts\": […], \"aws\": {}}: its parts are value files, docs/manifest.md), or run the tool that signs as an Effector command effect with the key in its env (docs/effector.md)", name)
		return false
	case contract.SigningVar(upper):
		s.add(at, "R2", "%s is a signing credential: it signs the request and never rides it, so the Custodian has no stand-in to swap; run the tool that signs as an Effector command effect with the secret in its env (docs/effector.md), or hold a bearer token instead", name)
		return false
	}
	if first, dup := s.names[name]; dup {
		s.add(at, "R3", "%s is held twice (first at %s); hold each name once", name, first)
		return false
	}
	s.names[name] = strings.TrimSuffix(at, ".name")
	return true
}

// valueFrom reads a secret's valueFrom: {"secretKeyRef": {"name": SECRET,
// "key": KEY}}, both required, nothing else. nil when absent (or refused).
func (s *secretsChecker) valueFrom(at string, v *value) *SecretKeyRef {
	f := v.fields["valueFrom"]
	if f == nil || f.kind == kNull {
		return nil
	}
	at = member(at, "valueFrom")
	const form = `write {"secretKeyRef": {"name": "<your Secret>", "key": "<its key>"}}`
	if f.kind != kObject {
		s.add(at, "R4", "%s; %s", f.kind, form)
		return nil
	}
	s.unknown(f, at, []string{"secretKeyRef"}, "valueFrom has secretKeyRef only; "+form)
	ref := f.fields["secretKeyRef"]
	if ref == nil || ref.kind != kObject {
		s.add(member(at, "secretKeyRef"), "R4", "missing or not an object; %s", form)
		return nil
	}
	at = member(at, "secretKeyRef")
	s.unknown(ref, at, []string{"name", "key"}, `a secretKeyRef has name and key`)
	before := len(s.problems)
	name, missing := s.text(ref, at, "name")
	switch {
	case missing:
		s.add(member(at, "name"), "R4", "missing or empty; write the name of the Secret that holds the value")
	case name != "" && !SecretName(name):
		s.add(member(at, "name"), "R4", "not a Secret name; write the name of a Secret in the pod's namespace: lowercase letters, digits, '-' and '.' (at most 253)")
	}
	key, missing := s.text(ref, at, "key")
	switch {
	case missing:
		s.add(member(at, "key"), "R4", "missing or empty; write the key of that Secret that holds the value")
	case key != "" && !SecretKey(key):
		s.add(member(at, "key"), "R4", "not a Secret key; write the key that holds the value: letters, digits, '-', '_' and '.' (at most 253)")
	}
	if len(s.problems) != before || name == "" || key == "" {
		return nil
	}
	return &SecretKeyRef{Name: name, Key: key}
}

// headers checks R6 and returns the accepted headers.
func (s *secretsChecker) headers(headers, paths []string) []string {
	var out []string
	seen := map[string]string{}
	for i, h := range headers {
		at := paths[i]
		lower := strings.ToLower(h)
		switch {
		case h == "":
			s.add(at, "R6", "empty; write a header name")
		case strings.HasPrefix(h, ":"):
			s.add(at, "R6", "%s: a pseudo-header cannot carry a credential; name a request header", quote(h))
		case !headerToken(lower):
			s.add(at, "R6", "%s: not a header name; use lowercase letters, digits and '-' (a request with '_' in a header name is refused)", quote(h))
		case contract.Frames(lower):
			s.add(at, "R6", "%s: it frames or routes the request, so no credential rides it; name the header the credential is sent in", quote(h))
		case contract.SigningHeader(lower):
			s.add(at, "R6", "%s: SigV4 signs every x-amz-* header, so a swapped value breaks the signature; run the AWS tool as an Effector command effect with its keys in its env (docs/effector.md)", quote(h))
		case lower != h:
			s.add(at, "R6", "%s: header names are written lowercase here; write %s", quote(h), quote(lower))
		default:
			if first, dup := seen[h]; dup {
				s.add(at, "R6", "%s is listed twice (first at %s); list it once", quote(h), first)
				continue
			}
			seen[h] = at
			out = append(out, h)
		}
	}
	return out
}

// targets checks R5 on each host and returns the canonical targets. Two
// secrets on one target in one header are refused on the later one.
func (s *secretsChecker) targets(name string, hosts, paths, headers []string) []string {
	var out []string
	seen := map[string]string{}
	for i, h := range hosts {
		at := paths[i]
		t, msg := Target(h)
		if msg != "" {
			s.add(at, "R5", "%s", msg)
			continue
		}
		if host, _, err := contract.SplitTarget(t); err == nil && !s.opts.AllowLocalTargets {
			if v := dialguard.Judge(host); v.Guarded {
				s.add(at, "R5", "%s is guarded (%s): the agent shares the pod's loopback and could serve it the value; bind a host the agent cannot serve (a test on one machine renders with --allow-local-targets)", quote(h), v.Why)
				continue
			}
		}
		if first, dup := seen[t]; dup {
			s.add(at, "R5", "%s is the same target as %s (%s); list it once", quote(h), first, t)
			continue
		}
		seen[t] = at
		for _, hd := range headers {
			k := t + " " + hd
			if other, taken := s.owner[k]; taken {
				s.add(at, "R5", "%s: %s and %s both ride %s to %s; bind one secret per header and host", quote(h), other, name, hd, t)
				continue
			}
			s.owner[k] = name
		}
		out = append(out, t)
	}
	return out
}

// Target reads one hosts entry — "host", "host:port", "[v6]", "[v6]:port",
// optionally prefixed "https://" — into a canonical host:port (port 443
// by default). msg, when not empty, is the R5 refusal (with the entry
// quoted, without the manifest path).
func Target(entry string) (target, msg string) {
	q := quote(entry)
	if entry == "" {
		return "", `empty; write "host" or "host:port"`
	}
	rest := entry
	if i := strings.Index(rest, "://"); i >= 0 {
		if !strings.EqualFold(rest[:i], "https") {
			return "", q + ": only https is carried; write the host alone (https is implied)"
		}
		rest = rest[i+3:]
		rest = strings.TrimSuffix(rest, "/")
	}
	switch {
	case strings.Contains(rest, "*"):
		return "", q + ": wildcards are not allowed; list each host"
	case strings.Contains(rest, "@"):
		return "", q + ": userinfo is not allowed; write the host alone"
	case strings.ContainsAny(rest, "/?#"):
		return "", q + ": a host has no path; write the host alone and put path prefixes in paths"
	}
	host, port := rest, "443"
	switch {
	case strings.HasPrefix(rest, "["):
		end := strings.Index(rest, "]")
		if end < 0 {
			return "", q + ": an IPv6 address needs its closing ']'; write it as [2001:db8::1]:443"
		}
		host = rest[1:end]
		switch after := rest[end+1:]; {
		case after == "":
		case strings.HasPrefix(after, ":"):
			port = after[1:]
		default:
			return "", q + `: write an IPv6 target as "[address]" or "[address]:port"`
		}
		if _, err := netip.ParseAddr(host); err != nil || !strings.Contains(host, ":") {
			return "", q + ": not an IPv6 address; write it as [2001:db8::1]:443"
		}
	case strings.Count(rest, ":") > 1:
		return "", q + ": write an IPv6 address in brackets, as [2001:db8::1]:443"
	case strings.Contains(rest, ":"):
		host, port, _ = strings.Cut(rest, ":")
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
		return "", q + ": the port must be a number from 1 to 65535"
	}
	h, p, err := contract.SplitTarget(net.JoinHostPort(host, port))
	if err != nil {
		return "", q + ": not a host name or an IP address; write a DNS name or an IP address"
	}
	return contract.JoinTarget(h, p), ""
}

// paths checks R12 and returns the accepted prefixes (nil when none).
func (s *secretsChecker) paths(paths, at []string) []string {
	var out []string
	seen := map[string]string{}
	for i, p := range paths {
		if msg := PathPrefix(p); msg != "" {
			s.add(at[i], "R12", "%s", msg)
			continue
		}
		if first, dup := seen[p]; dup {
			s.add(at[i], "R12", "%s is listed twice (first at %s); list it once", quote(p), first)
			continue
		}
		seen[p] = at[i]
		out = append(out, p)
	}
	return out
}

// PathPrefix is R12 on one paths entry; it returns the refusal (entry
// quoted, no manifest path) or "".
func PathPrefix(p string) string {
	q := quote(p)
	if !strings.HasPrefix(p, "/") {
		fix := "/" + strings.TrimLeft(p, "/")
		return q + `: a path prefix starts with "/"; write ` + quote(fix)
	}
	lp := strings.ToLower(p)
	for _, bad := range []string{"..", ";", `\`, "%2e", "%2f", "%5c"} {
		if strings.Contains(lp, bad) {
			return fmt.Sprintf("%s: a path prefix may not hold %s; write the plain path", q, quote(bad))
		}
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c <= ' ' || c >= 0x7f:
			return q + ": a path prefix holds printable ASCII only; percent-encode other bytes"
		case c == '?' || c == '#':
			return fmt.Sprintf("%s: a path prefix is matched against the path alone and may not hold %q; write the path", q, string(c))
		}
	}
	return ""
}

func varName(s string) bool {
	if s == "" || len(s) > 256 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c == '_' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// headerToken is a header name a credential may ride: an RFC 9110 token
// (tchar) of at most 256 bytes without '_', since a request with '_' in a
// header name is refused by rule 2 in every host.
func headerToken(s string) bool {
	return len(s) <= 256 && tchar.Token(s) && strings.IndexByte(s, '_') < 0
}

// podName is a DNS-1123 label: 1–63 lowercase letters, digits and '-',
// starting and ending with a letter or digit. It names the pod's
// Kubernetes objects and is the value of their jr2.dev/held-pod label.
func podName(s string) bool { return dnsName(s, 63, "-") }

// SecretName is a Kubernetes Secret's name: a DNS-1123 subdomain, 1–253
// lowercase letters, digits, '-' and '.', each dot-separated part
// starting and ending with a letter or digit.
func SecretName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, part := range strings.Split(s, ".") {
		if !dnsName(part, 63, "-") {
			return false
		}
	}
	return true
}

// SecretKey is a key of a Secret's data: 1–253 of [-._a-zA-Z0-9], not "."
// or "..".
func SecretKey(s string) bool { return s != "." && s != ".." && inSet(s, 253, "-._") }

// dnsName: 1–max lowercase letters, digits or extra, the first and last a
// letter or digit.
func dnsName(s string, max int, extra string) bool {
	if s == "" || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || i == len(s)-1 || strings.IndexByte(extra, c) < 0) {
			return false
		}
	}
	return true
}

// sandboxName is the engine's Sandbox name: 1–256 of [A-Za-z0-9._~-], not
// "." or "..".
func sandboxName(s string) bool { return s != "." && s != ".." && inSet(s, 256, "._~-") }

// inSet: 1–max bytes, each a letter, a digit or one of extra.
func inSet(s string, max int, extra string) bool {
	if s == "" || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte(extra, c) >= 0) {
			return false
		}
	}
	return true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
