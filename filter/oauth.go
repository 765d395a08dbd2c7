package filter

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
	"golang.org/x/oauth2/jwt"

	"jr2.dev/boundary/filter/dialguard"
	"jr2.dev/boundary/internal/contract"
	"jr2.dev/boundary/internal/effectorkey"
	"jr2.dev/boundary/internal/valuedir"
)

// An OAuth secret's value is an OAuth 2.0 access token the Custodian gets
// itself, from its token endpoint, with the credentials in the value
// directory; the agent holds the stand-in as for any secret, and the swap
// puts the current token where the stand-in was, toward the bound hosts
// only.
//
// Where each part lives:
//
//   - The engine decides, once for every host, what a request with the
//     stand-in gets: the current token (a value like any other: swapped
//     by the same rules, scrubbed from answers, and, once replaced,
//     scrubbed for the grace window as a rotated value is), or, while no
//     token is held, the engine's own answer — 503 token-pending before
//     the first, 502 token-refused naming the secret and the endpoint's
//     OAuth error code after a refusal. A request never waits on a fetch.
//   - The Live mints: one goroutine per OAuth secret (so one request to
//     the token endpoint at a time, however many requests want a token),
//     which gets a token at start, again shortly before it expires
//     (refreshBefore), and again after a refusal with a backoff; each
//     token swaps in a whole new engine, as a rotation does.
//   - The host gives the HTTP transport (Live.Mint): its own dialer with
//     the dial guard on the address it dials, and the same roots as any
//     upstream. In Envoy that is a Go transport inside the filter's
//     process, not an Envoy cluster: the minter runs on its own goroutine,
//     never on a worker thread, so no Envoy callback ever blocks on it.
//
// The grants are golang.org/x/oauth2's: clientcredentials (RFC 6749
// §4.4), oauth2.Config's refresh (§6), and jwt, the JWT bearer grant
// (RFC 7523) of a Google service-account key.

// The grants an OAuth secret may name.
const (
	GrantClientCredentials = "client-credentials"
	GrantRefreshToken      = "refresh-token"
	GrantServiceAccount    = "service-account"
)

// The reason words of a request whose secret holds no token.
const (
	ReasonTokenPending = "token-pending"
	ReasonTokenRefused = "token-refused"
)

// OAuthConfig makes a held secret's value an access token the Custodian
// gets from TokenURL with the grant's parts, each a file of the value
// directory named NAME.<part> (OAuthConfig.Parts).
type OAuthConfig struct {
	Grant    string   `json:"grant"`
	TokenURL string   `json:"tokenURL"`
	Scopes   []string `json:"scopes,omitempty"`
}

// The parts of each grant: the file NAME.<part> holds it.
const (
	PartClientID     = "client-id"
	PartClientSecret = "client-secret"
	PartRefreshToken = "refresh-token"
	PartKey          = "key.json"
)

// Parts are the value files of the grant, in order.
func (o *OAuthConfig) Parts() []string {
	switch o.Grant {
	case GrantClientCredentials:
		return []string{PartClientID, PartClientSecret}
	case GrantRefreshToken:
		return []string{PartClientID, PartClientSecret, PartRefreshToken}
	case GrantServiceAccount:
		return []string{PartKey}
	}
	return nil
}

// partFile is the value file of secret name's part.
func partFile(name, part string) string { return name + "." + part }

// check checks o, at at, of secret name: a grant of the three, an https
// token endpoint on a host the agent cannot serve (unless localTargets),
// scopes without spaces.
func (o *OAuthConfig) check(at, name string, localTargets bool) error {
	if o.Parts() == nil {
		return fmt.Errorf("%s.oauth.grant: %q is no grant; write %s, %s or %s", at, o.Grant, GrantClientCredentials, GrantRefreshToken, GrantServiceAccount)
	}
	if name == contract.TokenName {
		return fmt.Errorf("%s.oauth: %s is the kit's own; leave oauth out", at, name)
	}
	u, err := url.Parse(o.TokenURL)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || u.Fragment != "" || u.RawQuery != "" || u.Opaque != "" {
		return fmt.Errorf("%s.oauth.tokenURL: write the token endpoint as https://host[:port]/path, with no userinfo, query or fragment", at)
	}
	port := u.Port()
	if port == "" {
		port = "443"
	}
	host, _, err := contract.SplitTarget(u.Hostname() + ":" + port)
	if err != nil {
		return fmt.Errorf("%s.oauth.tokenURL: %v", at, err)
	}
	if v := dialguard.Judge(host); v.Guarded && !localTargets {
		return fmt.Errorf("%s.oauth.tokenURL: the host is guarded (%s): the agent could serve it and take the credentials; name a token endpoint the agent cannot serve (tests on one machine set localTargets)", at, v.Why)
	}
	for j, s := range o.Scopes {
		if s == "" || strings.ContainsAny(s, " \t\r\n\"\\") {
			return fmt.Errorf("%s.oauth.scopes[%d]: write one scope, without spaces or quotes", at, j)
		}
	}
	return nil
}

