package broker

import (
	"encoding/base64"
	"reflect"
	"strings"
	"testing"

	"jr2.dev/boundary/custodian/internal/policy"
	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/internal/contract"
	"jr2.dev/boundary/internal/gitcred"
)

const sentinel = "sk-sentinel-9f8e7d6c5b4a"

const testPolicy = `
allow_hosts = ["api.example.com", "other.example.com", "plain.example.com:80"]
[secrets]
EXAMPLE_TOKEN = { env = "EXAMPLE_TOKEN", hosts = ["api.example.com"] }
GH = { env = "GITHUB_TOKEN", hosts = ["other.example.com"], headers = ["x-token"] }
`

func load(t *testing.T, environ []string) (*Broker, error) {
	t.Helper()
	return loadText(t, testPolicy, environ)
}

// loadText is load under the policy text.
func loadText(t *testing.T, text string, environ []string) (*Broker, error) {
	t.Helper()
	pol, err := policy.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return New(pol, environ)
}

func TestNewRefusesBadValues(t *testing.T) {
	for _, tc := range []struct {
		name    string
		environ []string
		want    string
	}{
		{"unset", []string{"GITHUB_TOKEN=" + sentinel}, "secrets.EXAMPLE_TOKEN: the runner's variable EXAMPLE_TOKEN is unset or empty"},
		{"empty", []string{"EXAMPLE_TOKEN=", "GITHUB_TOKEN=" + sentinel}, "secrets.EXAMPLE_TOKEN: the runner's variable EXAMPLE_TOKEN is unset or empty"},
		{"short", []string{"EXAMPLE_TOKEN=" + sentinel, "GITHUB_TOKEN=abc"}, "held secret GH: the value is shorter than"},
		{"not printable", []string{"EXAMPLE_TOKEN=" + sentinel + "\x01", "GITHUB_TOKEN=" + sentinel + "x"}, "held secret EXAMPLE_TOKEN: byte 24 of the value is outside 0x20-0x7E"},
	} {
		_, err := load(t, tc.environ)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want %q", tc.name, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), sentinel) {
			t.Errorf("%s: the error carries the value: %v", tc.name, err)
		}
	}
}

