// Package broker holds the secrets of one contained run: it reads each
// value (an AWS key's and an OAuth grant's parts too) from the runner's
// own environment, once, hands it to the engine (jr2.dev/boundary/filter)
// as a held secret bound to the policy's hosts, starts the engine's
// minter of OAuth tokens (Mint), and builds the child's environment
// (ChildEnv), in which every secret is its public stand-in.
//
// Invariant: a value read here leaves this package only into the engine
// (filter.NewLive, whose minter alone sends an OAuth secret's parts, to
// its token endpoint, through the transport the mediator gives Mint).
// The child's environment never holds a secret's variable as the runner
// has it nor a value under another variable, the errors name secrets and
// variables, never values, and Contains is the one test, over every form
// the engine's scrubber knows (a minted token's too), that a record about
// to be written carries no value.
//
// NOT covered: any other credential in the runner's environment is passed
// to the child as it is (a value the policy does not hold, or a policy
// value transformed past the scrubber's forms). Run with an environment
// that holds only what the child may see, and the policy's secrets.
package broker

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync/atomic"

	"jr2.dev/boundary/custodian/internal/policy"
	"jr2.dev/boundary/custodian/internal/runca"
	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/internal/contract"
	"jr2.dev/boundary/internal/gitcred"
)

// Broker is a run's held secrets and their engine. It is read-only after
// New (but for the OAuth tokens its engine mints, each a new engine: see
// Mint) and safe for concurrent use.
type Broker struct {
	pol     *policy.Policy
	live    *filter.Live
	removed map[string]bool // variables the child never gets from the runner
	// byValue is the stand-in of the value with this digest: a runner
	// variable that is exactly that value gets it.
	byValue map[[sha256.Size]byte]string
	// log receives the minter's lines once Mint is called.
	log atomic.Pointer[func(kv ...string)]
}

// extraTrust are trust variables set beside runca.TrustVars: tools that
// read one of these first would otherwise trust roots that do not hold the
// run CA (and that the child may not be able to read).
var extraTrust = []string{"CURL_CA_BUNDLE", "AWS_CA_BUNDLE", "PIP_CERT"}

// New reads the value of each of pol's secrets from environ (the runner's
// environment, "KEY=value" entries) and builds the engine: a plain
// secret's value from its env, an AWS key's parts from the AWS SDKs'
// variables (contract.AWSParts), an OAuth secret's grant parts from the
// variables its parts name. A variable that is unset or empty, or a value
// the engine refuses (shorter than scrub.MinLen, not printable ASCII),
// refuses the run, naming the secret and its variable.
func New(pol *policy.Policy, environ []string) (*Broker, error) {
	env := lookup(environ)
	cfg := &filter.Config{Pod: "custodian-run"}
	values := map[string][]byte{}
	b := &Broker{pol: pol, removed: map[string]bool{}, byValue: map[[sha256.Size]byte]string{}}
	read := func(s policy.Secret, variable, what string) ([]byte, error) {
		v := env[variable]
		if v == "" {
			return nil, fmt.Errorf("secrets.%s: the runner's variable %s is unset or empty; export %s in it before custodian run", s.Name, variable, what)
		}
		return []byte(v), nil
	}
	for _, s := range pol.Secrets {
		targets := make([]string, len(s.Hosts))
		for i, h := range s.Hosts {
			targets[i] = contract.JoinTarget(h.Name, int(h.Port))
		}
		cfg.Secrets = append(cfg.Secrets, filter.SecretConfig{
			Name:    s.Name,
			StandIn: s.StandIn,
			Shape:   s.Shape,
			Targets: targets,
			Headers: append([]string(nil), s.Headers...),
			AWS:     s.AWS,
			OAuth:   s.OAuth,
		})
		switch {
		case s.AWS != nil:
			for i, n := range contract.AWSValueNames(s.Name, s.AWS.SessionToken) {
				p := contract.AWSParts[i]
				v, err := read(s, p.Env, "the key's "+strings.ToLower(strings.TrimPrefix(p.Suffix, "_")))
				if err != nil {
					return nil, err
				}
				values[n] = v
				b.byValue[sha256.Sum256(v)] = contract.StandIn(n)
			}
			for _, p := range contract.AWSParts {
				b.removed[p.Env] = true // the child gets all three: see ChildEnv
			}
		case s.OAuth != nil:
			for _, part := range s.OAuth.Parts() {
				variable := s.Parts[part]
				v, err := read(s, variable, "the grant's "+part)
				if err != nil {
					return nil, err
				}
				if err := filter.CheckPart(s.Name, part, v); err != nil {
					return nil, fmt.Errorf("secrets.%s: the runner's variable %s: %w", s.Name, variable, err)
				}
				values[filter.PartName(s.Name, part)] = v
				b.removed[variable] = true
			}
			b.removed[s.Env] = true
		default:
			v, err := read(s, s.Env, "the credential")
			if err != nil {
				return nil, err
			}
			values[s.Name] = v
			b.removed[s.Env] = true
			b.byValue[sha256.Sum256(v)] = s.StandIn
		}
	}
	live, err := filter.NewLive(cfg, values, filter.LiveOptions{Log: func(kv ...string) {
		if f := b.log.Load(); f != nil {
			(*f)(kv...)
		}
	}})
	if err != nil {
		return nil, err
	}
	b.live = live
	return b, nil
}