// loadParts reads the parts of every OAuth secret of c into vals, under
// partFile's names: a client id as printable text (it is no secret, and
// may be short), every other part as a value (valuedir.Check: a client
// secret and a refresh token as header values, the key as a file).
func loadParts(c *Config, vals map[string][]byte, h hash.Hash) error {
	for _, s := range c.Secrets {
		if s.OAuth == nil {
			continue
		}
		for _, p := range s.OAuth.Parts() {
			f := partFile(s.Name, p)
			kind := valuedir.Header
			switch p {
			case PartClientID:
				v, err := readClientID(c.ValuesDir, f, h)
				if err != nil {
					return err
				}
				vals[f] = v
				continue
			case PartKey:
				kind = valuedir.File
			}
			got, err := valuedir.Read(c.ValuesDir, []string{f}, kind, h)
			if err != nil {
				return err
			}
			vals[f] = got[f]
		}
	}
	return nil
}

// readClientID reads the client id file f: printable ASCII, not empty.
func readClientID(dir, f string, h hash.Hash) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(dir, f))
	if h != nil {
		fmt.Fprintf(h, "%s\x00%d\x00", f, len(b))
		h.Write(b)
	}
	if err != nil {
		return nil, valuedir.NewValueError(f, valuedir.RuleMissing, fmt.Errorf("held secret %s: no file %s in the value directory; mount the client id there", f, f))
	}
	v := effectorkey.TrimNewline(b)
	if err := checkClientID(f, v); err != nil {
		return nil, err
	}
	return v, nil
}

// checkClientID holds the client id v of part f to its rules: printable
// ASCII, not empty.
func checkClientID(f string, v []byte) error {
	if len(v) == 0 {
		return valuedir.NewValueError(f, valuedir.RuleEmpty, fmt.Errorf("held secret %s: the client id is empty; write it into its file", f))
	}
	for _, c := range v {
		if c < 0x20 || c > 0x7e {
			return valuedir.NewValueError(f, valuedir.RuleNotPrintable, fmt.Errorf("held secret %s: the client id is not printable ASCII", f))
		}
	}
	return nil
}

// PartName is the name of part of the OAuth secret name, as New's values
// hold it (and the value directory's file).
func PartName(name, part string) string { return partFile(name, part) }

// CheckPart holds v, part of the OAuth secret name's grant, to the rules
// a part read from the value directory is held to: a client id printable
// ASCII and not empty, a key the rules of a value file, every other part
// a header value's. A host that reads the parts from elsewhere (the
// contained run reads them from its environment) checks each with it
// before New.
func CheckPart(name, part string, v []byte) error {
	f := partFile(name, part)
	switch part {
	case PartClientID:
		return checkClientID(f, v)
	case PartKey:
		return valuedir.Check(f, v, valuedir.File)
	}
	return valuedir.Check(f, v, valuedir.Header)
}

// secretParts are the parts of s in vals that are secret (scrubbed from
// every answer as the token is): the client secret, the refresh token,
// the refresh tokens the endpoint rotated to (rotatedNames), and the key's
// private key. The client id is not: it is public by design (it is in
// every authorize URL a browser shows), and often too short to scrub
// without cutting ordinary text (docs/custodian.md says so).
func secretParts(s SecretConfig, vals map[string][]byte) [][]byte {
	var out [][]byte
	for _, n := range rotatedNames(s.Name) {
		if v := vals[n]; len(v) > 0 {
			out = append(out, v)
		}
	}
	for _, p := range s.OAuth.Parts() {
		v := vals[partFile(s.Name, p)]
		switch p {
		case PartClientSecret, PartRefreshToken:
			out = append(out, v)
		case PartKey:
			var k serviceAccountKey
			if json.Unmarshal(v, &k) == nil && k.PrivateKey != "" {
				out = append(out, []byte(k.PrivateKey))
			}
		}
	}
	return out
}