func good(t *testing.T) *Broker {
	t.Helper()
	b, err := load(t, []string{"PATH=/usr/bin", "EXAMPLE_TOKEN=" + sentinel, "GITHUB_TOKEN=gh-" + sentinel,
		"https_proxy=http://old:1", "Http_Proxy=http://old:2", "NO_PROXY=*", "SSL_CERT_FILE=/old.pem", "HOME=/root"})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestEngineSwapsOnlyTowardBoundHosts: the engine the broker builds holds
// each secret bound to its policy hosts, in its headers.
func TestEngineSwapsOnlyTowardBoundHosts(t *testing.T) {
	b := good(t)
	eng := b.Engine()
	if got, want := eng.Targets(), []string{"api.example.com:443", "other.example.com:443"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("targets %v, want %v", got, want)
	}
	for _, tc := range []struct {
		target, header, standIn, want string
	}{
		{"api.example.com:443", "Authorization", "Bearer jr2-held-EXAMPLE_TOKEN", "Bearer " + sentinel},
		{"other.example.com:443", "X-Token", "jr2-held-GH", "gh-" + sentinel},
	} {
		h, _, _ := contract.SplitTarget(tc.target)
		req := filter.Request{Method: "GET", Authority: h, Path: "/", Headers: []filter.Header{{Name: tc.header, Value: tc.standIn}}}
		d := eng.DecideRequest(tc.target, &req)
		if d.Reply != nil || len(d.Set) == 0 || d.Set[0].Value != tc.want {
			t.Errorf("%s: %+v", tc.target, d)
		}
	}
	if got := eng.Targets(); !reflect.DeepEqual(got, []string{"api.example.com:443", "other.example.com:443"}) {
		t.Errorf("bound targets %q", got)
	}
}

func TestChildEnv(t *testing.T) {
	b := good(t)
	env, standIns := b.ChildEnv([]string{"PATH=/usr/bin", "EXAMPLE_TOKEN=" + sentinel, "GITHUB_TOKEN=gh-" + sentinel,
		"https_proxy=http://old:1", "Http_Proxy=http://old:2", "NO_PROXY=*", "SSL_CERT_FILE=/old.pem", "CURL_CA_BUNDLE=/old.pem", "node_options=--x", "HOME=/root"},
		"http://10.231.0.1:8080", "/tmp/ca/ca.pem")
	want := []string{
		"PATH=/usr/bin", "HOME=/root",
		"EXAMPLE_TOKEN=jr2-held-EXAMPLE_TOKEN", "GITHUB_TOKEN=jr2-held-GH",
		"HTTPS_PROXY=http://10.231.0.1:8080", "https_proxy=http://10.231.0.1:8080",
		"HTTP_PROXY=http://10.231.0.1:8080", "http_proxy=http://10.231.0.1:8080", "NODE_USE_ENV_PROXY=1",
		"SSL_CERT_FILE=/tmp/ca/ca.pem", "REQUESTS_CA_BUNDLE=/tmp/ca/ca.pem",
		"NODE_EXTRA_CA_CERTS=/tmp/ca/ca.pem", "GIT_SSL_CAINFO=/tmp/ca/ca.pem",
		"CURL_CA_BUNDLE=/tmp/ca/ca.pem", "AWS_CA_BUNDLE=/tmp/ca/ca.pem", "PIP_CERT=/tmp/ca/ca.pem",
		// harness.env's git credential helper (gitcred) for the host of the
		// secret that rides authorization; not for the one in X-Token.
		"GIT_CONFIG_COUNT=2",
		"GIT_CONFIG_KEY_0=credential.https://api.example.com.helper", "GIT_CONFIG_VALUE_0=",
		"GIT_CONFIG_KEY_1=credential.https://api.example.com.helper", "GIT_CONFIG_VALUE_1=" + gitcred.Helper("jr2-held-EXAMPLE_TOKEN"),
	}
	if !reflect.DeepEqual(env, want) {
		t.Errorf("env:\n%q\nwant\n%q", env, want)
	}
	if !reflect.DeepEqual(standIns, []string{"EXAMPLE_TOKEN", "GITHUB_TOKEN"}) {
		t.Errorf("stand-ins %v", standIns)
	}
	if strings.Contains(strings.Join(env, "\n"), sentinel) {
		t.Error("the child's environment holds a value")
	}
	names := Names(env)
	if !reflect.DeepEqual(names[:5], []string{"AWS_CA_BUNDLE", "CURL_CA_BUNDLE", "EXAMPLE_TOKEN", "GITHUB_TOKEN", "GIT_CONFIG_COUNT"}) || len(names) != len(want) {
		t.Errorf("names %v", names)
	}
}

func TestContains(t *testing.T) {
	b := good(t)
	for _, tc := range []struct {
		s    string
		want bool
	}{
		{`{"authorization":"Bearer ` + sentinel + `"}`, true},
		{`{"body":"` + base64.StdEncoding.EncodeToString([]byte(sentinel)) + `"}`, true},
		{`{"authorization":"Bearer jr2-held-EXAMPLE_TOKEN"}`, false},
		{`{"body":"[secret:EXAMPLE_TOKEN]"}`, false},
	} {
		if got := b.Contains([]byte(tc.s)); got != tc.want {
			t.Errorf("Contains(%q) = %v", tc.s, got)
		}
	}
}

// TestDefaultHeadersAgree: the policy's default headers are the engine's;
// a secret written without headers rides the same four either way.
func TestDefaultHeadersAgree(t *testing.T) {
	if !reflect.DeepEqual(policy.DefaultHeaders, contract.DefaultHeaders) {
		t.Fatalf("policy.DefaultHeaders %v != contract.DefaultHeaders %v", policy.DefaultHeaders, contract.DefaultHeaders)
	}
}

// TestChildEnvOtherVariables: a value the runner also holds under another
// variable (GH_TOKEN beside GITHUB_TOKEN, a URL that embeds it) never
// reaches the child: a variable that is exactly a value gets that
// secret's stand-in, one that holds a value inside it is withheld.
func TestChildEnvOtherVariables(t *testing.T) {
	b := good(t)
	env, standIns := b.ChildEnv([]string{"PATH=/usr/bin", "EXAMPLE_TOKEN=" + sentinel, "GITHUB_TOKEN=gh-" + sentinel,
		"GH_TOKEN=gh-" + sentinel, "TOKEN_COPY=" + sentinel,
		"DATABASE_URL=postgres://u:" + sentinel + "@db.example.com/x",
		"ENCODED=" + base64.StdEncoding.EncodeToString([]byte(sentinel)), "HOME=/root"},
		"http://10.231.0.1:8080", "/tmp/ca/ca.pem")
	joined := strings.Join(env, "\n")
	for _, f := range []string{sentinel, base64.StdEncoding.EncodeToString([]byte(sentinel))} {
		if strings.Contains(joined, f) {
			t.Errorf("the child's environment holds a value (as %q):\n%s", f, joined)
		}
	}
	for _, want := range []string{"GH_TOKEN=jr2-held-GH", "TOKEN_COPY=jr2-held-EXAMPLE_TOKEN", "PATH=/usr/bin", "HOME=/root"} {
		if !strings.Contains("\n"+joined+"\n", "\n"+want+"\n") {
			t.Errorf("the child's environment lacks %q:\n%s", want, joined)
		}
	}
	for _, gone := range []string{"DATABASE_URL=", "ENCODED="} {
		if strings.Contains(joined, gone) {
			t.Errorf("%s reached the child:\n%s", gone, joined)
		}
	}
	if want := []string{"EXAMPLE_TOKEN", "GH_TOKEN", "GITHUB_TOKEN", "TOKEN_COPY"}; !reflect.DeepEqual(standIns, want) {
		t.Errorf("stand-ins %v, want %v", standIns, want)
	}
}
