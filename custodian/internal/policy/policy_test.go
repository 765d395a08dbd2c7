package policy

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/internal/contract"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestRefusals loads every file under testdata/refuse: each must be refused
// with exactly the messages its "# want: " lines give, in order.
func TestRefusals(t *testing.T) {
	files, err := filepath.Glob("testdata/refuse/*.toml")
	if err != nil || len(files) < 30 {
		t.Fatalf("refusal files: %d, %v", len(files), err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".toml"), func(t *testing.T) {
			want := wantLines(t, file)
			p, err := Load(file)
			if err == nil {
				t.Fatalf("loaded: %+v; want refusal %q", p, want)
			}
			if got := err.Error(); got != want {
				t.Errorf("refusal\n got: %s\nwant: %s", got, want)
			}
			if strings.Contains(err.Error(), "sk-value-in-the-file") || strings.Contains(err.Error(), "do-not-put-it-here") {
				t.Errorf("refusal repeats a value written in the file: %s", err)
			}
		})
	}
}

func wantLines(t *testing.T, file string) string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var want []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "# want: "); ok {
			want = append(want, rest)
		}
	}
	if len(want) == 0 {
		t.Fatalf("%s has no \"# want: \" line", file)
	}
	return strings.Join(want, "\n")
}

// otherDerived is what follows the mark in OTHER's shaped stand-in: SHA-256
// of the name, so a change of the derivation fails here (render would no
// longer reproduce the stand-ins it wrote).
const otherDerived = "74vSgSVnp9zbicswW7"

func TestLoadOK(t *testing.T) {
	p, err := Load("testdata/ok.toml")
	if err != nil {
		t.Fatal(err)
	}
	api := Host{"api.example.com", 443}
	alt := Host{"example.com", 8443}
	want := &Policy{
		AllowHosts: []Host{api, alt, {"_svc.example.net", 443}},
		ReadPaths:  []string{"/usr", "/lib", "/etc/ssl"},
		WritePaths: []string{"/home/agent/project"},
		Secrets: []Secret{
			{Name: "EXAMPLE_TOKEN", Env: "EXAMPLE_TOKEN", Hosts: []Host{api}, Headers: []string{"authorization"}, StandIn: "jr2-held-EXAMPLE_TOKEN"},
			{Name: "OTHER", Env: "OTHER_KEY", Hosts: []Host{alt, {"_svc.example.net", 443}}, Headers: DefaultHeaders,
				Shape: &contract.Shape{Prefix: "oth_", Length: 30}, StandIn: "oth_JR2HELD0" + otherDerived},
		},
	}
	got := *p
	got.Hash, got.Raw, got.index = "", nil, nil
	if !reflect.DeepEqual(&got, want) {
		t.Errorf("policy\n got: %+v\nwant: %+v", &got, want)
	}
}

// TestHashCoversBytesOnDisk: the hash is sha256 of the file as read, so the
// same file hashes the same, and a change that parses the same (a comment)
// still changes it.
func TestHashCoversBytesOnDisk(t *testing.T) {
	raw, err := os.ReadFile("testdata/ok.toml")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(raw)
	a, err := Load("testdata/ok.toml")
	if err != nil {
		t.Fatal(err)
	}
	b, err := Load("testdata/ok.toml")
	if err != nil {
		t.Fatal(err)
	}
	if a.Hash != hex.EncodeToString(sum[:]) || b.Hash != a.Hash || !bytes.Equal(a.Raw, raw) {
		t.Errorf("hash %s, again %s; want sha256 of the file %x", a.Hash, b.Hash, sum)
	}
	c, err := Parse(append([]byte("# a comment\n"), raw...))
	if err != nil {
		t.Fatal(err)
	}
	if c.Hash == a.Hash {
		t.Error("a comment did not change the hash: it is not over the bytes")
	}
}

func TestLoadRefusesLargeFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "big.toml")
	if err := os.WriteFile(file, bytes.Repeat([]byte("# padding\n"), MaxSize/10+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(file); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("Load = %v; want a size refusal", err)
	}
}