// GoogleTokenAudience is the audience of every service-account
// assertion: Google's token endpoint, whatever tokenURL names, as Google's
// own client (google-auth) writes it; Google's endpoint accepts no other.
const GoogleTokenAudience = "https://oauth2.googleapis.com/token"

// serviceAccountKey is what the JWT bearer grant reads of a Google
// service-account key. The key's own token_uri is not read: the token
// endpoint is the config's, so a value file never chooses where the
// credentials go.
type serviceAccountKey struct {
	Type         string `json:"type"`
	ClientEmail  string `json:"client_email"`
	PrivateKey   string `json:"private_key"`
	PrivateKeyID string `json:"private_key_id"`
}

// source is the token source of secret s with the parts in vals, its HTTP
// calls made with client; refresh, when not empty, is the refresh token
// the endpoint last returned (it may rotate them), in place of the file's.
func source(ctx context.Context, s SecretConfig, vals map[string][]byte, refresh string, client *http.Client) (oauth2.TokenSource, error) {
	ctx = context.WithValue(ctx, oauth2.HTTPClient, client)
	o := s.OAuth
	part := func(p string) string { return string(vals[partFile(s.Name, p)]) }
	switch o.Grant {
	case GrantClientCredentials:
		c := &clientcredentials.Config{ClientID: part(PartClientID), ClientSecret: part(PartClientSecret), TokenURL: o.TokenURL, Scopes: o.Scopes, AuthStyle: oauth2.AuthStyleInHeader}
		return c.TokenSource(ctx), nil
	case GrantRefreshToken:
		c := &oauth2.Config{ClientID: part(PartClientID), ClientSecret: part(PartClientSecret), Endpoint: oauth2.Endpoint{TokenURL: o.TokenURL, AuthStyle: oauth2.AuthStyleInHeader}, Scopes: o.Scopes}
		if refresh == "" {
			refresh = part(PartRefreshToken)
		}
		return c.TokenSource(ctx, &oauth2.Token{RefreshToken: refresh}), nil
	case GrantServiceAccount:
		var k serviceAccountKey
		if err := json.Unmarshal(vals[partFile(s.Name, PartKey)], &k); err != nil || k.Type != "service_account" || k.ClientEmail == "" || k.PrivateKey == "" {
			return nil, fmt.Errorf("held secret %s: %s is not a service-account key (JSON with type service_account, client_email and private_key); write the key Google issued", s.Name, partFile(s.Name, PartKey))
		}
		c := &jwt.Config{Email: k.ClientEmail, PrivateKey: []byte(k.PrivateKey), PrivateKeyID: k.PrivateKeyID, Scopes: o.Scopes, TokenURL: o.TokenURL, Audience: GoogleTokenAudience}
		return c.TokenSource(ctx), nil
	}
	return nil, fmt.Errorf("held secret %s: no grant", s.Name)
}

// mintState is what the engine knows of an OAuth secret that holds no
// token: refused is the last refusal's word (the endpoint's OAuth error
// code, refusedUnreachable or refusedUnusable), "" while the first is
// awaited.
type mintState struct {
	refused string
}

// tokenReply is the engine's answer to a request whose swap needs secret
// h's token while h holds none: nothing goes upstream.
func tokenReply(h *held) *Reply {
	switch h.mint.refused {
	case "":
		return reply(503, ReasonTokenPending, "the access token of "+h.name+" is not minted yet; try again shortly")
	case refusedUnreachable:
		return reply(502, ReasonTokenRefused, "the token endpoint of "+h.name+" could not be reached")
	case refusedUnusable:
		return reply(502, ReasonTokenRefused, "the token endpoint of "+h.name+" answered no access token usable as a value")
	case refusedExpired:
		return reply(502, ReasonTokenRefused, "the token endpoint of "+h.name+" answered an access token already expired")
	case refusedTooLong:
		return reply(502, ReasonTokenRefused, fmt.Sprintf("the token endpoint of %s answered a token longer than %d bytes", h.name, MaxTokenLen))
	}
	return reply(502, ReasonTokenRefused, "the token endpoint of "+h.name+" refused the credentials: "+h.mint.refused)
}

