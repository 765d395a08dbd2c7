// Package gitcred is the git credential helper a Harness's stock git uses
// to answer the Custodian's 401 challenge (filter.Challenge, rule 9) with
// a stand-in as the Basic password, so git clones and pushes over https
// with no flag: one rendering, taken by harness.env (controlplane render)
// and by the child of custodian run (its broker), so the two cannot
// differ.
//
// Invariant: what it renders holds stand-ins only (public), never a value;
// it is git configuration from the environment (GIT_CONFIG_COUNT,
// GIT_CONFIG_KEY_n, GIT_CONFIG_VALUE_n), which a manifest or a policy may
// not hold itself (contract.ProxyOrTrustVar).
package gitcred

import (
	"fmt"
	"strings"
)

// User is the Basic user of the helper: the engine swaps the password
// whatever the user, and GitHub, GitLab and Gitea accept a token under any
// user.
const User = "x-access-token"

// Binding is one bound target ("host:port") of a secret that rides
// authorization, and that secret's stand-in.
type Binding struct {
	Target, StandIn string
}

// Env is GIT_CONFIG_COUNT and, per binding in order, two entries: an empty
// credential.https://HOST.helper, which drops every helper configured
// before it for that URL, and one that answers git's "get" with the
// stand-in as the password. It returns name, value pairs in that order,
// or none for no binding.
func Env(bindings []Binding) [][2]string {
	if len(bindings) == 0 {
		return nil
	}
	var kv [][2]string
	for _, b := range bindings {
		key := "credential." + URL(b.Target) + ".helper"
		kv = append(kv, [2]string{key, ""}, [2]string{key, Helper(b.StandIn)})
	}
	out := [][2]string{{"GIT_CONFIG_COUNT", fmt.Sprint(len(kv))}}
	for i, e := range kv {
		out = append(out, [2]string{fmt.Sprintf("GIT_CONFIG_KEY_%d", i), e[0]}, [2]string{fmt.Sprintf("GIT_CONFIG_VALUE_%d", i), e[1]})
	}
	return out
}

// Helper is a shell credential helper that prints the Basic pair on
// "get" and ignores "store" and "erase". It holds no "$(" (Kubernetes
// would expand it in an env value) and no newline.
func Helper(standIn string) string {
	return `!f() { test "$1" = get || return 0; echo username=` + User + `; echo password=` + standIn + `; }; f`
}

// URL is the https URL git matches a credential against: the host, and
// the port when it is not 443.
func URL(target string) string {
	if strings.HasSuffix(target, ":443") {
		return "https://" + strings.TrimSuffix(target, ":443")
	}
	return "https://" + target
}