func TestAllows(t *testing.T) {
	p, err := Load("testdata/ok.toml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		port uint16
		rule string
		ok   bool
	}{
		{"api.example.com", 443, "allow_hosts[0]", true},
		{"example.com", 8443, "allow_hosts[1]", true},
		{"_svc.example.net", 443, "allow_hosts[2]", true},
		{"api.example.com", 80, DenyRule, false}, // a bare name is 443 only
		{"example.com", 443, DenyRule, false},
		{"evil.example", 443, DenyRule, false},
		{"API.example.com", 443, DenyRule, false}, // callers lowercase first
		{"", 443, DenyRule, false},                // a literal-IP dial has no name
	} {
		rule, ok := p.Allows(tc.name, tc.port)
		if rule != tc.rule || ok != tc.ok {
			t.Errorf("Allows(%q, %d) = %q, %v; want %q, %v", tc.name, tc.port, rule, ok, tc.rule, tc.ok)
		}
	}
}

func TestExposes(t *testing.T) {
	p, err := Parse([]byte(`read_paths = ["/usr", "/tmp/run"]
write_paths = ["/home/agent"]`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		target, want string
	}{
		{"/var/lib/jr2/out.jsonl", ""},
		{"/tmp/runs/out.jsonl", ""}, // a sibling with a common prefix
		{"/tmp/run/out.jsonl", `read_paths[1]: "/tmp/run" would let the child reach "/tmp/run/out.jsonl"; list paths that do not contain it, or write it elsewhere`},
		{"/home/agent", `write_paths[0]: "/home/agent" would let the child reach "/home/agent"; list paths that do not contain it, or write it elsewhere`},
		{"/home/agent/../agent/x", `write_paths[0]: "/home/agent" would let the child reach "/home/agent/x"; list paths that do not contain it, or write it elsewhere`},
	} {
		err := p.Exposes(tc.target)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("Exposes(%q)\n got: %s\nwant: %s", tc.target, got, tc.want)
		}
	}
	root, err := Parse([]byte(`read_paths = ["/"]`))
	if err != nil {
		t.Fatal(err)
	}
	if root.Exposes("/any/where") == nil {
		t.Error(`read_paths ["/"] does not expose every path`)
	}
}

// TestKinds: an aws and an oauth secret are read into the engine's own
// types, as custodian.json holds them: the aws one's parts from the AWS
// SDKs' variables, riding filter.AWSHeaders; the oauth one's stand-in in
// its env, each grant part from the variable parts names.
func TestKinds(t *testing.T) {
	p, err := Parse([]byte(`allow_hosts = ["s3.us-east-1.amazonaws.com", "api.example.com"]
[secrets]
AWS = { hosts = ["s3.us-east-1.amazonaws.com"], aws = { sessionToken = true } }
[secrets.G]
env = "G_TOKEN"
hosts = ["api.example.com"]
oauth = { grant = "refresh-token", tokenURL = "https://auth.example.com/token", scopes = ["read", "write"] }
parts = { client-id = "G_ID", client-secret = "G_SECRET", refresh-token = "G_REFRESH" }
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []Secret{
		{Name: "AWS", Hosts: []Host{{"s3.us-east-1.amazonaws.com", 443}}, Headers: filter.AWSHeaders,
			StandIn: "jr2-held-AWS", AWS: &filter.AWSConfig{SessionToken: true}},
		{Name: "G", Env: "G_TOKEN", Hosts: []Host{{"api.example.com", 443}}, Headers: DefaultHeaders, StandIn: "jr2-held-G",
			OAuth: &filter.OAuthConfig{Grant: filter.GrantRefreshToken, TokenURL: "https://auth.example.com/token", Scopes: []string{"read", "write"}},
			Parts: map[string]string{filter.PartClientID: "G_ID", filter.PartClientSecret: "G_SECRET", filter.PartRefreshToken: "G_REFRESH"}},
	}
	if !reflect.DeepEqual(p.Secrets, want) {
		t.Errorf("secrets\n got: %+v\nwant: %+v", p.Secrets, want)
	}
	// A plain secret may not read an aws part's variable, nor claim an
	// aws part's stand-in by its name.
	for _, text := range []string{
		`T = { env = "AWS_ACCESS_KEY_ID", hosts = ["api.example.com"] }`,
		`AWS_ACCESS_KEY_ID = { env = "T", hosts = ["api.example.com"] }`,
	} {
		_, err := Parse([]byte(`allow_hosts = ["s3.us-east-1.amazonaws.com", "api.example.com"]
[secrets]
AWS = { hosts = ["s3.us-east-1.amazonaws.com"], aws = {} }
` + text + "\n"))
		if err == nil {
			t.Errorf("%s beside an aws secret: loaded", text)
		}
	}
}
