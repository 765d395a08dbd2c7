package manifest

import (
	"strings"

	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/internal/contract"
)

// aws reads a secret's "aws" object: nil when absent. An AWS secret's
// credential rides SigV4's own headers, so it names no headers; its parts
// are keys of the pod's convention Secret, so it has no valueFrom; and a
// pod holds one, since the Harness reads its stand-ins from the one set of
// variables the AWS SDKs read (AWS_ACCESS_KEY_ID, …).
func (s *secretsChecker) aws(at, name string, v *value, headers bool) *AWS {
	f := v.fields["aws"]
	if f == nil || f.kind == kNull {
		return nil
	}
	at = member(at, "aws")
	if f.kind != kObject {
		s.add(at, "shape", `%s; write {} or {"sessionToken": true}`, f.kind)
		return nil
	}
	s.unknown(f, at, []string{"sessionToken"}, `an aws object has sessionToken only`)
	a := &AWS{}
	if t := f.fields["sessionToken"]; t != nil && t.kind != kNull {
		if t.kind != kBool {
			s.add(member(at, "sessionToken"), "shape", "%s; write true when the key has a session token, else leave it out", t.kind)
		}
		a.SessionToken = t.truth
	}
	if headers {
		s.add(member(at[:len(at)-len(".aws")], "headers"), "R6", "an aws secret signs the request (SigV4) and rides its Authorization and X-Amz-Security-Token; leave headers out")
	}
	if fr := v.fields["valueFrom"]; fr != nil && fr.kind != kNull {
		s.add(member(at[:len(at)-len(".aws")], "valueFrom"), "R4", "an aws secret's parts (%s) are keys of the pod's convention Secret; leave valueFrom out", strings.Join(contract.AWSValueNames(name, true), ", "))
	}
	if s.awsAt != "" {
		s.add(at, "R3", "a pod holds one aws secret (first at %s): the Harness reads its stand-ins from AWS_ACCESS_KEY_ID and the other AWS variables; bind every AWS host to that one", s.awsAt)
		return nil
	}
	s.awsAt = at[:len(at)-len(".aws")]
	return a
}

// awsHosts refuses an aws secret's target that names no AWS region and
// service: the engine checks a signature's scope against the bound host's.
func (s *secretsChecker) awsHosts(hosts, paths []string) {
	for i, h := range hosts {
		t, msg := Target(h)
		if msg != "" {
			continue // refused by targets
		}
		host, _, err := contract.SplitTarget(t)
		if err != nil {
			continue
		}
		if _, _, ok := filter.AWSScope(host); !ok {
			s.add(paths[i], "R5", "%s names no AWS region and service; %s", quote(h), filter.AWSHostFix)
		}
	}
}
