package broker

import (
	"slices"
	"strings"
	"testing"

	"jr2.dev/boundary/internal/contract"
)

// kindsPolicy holds an AWS key and an OAuth secret.
const kindsPolicy = `allow_hosts = ["s3.us-east-1.amazonaws.com", "api.example.com"]
[secrets]
AWS = { hosts = ["s3.us-east-1.amazonaws.com"], aws = {} }
API = { env = "API_TOKEN", hosts = ["api.example.com"], oauth = { grant = "client-credentials", tokenURL = "https://auth.example.com/token" }, parts = { client-id = "API_ID", client-secret = "API_SECRET" } }
`

// The kinds' values: sentinels all, but the client id.
const (
	kindKeyID    = "AKIABROKERTESTKEY0001"
	kindSecret   = "SENTINEL-broker-aws-secret-Zx8Cv7Bn6M"
	kindClientID = "broker-client"
	kindClient   = "SENTINEL-broker-client-secret-Lk9Jh8Gf"
)

func kinds(t *testing.T, environ []string) (*Broker, error) {
	t.Helper()
	return loadText(t, kindsPolicy, environ)
}

// TestKindsChildEnv: the child gets the AWS key's three stand-ins in the
// AWS SDKs' variables (the session token's too, though this key has
// none) and the OAuth secret's stand-in in its env; neither a part's
// variable nor a copy of a part under another name reaches it (a copy of
// an AWS part becomes that part's stand-in); no git credential helper is
// set for the AWS key (the OAuth secret, in authorization, gets one).
func TestKindsChildEnv(t *testing.T) {
	environ := []string{"PATH=/usr/bin", "AWS_ACCESS_KEY_ID=" + kindKeyID, "AWS_SECRET_ACCESS_KEY=" + kindSecret,
		"AWS_SESSION_TOKEN=left-over-token-of-another-key", "API_ID=" + kindClientID, "API_SECRET=" + kindClient,
		"COPY_OF_SECRET=" + kindSecret, "URL_WITH_CLIENT=https://x:" + kindClient + "@h", "API_TOKEN=whatever-the-runner-had"}
	b, err := kinds(t, environ)
	if err != nil {
		t.Fatal(err)
	}
	env, standIns := b.ChildEnv(environ, "http://10.0.0.1:8080", "/ca.pem")
	for _, want := range []string{
		"AWS_ACCESS_KEY_ID=" + contract.StandIn("AWS_ACCESS_KEY_ID"),
		"AWS_SECRET_ACCESS_KEY=" + contract.StandIn("AWS_SECRET_ACCESS_KEY"),
		"AWS_SESSION_TOKEN=" + contract.StandIn("AWS_SESSION_TOKEN"),
		"COPY_OF_SECRET=" + contract.StandIn("AWS_SECRET_ACCESS_KEY"),
		"API_TOKEN=" + contract.StandIn("API"),
	} {
		if !slices.Contains(env, want) {
			t.Errorf("the child's environment lacks %s:\n%s", want, strings.Join(env, "\n"))
		}
	}
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "API_ID" || k == "API_SECRET" || k == "URL_WITH_CLIENT":
			t.Errorf("the child got %s", k)
		case strings.HasPrefix(k, "GIT_CONFIG") && strings.Contains(kv, "amazonaws"):
			t.Errorf("a git credential helper for an AWS key: %s", kv)
		case strings.Contains(kv, kindSecret) || strings.Contains(kv, kindClient) || strings.Contains(kv, kindKeyID) || strings.Contains(kv, "left-over"):
			t.Errorf("a value reached the child: %s", k)
		}
	}
	for _, v := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "API_TOKEN"} {
		if !slices.Contains(standIns, v) {
			t.Errorf("stand-in variables %v lack %s", standIns, v)
		}
	}
	if !b.Contains([]byte("x "+kindClient)) || !b.Contains([]byte(kindKeyID)) {
		t.Error("Contains misses the client secret or the key id")
	}
}

// TestKindsRefuse: a part's variable that is unset, or a part the engine
// refuses, refuses the run naming the secret and the variable, never the
// value.
func TestKindsRefuse(t *testing.T) {
	base := []string{"AWS_ACCESS_KEY_ID=" + kindKeyID, "AWS_SECRET_ACCESS_KEY=" + kindSecret, "API_ID=" + kindClientID, "API_SECRET=" + kindClient}
	for _, tc := range []struct {
		drop, add, want string
	}{
		{"AWS_SECRET_ACCESS_KEY", "", "secrets.AWS: the runner's variable AWS_SECRET_ACCESS_KEY is unset or empty; export the key's secret_access_key in it"},
		{"API_SECRET", "", "secrets.API: the runner's variable API_SECRET is unset or empty; export the grant's client-secret in it"},
		{"API_SECRET", "API_SECRET=short", "secrets.API: the runner's variable API_SECRET: held secret API.client-secret: the value is shorter than"},
		{"API_ID", "API_ID=bad\x01id", "secrets.API: the runner's variable API_ID: held secret API.client-id: the client id is not printable ASCII"},
	} {
		var environ []string
		for _, kv := range base {
			if !strings.HasPrefix(kv, tc.drop+"=") {
				environ = append(environ, kv)
			}
		}
		if tc.add != "" {
			environ = append(environ, tc.add)
		}
		_, err := kinds(t, environ)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("without %s: %v; want %q", tc.drop, err, tc.want)
			continue
		}
		for _, v := range []string{kindSecret, kindClient} {
			if strings.Contains(err.Error(), v) {
				t.Errorf("the error carries a value: %v", err)
			}
		}
	}
}
