package filter

import (
	"fmt"
	"slices"
	"strings"

	"jr2.dev/boundary/internal/contract"
)

// AWSConfig is a held secret of the AWS kind: an access key id, a secret
// key and, when SessionToken is set, a session token, each a file of the
// value directory (contract.AWSValueNames). Such a key signs a request
// (SigV4) and never rides one; the agent signs with the parts' stand-ins,
// and the engine checks that signature and signs the request again with
// the real key toward the bound hosts (sigv4.go).
type AWSConfig struct {
	// SessionToken is set when the key is a temporary one with a session
	// token (NAME_SESSION_TOKEN in the value directory).
	SessionToken bool `json:"sessionToken,omitempty"`
}

// AWSHeaders are the headers of an AWS held secret in custodian.json: the
// SigV4 Authorization, and the session token's header. Both are
// credential headers, so rule 8 removes whichever the engine did not
// write.
var AWSHeaders = []string{"authorization", "x-amz-security-token"}

// awsSigningNames are the SigV4 service names of endpoint prefixes whose
// signing name is not the prefix itself.
var awsSigningNames = map[string]string{
	"bedrock-runtime":       "bedrock",
	"bedrock-agent":         "bedrock",
	"bedrock-agent-runtime": "bedrock",
}

// awsGlobal are the endpoint prefixes of AWS's global endpoints,
// <prefix>.amazonaws.com, which name no region and sign for us-east-1, as
// the SDKs sign for them.
var awsGlobal = map[string]bool{"sts": true, "iam": true, "s3": true}

// awsGlobalRegion is the region a global endpoint signs for.
const awsGlobalRegion = "us-east-1"

// AWSScope is the region and SigV4 service a bound AWS host signs for,
// read from its name: <prefix>.<region>.amazonaws.com (a virtual-hosted
// S3 bucket may stand before it: bucket.s3.<region>.amazonaws.com), or a
// global endpoint, sts.amazonaws.com, iam.amazonaws.com or
// s3.amazonaws.com (bucket.s3.amazonaws.com), which signs for us-east-1.
// The service is the prefix's signing name (bedrock-runtime signs as
// "bedrock"). ok is false for any other name.
func AWSScope(host string) (region, service string, ok bool) {
	labels := strings.Split(strings.TrimSuffix(strings.ToLower(host), "."), ".")
	n := len(labels)
	if n < 3 || labels[n-1] != "com" || labels[n-2] != "amazonaws" {
		return "", "", false
	}
	if awsGlobal[labels[n-3]] {
		return awsGlobalRegion, labels[n-3], true
	}
	if n < 4 {
		return "", "", false
	}
	region, prefix := labels[n-3], labels[n-4]
	if !awsRegion(region) || prefix == "" {
		return "", "", false
	}
	if s, ok := awsSigningNames[prefix]; ok {
		return region, s, true
	}
	return region, prefix, true
}

// AWSHostFix is the fix both readers of a bound AWS host name (this one,
// and the manifest's) give for a host AWSScope cannot place.
const AWSHostFix = "bind a host named <service>.<region>.amazonaws.com (bedrock-runtime.us-east-1.amazonaws.com), or a global endpoint (sts.amazonaws.com, iam.amazonaws.com, s3.amazonaws.com)"

// awsRegion reports whether r is spelled as an AWS region: letters and
// digits in at least three '-'-separated words (us-east-1, us-gov-west-1).
func awsRegion(r string) bool {
	words := strings.Split(r, "-")
	if len(words) < 3 {
		return false
	}
	for _, w := range words {
		if w == "" || strings.Trim(w, "abcdefghijklmnopqrstuvwxyz0123456789") != "" {
			return false
		}
	}
	return true
}

// checkAWS checks an AWS held secret at path at: its headers are
// AWSHeaders, each target names a region and service (AWSScope), and no
// other secret is named as one of its value files.
func checkAWS(at string, s *SecretConfig, seen map[string]bool) error {
	if !slices.Equal(s.Headers, AWSHeaders) {
		return fmt.Errorf("%s.headers: an aws secret rides %s; write [%q, %q]", at, strings.Join(AWSHeaders, " and "), AWSHeaders[0], AWSHeaders[1])
	}
	for j, t := range s.Targets {
		host, _, err := contract.SplitTarget(t)
		if err != nil {
			continue // refused with its reason below
		}
		if _, _, ok := AWSScope(host); !ok {
			return fmt.Errorf("%s.targets[%d]: %q names no AWS region and service; %s", at, j, t, AWSHostFix)
		}
	}
	for _, n := range s.ValueNames() {
		if seen[n] {
			return fmt.Errorf("%s.name: %s's value file %s is another held secret's name; rename one of them", at, s.Name, n)
		}
		seen[n] = true
	}
	return nil
}