// Mint starts getting the access token of each OAuth secret (filter's
// Live.Mint), its calls to the token endpoint made with rt (the run's
// transport: the dial guard and the upstream roots of every upstream),
// its lines (secret names and words) given to log; stop ends it. Until a
// token is minted a request that needs it gets the engine's 503
// token-pending, as under custodian serve. A policy with no OAuth secret
// starts nothing.
func (b *Broker) Mint(rt http.RoundTripper, log func(kv ...string)) (stop func()) {
	if !b.live.Config().HasOAuth() {
		return func() {}
	}
	if log != nil {
		b.log.Store(&log)
	}
	return b.live.Mint(rt)
}

// lookup maps the last value of each variable of environ.
func lookup(environ []string) map[string]string {
	m := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

// Engine is the run's engine: the policy's secrets bound to their hosts,
// with the newest token of each OAuth secret. A request is decided, and
// its answer scrubbed, with the one engine Engine returned when it began.
func (b *Broker) Engine() *filter.Engine { return b.live.Engine() }

// Contains reports whether s holds a value, in any form the scrubber
// knows (a minted token, and one it replaced within the grace window,
// included). Give it to the bundle writer (bundle.Options.ContainsSecret).
func (b *Broker) Contains(s []byte) bool {
	return !bytes.Equal(b.Engine().Scrubber().Bytes(s), s) // one copy, not four: it guards every record line
}

// ChildEnv is the child's environment built from environ: proxy is the
// mediator's proxy URL, caFile the run CA's file. It also returns the
// variables that carry stand-ins, sorted.
//
// The runner's environment, less each secret's variable and every proxy
// or trust variable (contract.ProxyOrTrustVar, any case), with every other
// variable that holds a value handled as the secret's own: one that is
// exactly a secret's value (GH_TOKEN beside GITHUB_TOKEN) gets its
// stand-in, one that holds a value in any form inside it (a URL with the
// token) or in its name is withheld. Then:
//
//   - VAR=STAND-IN for each secret NAME = { env = "VAR", … }, its
//     stand-in jr2-held-NAME or the one its shape spells (an OAuth
//     secret's too: its env names the child's variable of the stand-in,
//     and each variable its parts name is left out);
//   - for an AWS key, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
//     AWS_SESSION_TOKEN set to its parts' stand-ins, as harness.env sets
//     them, the session token's whether the key has one or not (the
//     runner's own are never passed on: they are read as the key's parts,
//     AWS_SESSION_TOKEN only with sessionToken; a runner variable that is
//     exactly a part gets that part's stand-in);
//   - HTTPS_PROXY, https_proxy, HTTP_PROXY, http_proxy naming the
//     mediator's proxy, and NODE_USE_ENV_PROXY=1, for clients that honour
//     them (the namespace routes the others to the mediator anyway);
//   - the trust variables (runca.TrustVars, and CURL_CA_BUNDLE,
//     AWS_CA_BUNDLE, PIP_CERT, which those tools read before the others)
//     naming the run CA's file;
//   - for each host of a secret (not an AWS key) whose headers hold
//     authorization, the git credential helper harness.env sets
//     (gitcred.Env: GIT_CONFIG_COUNT, GIT_CONFIG_KEY_n,
//     GIT_CONFIG_VALUE_n), which answers the mediator's 401 challenge with
//     the stand-in as the Basic password, so stock git clones and pushes
//     over https with no flag.
//
// docs/run.md ("Containment, in order", the paragraph after the list)
// says the same.
func (b *Broker) ChildEnv(environ []string, proxy, caFile string) (env, standIns []string) {
	standIns = []string{}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || b.removed[k] || contract.ProxyOrTrustVar(k) {
			continue
		}
		if si, held := b.byValue[sha256.Sum256([]byte(v))]; held {
			env = append(env, k+"="+si)
			standIns = append(standIns, k)
			continue
		}
		if b.Contains([]byte(kv)) {
			continue // a value inside it, or in its name: withheld
		}
		env = append(env, kv)
	}
	for _, s := range b.pol.Secrets {
		if s.AWS != nil {
			// The session token's stand-in whether the key has one or
			// not, as harness.env: the engine puts in the real one, or
			// removes it.
			for _, p := range contract.AWSParts {
				env = append(env, p.Env+"="+contract.StandIn(p.Of(s.Name)))
				standIns = append(standIns, p.Env)
			}
			continue
		}
		env = append(env, s.Env+"="+s.StandIn)
		standIns = append(standIns, s.Env)
	}
	for _, v := range []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"} {
		env = append(env, v+"="+proxy)
	}
	env = append(env, "NODE_USE_ENV_PROXY=1")
	env = append(env, runca.TrustEnv(caFile)...)
	for _, v := range extraTrust {
		env = append(env, v+"="+caFile)
	}
	var git []gitcred.Binding
	for _, s := range b.pol.Secrets {
		if s.AWS == nil && slices.Contains(s.Headers, "authorization") { // a SigV4 key is no Basic password
			for _, h := range s.Hosts {
				git = append(git, gitcred.Binding{Target: h.String(), StandIn: s.StandIn})
			}
		}
	}
	for _, kv := range gitcred.Env(git) {
		env = append(env, kv[0]+"="+kv[1])
	}
	sort.Strings(standIns)
	return env, standIns
}

// Names returns the variable names of env, sorted: what the env record
// shows of the child's environment.
func Names(env []string) []string {
	names := make([]string, 0, len(env))
	seen := map[string]bool{}
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if !seen[k] {
			seen[k] = true
			names = append(names, k)
		}
	}
	sort.Strings(names)
	return names
}