// The refusals that are no OAuth error code of the endpoint's.
const (
	refusedUnreachable = "\x00unreachable" // no answer came (a dial, TLS, a transport error)
	refusedUnusable    = "\x00unusable"    // an answer, but no token that passes a value's rules
	refusedExpired     = "\x00expired"     // a token whose expires_in is not above 0
	refusedTooLong     = "\x00long"        // an access or refresh token longer than MaxTokenLen
)

// oauthCode is the refusal word of a token fetch's error: the endpoint's
// OAuth error code (RFC 6749 §5.2, read from its JSON answer when
// x/oauth2 did not) when it is a plain word, never its body or
// description, which the endpoint chose and may echo the credentials in.
func oauthCode(err error) string {
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) {
		return refusedUnreachable
	}
	code := re.ErrorCode
	if code == "" {
		var e struct {
			Error string `json:"error"`
		}
		json.Unmarshal(re.Body, &e)
		code = e.Error
	}
	if code == "" {
		if re.Response != nil {
			return "status " + fmt.Sprint(re.Response.StatusCode)
		}
		return refusedUnreachable
	}
	if len(code) > 64 || strings.Trim(code, "abcdefghijklmnopqrstuvwxyz0123456789_-.") != "" {
		return "(not an OAuth error code)"
	}
	return code
}

// refreshBefore is how long before a token expires the next one is got:
// a tenth of its life, at least 10 s and at most 5 min. A token without
// an expiry is got again after defaultLife.
func refreshBefore(life time.Duration) time.Duration {
	return min(max(life/10, 10*time.Second), 5*time.Minute)
}

// nextMint is how long after a token of the given life (its expires_in,
// above 0) the next is got: refreshBefore its end, the life taken as at
// least MinLife. Every token swaps in a whole new engine, so the endpoint's
// word never makes the minter loop faster than one mint per
// MinLife-refreshBefore(MinLife) (50 s); a token that lives less than
// MinLife is sent past its end until then, and the bound host refuses it.
func nextMint(life time.Duration) time.Duration {
	life = max(life, MinLife)
	return life - refreshBefore(life)
}

// MinLife is the least life a token is scheduled with (nextMint). Real
// tokens live at least that: an hour at Google and Okta by default; Okta
// and Azure AD B2C allow no less than 5 minutes, Akamai Identity Cloud no
// less than 60 s (which nextMint still refreshes 10 s before its end).
const MinLife = time.Minute

// MaxTokenLen is the longest access token, and the longest refresh token
// an endpoint rotates to, that the minter takes; a longer one is refused
// (token-refused) and the minter backs off. Each token byte costs some
// kilobytes to build the scrubber of (every form of it), and an endpoint
// chooses the length. Real tokens fit with margin: Google's access tokens
// are at most 2048 bytes and its token-exchange (STS) tokens at most
// 12288; an Azure AD JWT carries at most 200 group ids (beyond that an
// overage claim), about 12 KB in all.
const MaxTokenLen = 16 << 10

// maxRetiredTokens is how many access tokens the minter replaced each
// secret's engine still scrubs, at most: the newest (retireMintedLocked).
const maxRetiredTokens = 4

const (
	defaultLife  = time.Hour
	firstBackoff = time.Second
	maxBackoff   = 5 * time.Minute
)

// mintRefusal is the refusal word of a token the endpoint answered, ""
// when the minter may take it: one already expired (expires_in not above
// 0, at now) or an access or refresh token longer than MaxTokenLen is
// refused before any engine is built with it.
func mintRefusal(tok *oauth2.Token, now time.Time) string {
	switch {
	case tok.AccessToken == "":
		return refusedUnusable
	case len(tok.AccessToken) > MaxTokenLen || len(tok.RefreshToken) > MaxTokenLen:
		return refusedTooLong
	case !tok.Expiry.IsZero() && !tok.Expiry.After(now):
		return refusedExpired
	}
	return ""
}

