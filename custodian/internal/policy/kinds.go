package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/internal/contract"
	"jr2.dev/boundary/internal/strictjson"
)

// The two kinds of secret beside a plain value are custodian.json's own:
// a secret's aws and oauth tables are read into the engine's types
// (filter.AWSConfig, filter.OAuthConfig) by the engine's strict reader
// (package strictjson: a key unknown or spelled in another case is
// refused with its path; TOML itself refuses a key given twice), and
// checked by the engine's rules (filter.AWSScope, filter.CheckOAuth), so a
// policy and custodian.json cannot come to mean two things by one word.

// kinds reads the aws and oauth tables of the secret at key: nil for
// each that is absent; ok is false when one was refused (the secret is
// then checked no further: what its other keys mean depends on its kind).
func (c *checker) kinds(key, name string, m map[string]any) (_ *filter.AWSConfig, _ *filter.OAuthConfig, ok bool) {
	n := len(c.errs)
	var a *filter.AWSConfig
	var o *filter.OAuthConfig
	if _, ok := m["aws"]; ok {
		a = &filter.AWSConfig{}
		if !c.table(key+".aws", m["aws"], a, "{} or { sessionToken = true }") {
			a = nil
		}
	}
	if _, ok := m["oauth"]; ok {
		o = &filter.OAuthConfig{}
		if !c.table(key+".oauth", m["oauth"], o, `{ grant = "client-credentials", tokenURL = "https://…/token", scopes = ["…"] }`) {
			o = nil
		} else if err := filter.CheckOAuth(key, name, o, false); err != nil {
			c.errs = append(c.errs, err)
			o = nil
		}
	}
	if a != nil && o != nil {
		c.fail(key, "an aws secret signs with its key and an oauth secret swaps a token it mints; give %s one of aws and oauth", name)
	}
	return a, o, len(c.errs) == n
}

// table decodes the TOML table v, written at k, into the engine's type
// into with strictjson, and reports whether it could.
func (c *checker) table(k string, v any, into any, example string) bool {
	t, ok := v.(map[string]any)
	if !ok {
		c.fail(k, "must be a table, like %s", example)
		return false
	}
	b, err := json.Marshal(t)
	if err == nil {
		err = strictjson.Decode(b, into, "", "")
	}
	if err == nil {
		return true
	}
	var fe *strictjson.FieldError
	switch {
	case errors.As(err, &fe) && fe.Path != "":
		c.fail(k+"."+fe.Path, "%s", fe.Msg)
	case errors.As(err, &fe):
		c.fail(k, "%s", fe.Msg)
	default:
		c.fail(k, "must be a table, like %s", example)
	}
	return false
}

// awsSecret checks the rest of the aws secret at key: its parts are read
// from the variables the AWS SDKs read (contract.AWSParts), which the
// child gets their stand-ins in, so a policy holds one aws secret, it
// names no env, headers, shape or parts, and each host names an AWS
// region and service.
func (c *checker) awsSecret(key string, m map[string]any, s *Secret, envs map[string]string, standIns map[string]string) {
	for _, k := range []string{"env", "headers", "shape", "parts"} {
		if _, ok := m[k]; ok {
			c.fail(key+"."+k, "an aws secret reads its parts from %s and rides %s; leave %s out", awsVars(), strings.Join(filter.AWSHeaders, " and "), k)
		}
	}
	for _, p := range contract.AWSParts {
		if prev, dup := envs[p.Env]; dup {
			c.fail(key+".aws", "%s already reads %s; a policy holds one aws secret, whose parts are %s", prev, p.Env, awsVars())
			return
		}
	}
	for _, p := range contract.AWSParts {
		envs[p.Env] = key
	}
	s.Headers = append([]string(nil), filter.AWSHeaders...)
	s.Hosts = c.secretHosts(key, m)
	raw, _ := m["hosts"].([]any)
	for i, h := range s.Hosts {
		if _, _, ok := filter.AWSScope(h.Name); !ok {
			at := key + ".hosts"
			if i < len(raw) && len(raw) == len(s.Hosts) {
				at = fmt.Sprintf("%s.hosts[%d]", key, i)
			}
			c.fail(at, "%q names no AWS region and service; bind a host named <service>.<region>.amazonaws.com", h.Name)
		}
	}
	s.Shape, s.StandIn = c.shape(key, s.Name, map[string]any{}, standIns)
	for _, p := range contract.AWSParts {
		si := contract.StandIn(p.Of(s.Name))
		if other, dup := standIns[si]; dup {
			c.fail(key, "its part %s is named as %s; rename one of them", p.Of(s.Name), other)
			continue
		}
		standIns[si] = key
	}
}

// awsVars lists the AWS SDKs' variables of an aws secret's parts.
func awsVars() string {
	var vs []string
	for _, p := range contract.AWSParts {
		vs = append(vs, p.Env)
	}
	return strings.Join(vs, ", ")
}

// parts reads the parts table of the secret at key: for an OAuth secret
// (o set), the runner's variable of each of its grant's parts, exactly
// those; for any other, refused.
func (c *checker) parts(key string, o *filter.OAuthConfig, m map[string]any, envs map[string]string) map[string]string {
	v, present := m["parts"]
	if o == nil {
		if present {
			if _, oauth := m["oauth"]; !oauth {
				c.fail(key+".parts", "only an oauth secret has parts; leave parts out, or give the secret an oauth table")
			}
		}
		return nil
	}
	want := o.Parts()
	example := make([]string, len(want))
	for i, p := range want {
		example[i] = tomlKey(p) + ` = "…"`
	}
	if !present {
		c.fail(key, "no parts; name the runner's variable of each part of the %s grant, like parts = { %s }", o.Grant, strings.Join(example, ", "))
		return nil
	}
	t, ok := v.(map[string]any)
	if !ok {
		c.fail(key+".parts", "must be a table, like parts = { %s }", strings.Join(example, ", "))
		return nil
	}
	unknown(c, key+".parts.", t, want, "the "+o.Grant+" grant's parts are "+strings.Join(want, ", "))
	out := map[string]string{}
	for _, p := range want {
		pv, ok := t[p]
		if !ok {
			c.fail(key+".parts", "no %s; name the runner's variable that holds it, like %s = \"…\"", tomlKey(p), tomlKey(p))
			continue
		}
		if env := c.variable(key+".parts."+tomlKey(p), key, pv, envs); env != "" {
			out[p] = env
		}
	}
	return out
}

// tomlKey is k as a TOML key is written: bare, or quoted when it holds a
// character a bare key cannot (key.json's dot).
func tomlKey(k string) string {
	if strings.Trim(k, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == "" {
		return k
	}
	return fmt.Sprintf("%q", k)
}
