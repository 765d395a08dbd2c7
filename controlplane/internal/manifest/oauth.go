package manifest

import (
	"strings"

	"jr2.dev/boundary/filter"
)

// oauth reads a secret's oauth: {"grant": …, "tokenURL": …, "scopes": […]},
// an access token the Custodian gets itself from the token endpoint with
// the grant's parts (filter.OAuthConfig); nil when absent. The engine's
// own check (filter.CheckOAuth) decides what is refused, so a manifest
// render accepts is a custodian.json every host runs. Its parts come from
// the pod's convention Secret, keys <name>.<part>: a valueFrom names one
// key, and is refused beside oauth.
func (s *secretsChecker) oauth(at, name string, v *value) *filter.OAuthConfig {
	f := v.fields["oauth"]
	if f == nil || f.kind == kNull {
		return nil
	}
	at = member(at, "oauth")
	if f.kind != kObject {
		s.add(at, "shape", `%s; write {"grant": …, "tokenURL": …, "scopes": […]}`, f.kind)
		return nil
	}
	s.unknown(f, at, []string{"grant", "tokenURL", "scopes"}, "oauth has grant, tokenURL and scopes")
	o := &filter.OAuthConfig{}
	o.Grant, _ = s.text(f, at, "grant")
	o.TokenURL, _ = s.text(f, at, "tokenURL")
	o.Scopes = s.stringList(f, at, "scopes", "scopes").items
	if vf := v.fields["valueFrom"]; vf != nil && vf.kind != kNull {
		s.add(member(strings.TrimSuffix(at, ".oauth"), "valueFrom"), "R4", "an OAuth secret's parts come from the pod's convention Secret, one key each (%s.<part>); leave valueFrom out", name)
	}
	if err := filter.CheckOAuth("secrets[i]", name, o, s.opts.AllowLocalTargets); err != nil {
		// the engine's words, at this manifest's path
		msg := strings.TrimPrefix(err.Error(), "secrets[i].oauth")
		path := at
		if field, rest, ok := strings.Cut(msg, ": "); ok {
			path, msg = at+field, rest
		}
		s.add(path, "oauth", "%s", msg)
		return nil
	}
	return o
}
