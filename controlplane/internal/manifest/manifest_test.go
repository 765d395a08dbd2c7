package manifest_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"jr2.dev/boundary/controlplane/internal/bootstrap"
	"jr2.dev/boundary/controlplane/internal/manifest"
	"jr2.dev/boundary/controlplane/internal/render"
	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/internal/contract"
	"jr2.dev/boundary/internal/hostlimits"
)

// specExample is custodian.md's manifest.
const specExample = "../../testdata/manifests/small.json"

func TestSpecExample(t *testing.T) {
	b, err := os.ReadFile(specExample)
	if err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	want := &manifest.Manifest{
		Pod: "ws-7f3a", Orchestrator: "jr2-orchestrator.jr2.svc:4000", Sandbox: "ws-7f3a",
		Secrets: []manifest.Secret{
			{Name: "ANTHROPIC_API_KEY", Targets: []string{"api.anthropic.com:443"}, Headers: []string{"x-api-key"}, Paths: []string{"/v1/"}, StandIn: "jr2-held-ANTHROPIC_API_KEY"},
			{Name: "GITHUB_TOKEN", Targets: []string{"api.github.com:443", "github.com:443"}, Headers: contract.DefaultHeaders, StandIn: "jr2-held-GITHUB_TOKEN"},
		},
	}
	if !reflect.DeepEqual(m, want) {
		t.Errorf("manifest\n got: %+v\nwant: %+v", m, want)
	}
}