// Mint starts minting every OAuth secret's token, each on its own
// goroutine, its HTTP calls made with rt (the host's transport: its dial
// guard, its roots); stop ends them and waits. A Live with no OAuth
// secret starts nothing.
func (l *Live) Mint(rt http.RoundTripper) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	client := &http.Client{Transport: rt, Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, s := range l.cfg.Secrets {
		if s.OAuth == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.mintLoop(ctx, s, client)
		}()
	}
	return func() { cancel(); wg.Wait() }
}

// mintLoop gets s's tokens until ctx ends: at start, shortly before each
// expires (nextMint: never sooner than the floor, whatever expires_in
// says), and after a refusal with a doubling backoff. A change of the
// parts (a rotation) starts again with the new ones at once.
func (l *Live) mintLoop(ctx context.Context, s SecretConfig, client *http.Client) {
	backoff := firstBackoff
	var expiry time.Time // of the token held; zero: none
	var refresh string   // the refresh token the endpoint last returned
	var gen <-chan struct{}
	for ctx.Err() == nil {
		parts, changed := l.parts()
		if changed != gen {
			refresh, gen = "", changed // new parts: the file's refresh token again
		}
		// A source per fetch: x/oauth2's sources hand back a token they
		// hold until it is all but expired, and this loop fetches ahead.
		src, err := source(ctx, s, parts, refresh, client)
		var tok *oauth2.Token
		if err == nil {
			tok, err = src.Token()
		}
		now := l.now()
		var word string // the refusal; "" takes the token
		if err != nil {
			word = oauthCode(err)
		} else {
			word = mintRefusal(tok, now)
		}
		life := defaultLife
		if err == nil && !tok.Expiry.IsZero() {
			life = tok.Expiry.Sub(now)
		}
		if word == "" && l.setToken(s.Name, []byte(tok.AccessToken), rotated(tok, refresh, parts, s.Name), now.Add(life)) != nil {
			word = refusedUnusable
		}
		wait := backoff
		if word == "" {
			if tok.RefreshToken != "" {
				refresh = tok.RefreshToken // a rotating endpoint takes only the newest
			}
			backoff = firstBackoff
			expiry = now.Add(life)
			wait = nextMint(life)
			l.log("action", "mint", "result", "ok", "secret", s.Name)
		} else {
			keep := now.Before(expiry)
			l.setRefused(s.Name, word, keep)
			if !keep {
				expiry = time.Time{}
			} else {
				wait = min(wait, expiry.Sub(now))
			}
			backoff = min(backoff*2, maxBackoff)
		}
		select {
		case <-ctx.Done():
		case <-l.after(wait):
		case <-changed:
		}
	}
}

// valueSet is every value e holds, by name: each secret's (an OAuth
// secret's token, when it holds one), each OAuth secret's parts, and the
// refresh tokens its endpoint rotated to (which the Live holds, as it
// holds the tokens). Its callers hold the Live's lock.
func (e *Engine) valueSet() map[string][]byte {
	vals := make(map[string][]byte, len(e.secrets)+len(e.parts))
	for _, s := range e.secrets {
		if s.aws != nil {
			// An AWS key's values are its parts (contract.AWSValueNames):
			// without them a token's new engine could not be built beside
			// one.
			names := contract.AWSValueNames(s.name, s.aws.token != "")
			for i, v := range []string{s.aws.keyID, s.aws.secret, s.aws.token}[:len(names)] {
				vals[names[i]] = []byte(v)
			}
			continue
		}
		if !s.noToken {
			vals[s.name] = s.value
		}
		if s.oauth && e.live != nil {
			for _, n := range rotatedNames(s.name) {
				if v, ok := e.live.tokens[n]; ok {
					vals[n] = v
				}
			}
		}
	}
	for f, v := range e.parts {
		vals[f] = v
	}
	return vals
}

// rotatedNames are the names under which the Live holds (in its tokens,
// beside the access tokens) the refresh tokens secret name's endpoint
// rotated to: the newest, and the one before it (an answer in flight may
// still echo it). Neither is a file of the value directory nor a secret's
// name (a name holds no '.'), and neither is ever sent by the engine:
// the minter alone sends the newest, to the token endpoint. Each is
// scrubbed from every answer as the token is.
func rotatedNames(name string) [2]string {
	return [2]string{partFile(name, "refresh-token.rotated"), partFile(name, "refresh-token.rotated.before")}
}

