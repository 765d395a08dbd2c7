package contract

// An AWS held secret (the manifest's "aws" object) is three values, each a
// file of the value directory named as its part: NAME_ACCESS_KEY_ID,
// NAME_SECRET_ACCESS_KEY and, when the secret holds one, NAME_SESSION_TOKEN.
// Each part has its own stand-in (StandIn of the part's name), which the
// Harness reads from the variable the AWS SDKs read.

// AWSPart is one part of an AWS held secret.
type AWSPart struct {
	Suffix string // appended to the secret's name: its value file and stand-in
	Env    string // the Harness variable that carries its stand-in
}

// The parts, in the order an SDK reads them.
var (
	AWSKeyID  = AWSPart{Suffix: "_ACCESS_KEY_ID", Env: "AWS_ACCESS_KEY_ID"}
	AWSSecret = AWSPart{Suffix: "_SECRET_ACCESS_KEY", Env: "AWS_SECRET_ACCESS_KEY"}
	AWSToken  = AWSPart{Suffix: "_SESSION_TOKEN", Env: "AWS_SESSION_TOKEN"}
)

// AWSParts are the parts of an AWS held secret, the session token last.
var AWSParts = []AWSPart{AWSKeyID, AWSSecret, AWSToken}

// Of is the name of p of the held secret name: its value file's name and
// the name its stand-in is made of.
func (p AWSPart) Of(name string) string { return name + p.Suffix }

// AWSValueNames are the value files of the AWS held secret name: its key
// id and secret key, and its session token when token is set.
func AWSValueNames(name string, token bool) []string {
	out := []string{AWSKeyID.Of(name), AWSSecret.Of(name)}
	if token {
		out = append(out, AWSToken.Of(name))
	}
	return out
}