// TestAWSSecret: an aws secret rides SigV4's headers, its parts are keys
// of the convention Secret, and render gives the Harness a stand-in per
// part in the variables the AWS SDKs read.
func TestAWSSecret(t *testing.T) {
	b := []byte(`{"pod":"p","orchestrator":"o.svc:4000","secrets":[{"name":"AWS","hosts":["bedrock-runtime.us-east-1.amazonaws.com","s3.us-east-1.amazonaws.com"],"paths":["/"],"aws":{"sessionToken":true}}]}`)
	m, err := manifest.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	want := manifest.Secret{Name: "AWS", Targets: []string{"bedrock-runtime.us-east-1.amazonaws.com:443", "s3.us-east-1.amazonaws.com:443"}, Headers: filter.AWSHeaders, Paths: []string{"/"}, StandIn: contract.StandIn("AWS"), AWS: &manifest.AWS{SessionToken: true}}
	if len(m.Secrets) != 1 || !reflect.DeepEqual(m.Secrets[0], want) {
		t.Fatalf("secret\n got: %+v\nwant: %+v", m.Secrets, want)
	}
	if got := m.Secrets[0].ValueNames(); strings.Join(got, ",") != "AWS_ACCESS_KEY_ID,AWS_SECRET_ACCESS_KEY,AWS_SESSION_TOKEN" {
		t.Errorf("value names %v", got)
	}
	c := render.Config(m, "values")
	cj, err := json.Marshal(c.Secrets[0])
	if err != nil {
		t.Fatal(err)
	}
	if want := `"aws":{"sessionToken":true}`; !strings.Contains(string(cj), want) {
		t.Errorf("custodian.json secret %s lacks %s", cj, want)
	}
	env := string(render.HarnessEnv(c, true, "/ca"))
	for _, line := range []string{
		"AWS_ACCESS_KEY_ID=jr2-held-AWS_ACCESS_KEY_ID\n",
		"AWS_SECRET_ACCESS_KEY=jr2-held-AWS_SECRET_ACCESS_KEY\n",
		"AWS_SESSION_TOKEN=jr2-held-AWS_SESSION_TOKEN\n",
	} {
		if !strings.Contains(env, line) {
			t.Errorf("harness.env lacks %q:\n%s", line, env)
		}
	}
	if strings.Contains(env, "AWS=") || strings.Contains(env, "GIT_CONFIG") {
		t.Errorf("harness.env holds the secret's own name or a git helper for it:\n%s", env)
	}
	// Without a session token the Harness still gets its stand-in (the
	// engine removes it), and no value file is asked for.
	m2, err := manifest.Parse([]byte(strings.Replace(string(b), `{"sessionToken":true}`, `{}`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if got := m2.Secrets[0].ValueNames(); len(got) != 2 {
		t.Errorf("value names without a token: %v", got)
	}
	if !strings.Contains(string(render.HarnessEnv(render.Config(m2, "values"), true, "/ca")), "AWS_SESSION_TOKEN=jr2-held-AWS_SESSION_TOKEN\n") {
		t.Error("harness.env without a token lacks the token's stand-in")
	}
}

// TestTarget: every spelling a hosts entry may take, and its canonical
// target.
func TestTarget(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"api.github.com", "api.github.com:443"},
		{"API.GitHub.com", "api.github.com:443"},
		{"api.github.com.", "api.github.com:443"},
		{"github.com:443", "github.com:443"},
		{"ghe.example.com:8443", "ghe.example.com:8443"},
		{"https://api.github.com", "api.github.com:443"},
		{"HTTPS://api.github.com:8443/", "api.github.com:8443"},
		{"10.0.0.7", "10.0.0.7:443"},
		{"10.0.0.7:9443", "10.0.0.7:9443"},
		{"[fd00::10]", "[fd00::10]:443"},
		{"[FD00::10]:8443", "[fd00::10]:8443"},
		{"gw_internal.svc", "gw_internal.svc:443"},
	} {
		got, msg := manifest.Target(tc.in)
		if got != tc.want || msg != "" {
			t.Errorf("Target(%q) = %q, %q; want %q", tc.in, got, msg, tc.want)
		}
	}
}

// TestAcceptedShapes: the token named bare, null fields, absent sandbox.
func TestAcceptedShapes(t *testing.T) {
	m, err := manifest.Parse([]byte(`{"pod":"instance","orchestrator":"10.0.0.1:4000","sandbox":null,
		"secrets":[{"name":"JR2_SANDBOX_TOKEN"},{"name":"LLM_KEY","hosts":["llm.example.com"],"headers":null,"paths":null,"shape":null},
		{"name":"GH","hosts":["github.com"],"shape":"github"},{"name":"OWN","hosts":["own.example.com"],"shape":{"prefix":"own_","length":30}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := &manifest.Manifest{Pod: "instance", Orchestrator: "10.0.0.1:4000", Secrets: []manifest.Secret{
		{Name: "LLM_KEY", Targets: []string{"llm.example.com:443"}, Headers: contract.DefaultHeaders, StandIn: "jr2-held-LLM_KEY"},
		{Name: "GH", Targets: []string{"github.com:443"}, Headers: contract.DefaultHeaders, Shape: &contract.Shape{Kind: "github"}, StandIn: mustStandIn(t, "GH", &contract.Shape{Kind: "github"})},
		{Name: "OWN", Targets: []string{"own.example.com:443"}, Headers: contract.DefaultHeaders, Shape: &contract.Shape{Prefix: "own_", Length: 30}, StandIn: mustStandIn(t, "OWN", &contract.Shape{Prefix: "own_", Length: 30})},
	}}
	if !reflect.DeepEqual(m, want) {
		t.Errorf("manifest\n got: %+v\nwant: %+v", m, want)
	}
	if m, err := manifest.Parse([]byte(`{"pod":"instance","orchestrator":"o.svc:4000"}`)); err != nil || len(m.Secrets) != 0 {
		t.Errorf("no secrets: %+v, %v; want an empty manifest", m, err)
	}
}

// TestRefusals: one file per refusal under testdata/refuse, its exact
// message in the .want beside it, and each problem's rule the one the
// file's name starts with.
func TestRefusals(t *testing.T) {
	files, err := filepath.Glob("../../testdata/refuse/*.json")
	if err != nil || len(files) < 40 {
		t.Fatalf("refusal files: %d, %v", len(files), err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(strings.TrimSuffix(f, ".json") + ".want")
			if err != nil {
				t.Fatal(err)
			}
			m, err := manifest.Parse(b)
			if err == nil {
				t.Fatalf("accepted: %+v", m)
			}
			if got := err.Error(); got != strings.TrimSuffix(string(want), "\n") {
				t.Errorf("refusal\n got: %s\nwant: %s", got, want)
			}
			refused, ok := err.(*manifest.Refused)
			if !ok {
				t.Fatalf("error is %T; want *manifest.Refused", err)
			}
			rule, _, _ := strings.Cut(name, "-")
			for _, p := range refused.Problems {
				if name != "several" && p.Rule != rule {
					t.Errorf("problem %q has rule %q; the file is a %s case", p, p.Rule, rule)
				}
			}
		})
	}
}

// TestMessagesNeverEchoAValue: a name that is not a variable name (a value
// pasted where a name goes) is never quoted back, and any other input is
// cut at 64 bytes.
func TestMessagesNeverEchoAValue(t *testing.T) {
	sentinel := "sk-ant-api03-SENTINEL-9f8e7d6c5b4a"
	long := "/" + strings.Repeat("a", 200) + ";"
	_, err := manifest.Parse([]byte(`{"pod":"p","orchestrator":"o:1","secrets":[
		{"name":"` + sentinel + `","hosts":["x.example.com"]},
		{"name":"OK","hosts":["x.example.com"],"headers":["x-a"],"paths":["` + long + `"]}]}`))
	if err == nil {
		t.Fatal("accepted")
	}
	msg := err.Error()
	if strings.Contains(msg, sentinel) || strings.Contains(msg, "SENTINEL") {
		t.Errorf("message carries the pasted value: %s", msg)
	}
	if strings.Contains(msg, strings.Repeat("a", 65)) {
		t.Errorf("message carries more than 64 bytes of an input: %s", msg)
	}
	if !strings.Contains(msg, `secrets[0].name: not a variable name`) || !strings.Contains(msg, `secrets[1].paths[0]: "/aaaa`) {
		t.Errorf("message does not name the fields: %s", msg)
	}
}

// FuzzParse: no input panics Parse, and every manifest Parse accepts
// renders a custodian.json the engine accepts and a bootstrap that
// validates.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("../../testdata/refuse/*.json")
	files = append(files, specExample, "../../testdata/manifests/large.json")
	for _, file := range files {
		if b, err := os.ReadFile(file); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := manifest.Parse(b)
		if err != nil {
			if _, ok := err.(*manifest.Refused); !ok {
				t.Fatalf("error %T, want *manifest.Refused", err)
			}
			return
		}
		cfg := render.Config(m, render.DefaultValuesDir)
		if _, err := filter.ParseConfig(mustJSON(t, cfg)); err != nil {
			t.Fatalf("accepted manifest, refused engine config: %v\n%s", err, b)
		}
		if _, err := bootstrap.Build(bootstrap.Input{Config: cfg, ConfigJSON: mustJSON(t, cfg), Module: render.DefaultModule, MountDir: "/etc/jr2/custodian", AdminSocket: hostlimits.AdminSocketPath("0123456789ab")}); err != nil {
			t.Fatalf("accepted manifest, bootstrap refused: %v\n%s", err, b)
		}
	})
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestKitAndSigningNamesRefused: every proxy or trust variable of the
// table (contract.ProxyTrustVars, the numbered GIT_CONFIG_* ones, any case)
// and every signing credential (contract.SigningVars) is refused as a held
// name with R2, and every x-amz-* header with R6: a list that grows is
// covered without a new file.
func TestKitAndSigningNamesRefused(t *testing.T) {
	doc := func(name string, headers ...string) []byte {
		sec := map[string]any{"name": name, "hosts": []string{"api.example.com"}}
		if len(headers) > 0 {
			sec["headers"] = headers
		}
		return mustJSON(t, map[string]any{"pod": "p", "orchestrator": "o.svc:4000", "secrets": []any{sec}})
	}
	type tc struct {
		doc        []byte
		rule, want string
	}
	var cases []tc
	names := append(append([]string{}, contract.ProxyTrustVars...), "GIT_CONFIG_KEY_0", "GIT_CONFIG_VALUE_7")
	for _, n := range names {
		for _, spelled := range []string{n, strings.ToLower(n)} {
			cases = append(cases, tc{doc(spelled), "R2", spelled + ": render sets the Harness's proxy and trust variables itself"})
		}
	}
	for _, n := range contract.SigningVars {
		want := n + " is a signing credential"
		if strings.HasPrefix(n, "AWS_") {
			want = n + " is a part of an AWS key"
		}
		cases = append(cases, tc{doc(n), "R2", want}, tc{doc(strings.ToLower(n)), "R2", "Effector"})
	}
	for _, h := range []string{"x-amz-security-token", "x-amz-date", "x-amz-content-sha256"} {
		cases = append(cases, tc{doc("AWS_TOKEN", h), "R6", "SigV4 signs every x-amz-* header"})
	}
	for _, c := range cases {
		_, err := manifest.Parse(c.doc)
		refused, ok := err.(*manifest.Refused)
		if !ok || len(refused.Problems) != 1 || refused.Problems[0].Rule != c.rule || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want one %s refusal saying %q", c.doc, err, c.rule, c.want)
		}
	}
	// Names that only look alike are held.
	for _, n := range []string{"GIT_CONFIG_KEYS", "MY_SSL_CERT_FILE", "AWS_SECRET", "GIT_TOKEN"} {
		if _, err := manifest.Parse(doc(n)); err != nil {
			t.Errorf("%s refused: %v", n, err)
		}
	}
}