// rotated is the refresh token tok brings that the engine does not hold
// yet (the file's, in parts, or the one held before, refresh), nil when
// none: an endpoint that rotates refresh tokens returns a new one with
// each access token.
func rotated(tok *oauth2.Token, refresh string, parts map[string][]byte, name string) []byte {
	if tok.RefreshToken == "" || tok.RefreshToken == refresh || tok.RefreshToken == string(parts[partFile(name, PartRefreshToken)]) {
		return nil
	}
	return []byte(tok.RefreshToken)
}

// sameParts reports whether a and b hold the same parts.
func sameParts(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for f, v := range a {
		if !bytes.Equal(v, b[f]) {
			return false
		}
	}
	return true
}

// stampLocked gives e's OAuth secrets the Live's mint states (l.mu held),
// before e is published.
func (l *Live) stampLocked(e *Engine) {
	for _, h := range e.secrets {
		if h.oauth {
			h.mint.refused = l.refusals[h.name]
		}
	}
}

// parts returns the parts the engine serving holds, and the channel a
// reload that changes them closes.
func (l *Live) parts() (map[string][]byte, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cur.Load().parts, l.partsGen
}

// setToken makes tok secret name's value, living until expiry: a new
// engine, the token it replaces retired (retireMintedLocked: never sent
// again, scrubbed while it may still be live). A token that breaks a
// value's rules is refused. refresh, when not nil, is the refresh token
// the endpoint rotated to: the new engine scrubs it (and the one it
// follows) from every answer, as it scrubs the file's. Nothing of the
// Live changes unless the new engine is built.
func (l *Live) setToken(name string, tok, refresh []byte, expiry time.Time) error {
	if err := valuedir.Check(name, tok, valuedir.Header); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	change := map[string][]byte{name: tok}
	if refresh != nil {
		newest, before := rotatedNames(name)[0], rotatedNames(name)[1]
		if old, ok := l.tokens[newest]; ok {
			change[before] = old
		}
		change[newest] = refresh
	}
	if err := l.rebuildLocked(name, change); err != nil {
		return err
	}
	delete(l.refusals, name)
	l.expiry[name] = expiry
	return nil
}

// setRefused records word as secret name's refusal. Unless keep (the
// token held is still within its life) the token is dropped: the engine
// answers tokenReply until a mint succeeds.
func (l *Live) setRefused(name, word string, keep bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, held := l.tokens[name]; !keep && (held || l.refusals[name] != word) {
		prev := l.refusals[name]
		l.refusals[name] = word
		if err := l.rebuildLocked(name, map[string][]byte{name: nil}); err != nil {
			l.refusals[name] = prev
			l.log("action", "mint", "result", "refused", "secret", name, "reason", "engine")
			return
		}
	}
	l.log("action", "mint", "result", "refused", "secret", name, "reason", ReasonTokenRefused)
}

// rebuildLocked swaps in the engine whose minted values of secret are
// change's (by name, l.tokens' names; nil: none), the access token it
// replaces retired as retireMintedLocked says; l.tokens follows only once
// the engine is built.
func (l *Live) rebuildLocked(secret string, change map[string][]byte) error {
	old := l.cur.Load()
	cur := old.valueSet()
	vals := old.valueSet()
	for n, v := range change {
		delete(vals, n)
		if v != nil {
			vals[n] = v
		}
	}
	now := l.now()
	// The minter's values are retired here, not in l.retired: l.retired
	// sees no change, and drops what ended.
	next, _ := l.retired.Next(now, vals, vals)
	spent := l.retireMintedLocked(now, secret, cur, change[secret])
	e, err := newEngine(l.cfg, vals, retiredMap(next, spent))
	if err != nil {
		next.Abandon(&l.retired)
		dropSpent(spent, l.spent)
		return err
	}
	for n, v := range change {
		if v != nil {
			l.tokens[n] = bytes.Clone(v)
		} else {
			delete(l.tokens, n)
		}
	}
	e.live = l
	l.stampLocked(e)
	l.retired.Replace(next)
	dropSpent(l.spent, spent)
	l.spent = spent
	l.cur.Store(e)
	return nil
}