// TestValueFrom: a secret's valueFrom names a Secret and key of the
// user's, the token's too; without it the value comes by convention (nil).
func TestValueFrom(t *testing.T) {
	m, err := manifest.Parse([]byte(`{"pod":"ws-1","orchestrator":"o.svc:4000","secrets":[
		{"name":"JR2_SANDBOX_TOKEN","valueFrom":{"secretKeyRef":{"name":"ws-1-token","key":"token"}}},
		{"name":"LLM_KEY","hosts":["llm.example.com"],"valueFrom":{"secretKeyRef":{"name":"llm.keys","key":"LLM_KEY.v2"}}},
		{"name":"GH","hosts":["github.com"],"valueFrom":null}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := (&manifest.SecretKeyRef{Name: "ws-1-token", Key: "token"}); !reflect.DeepEqual(m.TokenFrom, want) {
		t.Errorf("TokenFrom = %+v; want %+v", m.TokenFrom, want)
	}
	if want := (&manifest.SecretKeyRef{Name: "llm.keys", Key: "LLM_KEY.v2"}); !reflect.DeepEqual(m.Secrets[0].From, want) {
		t.Errorf("LLM_KEY From = %+v; want %+v", m.Secrets[0].From, want)
	}
	if m.Secrets[1].From != nil {
		t.Errorf("GH From = %+v; want nil (the convention Secret)", m.Secrets[1].From)
	}
	for _, tc := range []struct {
		name string
		ok   bool
	}{{"a", true}, {"a.b-c", true}, {"A", false}, {"-a", false}, {"a.", false}, {"a..b", false}, {strings.Repeat("a", 254), false}} {
		if got := manifest.SecretName(tc.name); got != tc.ok {
			t.Errorf("SecretName(%q) = %v; want %v", tc.name, got, tc.ok)
		}
	}
}

// TestValueFromNeverEchoes: a value pasted where valueFrom's name or key
// goes, or as a value field, is refused without being quoted back.
func TestValueFromNeverEchoes(t *testing.T) {
	const pasted = "sk-live-PASTED-9b8c7d6e5f4a3b2c1d0e"
	for _, m := range []string{
		`{"pod":"p","orchestrator":"o:1","secrets":[{"name":"K","hosts":["a.example.com"],"value":"` + pasted + `"}]}`,
		`{"pod":"p","orchestrator":"o:1","secrets":[{"name":"K","hosts":["a.example.com"],"valueFrom":"` + pasted + `"}]}`,
		`{"pod":"p","orchestrator":"o:1","secrets":[{"name":"K","hosts":["a.example.com"],"valueFrom":{"secretKeyRef":{"name":"` + pasted + `","key":"k"}}}]}`,
		`{"pod":"p","orchestrator":"o:1","secrets":[{"name":"K","hosts":["a.example.com"],"valueFrom":{"secretKeyRef":{"name":"s","key":"` + pasted + ` x"}}}]}`,
	} {
		_, err := manifest.Parse([]byte(m))
		if err == nil {
			t.Errorf("accepted %s", m)
			continue
		}
		if strings.Contains(err.Error(), "PASTED") {
			t.Errorf("refusal quotes the pasted value: %v", err)
		}
	}
}

func mustStandIn(t *testing.T, name string, sh *contract.Shape) string {
	t.Helper()
	si, err := contract.StandInOf(name, sh)
	if err != nil {
		t.Fatal(err)
	}
	return si
}