// spentValue is an access token the minter replaced, still scrubbed under
// its secret's label until until.
type spentValue struct {
	secret string
	value  []byte
	until  time.Time
}

// retireMintedLocked is l.spent once secret's access token (in cur, the
// values serving) is replaced by tok (nil: none), at now: the token
// replaced is retired until the grace window ends or, when sooner, its own
// life does (l.expiry: past it every bound host refuses the token, so it
// is dead and need not be scrubbed); what ended is dropped; and of
// secret's, only the newest maxRetiredTokens are kept. The minter mints at
// most once per nextMint(MinLife), each time replacing a token within
// refreshBefore (a tenth) of its end, so on its own it keeps at most two
// retired tokens within their life: the last, and one whose last tenth
// outlasts the mints after it (it lived over 500 s; a second such lived
// over 450 s after the first was retired, and the first was dead by then).
// More come only from rotations of the parts (each mints at once), and
// the cap drops the oldest of those. A refresh token
// the endpoint rotated away from is not retired: the one before the
// newest is still held (rotatedNames), and one older an endpoint that
// rotates has revoked.
func (l *Live) retireMintedLocked(now time.Time, secret string, cur map[string][]byte, tok []byte) []spentValue {
	out := l.liveSpent(now)
	if prev, ok := cur[secret]; ok && !bytes.Equal(prev, tok) {
		until := now.Add(l.retired.Grace)
		if e := l.expiry[secret]; !e.IsZero() && e.Before(until) {
			until = e
		}
		if now.Before(until) {
			out = append(out, spentValue{secret: secret, value: bytes.Clone(prev), until: until})
		}
	}
	kept := 0
	for i := len(out) - 1; i >= 0; i-- {
		if out[i].secret != secret {
			continue
		}
		if kept++; kept > maxRetiredTokens {
			out = append(out[:i], out[i+1:]...)
		}
	}
	return out
}

// dropSpent clears the bytes of each value of from that keep does not
// hold.
func dropSpent(from, keep []spentValue) {
	for _, v := range from {
		held := false
		for _, k := range keep {
			held = held || &k.value[0] == &v.value[0]
		}
		if !held {
			clear(v.value)
		}
	}
}

// retiredMap is the retired values a new engine scrubs, by name: next's
// (the value directory's rotations) and spent's (the minter's, each under
// its secret's name).
func retiredMap(next valuedir.RetiredSet, spent []spentValue) map[string][][]byte {
	m := next.Map()
	for _, v := range spent {
		m[v.secret] = append(m[v.secret], v.value)
	}
	return m
}

// HasOAuth reports whether a secret of c is an OAuth secret: only then
// does a host build a minter's transport (TokenTransport) and call Mint.
func (c *Config) HasOAuth() bool {
	for _, s := range c.Secrets {
		if s.OAuth != nil {
			return true
		}
	}
	return false
}

// TokenTransport is the transport every host gives Mint: dialer's dials,
// each address checked by the dial guard (e.DialBound: the guard unless
// the config allows local targets) after resolution and before the
// connection is made, and TLS verified against roots — the roots of every
// upstream (ca/upstream.crt), so a token endpoint is trusted as a bound
// target is.
func TokenTransport(e *Engine, dialer *net.Dialer, roots *x509.CertPool) http.RoundTripper {
	d := *dialer
	d.Control = func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return err
		}
		if r := e.DialBound("the token endpoint", ap.Addr()); r != nil {
			return errors.New("the dial guard refused the token endpoint's address")
		}
		return nil
	}
	return &http.Transport{
		DialContext:         d.DialContext,
		TLSClientConfig:     &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout: 10 * time.Second,
		ForceAttemptHTTP2:   true,
		MaxIdleConns:        4,
		IdleConnTimeout:     90 * time.Second,
	}
}

// CheckOAuth is the check custodian.json's oauth entry gets (secret name,
// at its place at), for a reader that writes one (the manifest): one rule.
func CheckOAuth(at, name string, o *OAuthConfig, localTargets bool) error {
	return o.check(at, name, localTargets)
}
