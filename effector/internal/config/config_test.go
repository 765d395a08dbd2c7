package config

import (
	"bytes"
	"crypto/x509"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"jr2.dev/boundary/internal/testkit/testpki"
)

var update = flag.Bool("update", false, "rewrite the want lines of testdata/refuse")

// sentinel is a secret value no error may carry.
const sentinel = "s3ntinel-VALUE-9f1c7b"

// fixture is a good environment in a temp dir; tests change one thing.
type fixture struct {
	dir string
	env map[string]string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{dir: dir, env: map[string]string{}}
	key := bytes.Repeat([]byte{0xab}, 32)
	f.write("key", hex.EncodeToString(key)+"\n")
	if err := os.Mkdir(filepath.Join(dir, "secrets"), 0o700); err != nil {
		t.Fatal(err)
	}
	f.write("secrets/JIRA_TOKEN", sentinel+"\r\n")
	f.write("secrets/API_KEY", "another-value-123")
	f.write("effector.json", `{"placement":"instance","targets":[{"scheme":"https","host":"api.example.com","port":443,"secrets":["JIRA_TOKEN"]}],"commands":false}`)
	f.env = map[string]string{
		EnvKey: filepath.Join(dir, "key"), EnvConfig: filepath.Join(dir, "effector.json"), EnvSecrets: filepath.Join(dir, "secrets"),
		EnvPodName: "effector-0", EnvPodIP: "10.0.0.7", EnvNodeName: "node-a",
	}
	return f
}

func (f *fixture) write(name, content string) {
	if err := os.WriteFile(filepath.Join(f.dir, name), []byte(content), 0o600); err != nil {
		panic(err)
	}
}

func (f *fixture) load() (*Config, error) { return Load(func(k string) string { return f.env[k] }) }

func TestLoad(t *testing.T) {
	f := newFixture(t)
	c, err := f.load()
	if err != nil {
		t.Fatal(err)
	}
	if c.Port != 8082 || c.Replica.Address != "10.0.0.7:8082" || c.Replica.Name != "effector-0" || c.Node != "node-a" {
		t.Errorf("identity %+v %d %s", c.Replica, c.Port, c.Node)
	}
	if c.Placement != "instance" || len(c.Targets) != 1 || c.Targets[0].Host != "api.example.com" || c.Commands {
		t.Errorf("file %+v", c)
	}
	if v, ok := c.Secret("JIRA_TOKEN"); !ok || string(v) != sentinel {
		t.Errorf("JIRA_TOKEN = %q (one trailing \\r\\n taken off)", v)
	}
	if got := strings.Join(c.SecretNames(), ","); got != "API_KEY,JIRA_TOKEN" {
		t.Errorf("names %s", got)
	}
	if len(c.Key) != 32 || c.Drain != DefaultDrain || c.Hold != DefaultHold || c.Expire != DefaultExpire {
		t.Errorf("key %d drain %v hold %v expire %v", len(c.Key), c.Drain, c.Hold, c.Expire)
	}
}

// TestKubernetesSecretVolume: a projected volume holds each key as a link
// into "..data"; the dot entries are not secrets, the links are, and a
// directory (a push's @git) is skipped.
func TestKubernetesSecretVolume(t *testing.T) {
	f := newFixture(t)
	sec := filepath.Join(f.dir, "k8s")
	data := filepath.Join(sec, "..2026_01_01_00_00_00.000000001")
	for _, d := range []string{data, filepath.Join(sec, "@git", "origin")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(data, "TOKEN"), []byte("value-of-token\n"), 0o400); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Base(data), filepath.Join(sec, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..data/TOKEN", filepath.Join(sec, "TOKEN")); err != nil {
		t.Fatal(err)
	}
	f.env[EnvSecrets] = sec
	f.write("effector.json", `{"placement":"sandbox-1"}`)
	c, err := f.load()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.SecretNames(), ","); got != "TOKEN" {
		t.Errorf("held %q", got)
	}
}

func TestEnvRefusals(t *testing.T) {
	cases := []struct {
		name   string
		change func(f *fixture)
		want   string
	}{
		{"no POD_NAME", func(f *fixture) { delete(f.env, EnvPodName) }, "POD_NAME: not set"},
		{"POD_IP not an address", func(f *fixture) { f.env[EnvPodIP] = "pod" }, "POD_IP: \"pod\" is not an IP address"},
		{"port out of range", func(f *fixture) { f.env[EnvPort] = "70000" }, "JR2_EFFECTOR_PORT: \"70000\" is not a port"},
		{"drain not a number", func(f *fixture) { f.env[EnvDrain] = "soon" }, "JR2_EFFECTOR_DRAIN_SECONDS"},
		{"no key", func(f *fixture) { delete(f.env, EnvKey) }, "JR2_EFFECTOR_KEY: not set"},
		{"key file missing", func(f *fixture) { f.env[EnvKey] += ".gone" }, "JR2_EFFECTOR_KEY: no such file"},
		{"key not hex", func(f *fixture) { f.write("key", strings.Repeat("z", 64)) }, "64 lowercase hex"},
		{"key upper case", func(f *fixture) { f.write("key", strings.Repeat("AB", 32)) }, "64 lowercase hex"},
		{"short secret", func(f *fixture) { f.write("secrets/SHORT", "1234567\n") }, "held secret SHORT: the value is shorter than 8 bytes"},
		{"empty secret", func(f *fixture) { f.write("secrets/EMPTY", "\n") }, "held secret EMPTY: the value is empty"},
		{"8-digit secret", func(f *fixture) { f.write("secrets/PIN", "48213976\n") }, "the Effector does not start: held secret PIN: the value is too easy to guess"},
		{"repeated secret", func(f *fixture) { f.write("secrets/REP", strings.Repeat("ab12", 16)) }, "the Effector does not start: held secret REP: the value is too easy to guess"},
		{"12-hex secret", func(f *fixture) { f.write("secrets/HEX", "9f3ac2e8b1d4") }, "the Effector does not start: held secret HEX: the value is too easy to guess"},
		{"binary run secret", func(f *fixture) { f.write("secrets/RUN", "\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09") }, "the Effector does not start: held secret RUN: the value is too easy to guess"},
		{"secret name not a key", func(f *fixture) { f.write("secrets/a b", sentinel) }, "cannot name a secret"},
		{"secret named as the key's label", func(f *fixture) { f.write("secrets/effector-key", sentinel) }, "cannot name a secret"},
		{"secrets dir missing", func(f *fixture) { f.env[EnvSecrets] += ".gone" }, "JR2_EFFECTOR_SECRETS: no such file"},
		{"no config", func(f *fixture) { delete(f.env, EnvConfig) }, "JR2_EFFECTOR_CONFIG: not set"},
		{"CA file missing", func(f *fixture) { f.env[EnvCAFile] = filepath.Join(f.dir, "ca.pem") }, "JR2_CA_FILE: no such file"},
		{"CA file holds no certificate", func(f *fixture) { f.write("ca.pem", sentinel); f.env[EnvCAFile] = filepath.Join(f.dir, "ca.pem") }, "holds no PEM certificate"},
		{"work not a directory", func(f *fixture) { f.env[EnvWork] = filepath.Join(f.dir, "key") }, "JR2_EFFECTOR_WORK: not a directory"},
		{"test poll not a number", func(f *fixture) { f.env[EnvTestPollMs] = "x" }, "test-only"},
		{"scratch not a directory", func(f *fixture) { f.env[EnvScratch] = filepath.Join(f.dir, "key") }, "JR2_EFFECTOR_SCRATCH: not a directory"},
		{"commands without a worktree", func(f *fixture) {
			f.env[EnvScratch] = f.dir
			f.write("effector.json", `{"placement":"sandbox-1","commands":true}`)
		}, "effector.json: commands: true, but a credentialed command needs JR2_EFFECTOR_WORK"},
		{"commands without a scratch", func(f *fixture) {
			f.env[EnvWork] = f.dir
			f.write("effector.json", `{"placement":"sandbox-1","commands":true}`)
		}, "and JR2_EFFECTOR_SCRATCH (where it runs); set both"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			c.change(f)
			_, err := f.load()
			if err == nil {
				t.Fatal("loaded")
			}
			msg := err.Error()
			if !strings.Contains(msg, c.want) {
				t.Errorf("error %q does not say %q", msg, c.want)
			}
			if strings.Contains(msg, sentinel) || strings.Contains(msg, f.dir) {
				t.Errorf("error carries a value or a path: %q", msg)
			}
			if strings.Contains(msg, " 7 bytes") || strings.Contains(msg, " 0 bytes") {
				t.Errorf("error tells a value's length: %q", msg)
			}
			for _, weak := range []string{"48213976", "ab12ab12", "9f3ac2e8b1d4", "\x00\x01\x02"} {
				if strings.Contains(msg, weak) {
					t.Errorf("error carries a value: %q", msg)
				}
			}
		})
	}
}

// TestFileRefusals reads one file per way effector.json can be broken; its
// first line is the error it must give (-update rewrites it).
func TestFileRefusals(t *testing.T) {
	paths, err := filepath.Glob("testdata/refuse/*.json")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no cases: %v", err)
	}
	for _, p := range paths {
		t.Run(filepath.Base(p), func(t *testing.T) {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			first, body, _ := bytes.Cut(b, []byte("\n"))
			want := strings.TrimPrefix(string(first), "# want: ")
			f := newFixture(t)
			f.write("effector.json", string(body))
			_, err = f.load()
			if err == nil {
				t.Fatal("loaded")
			}
			if *update {
				out := append([]byte("# want: "+err.Error()+"\n"), body...)
				if err := os.WriteFile(p, out, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if err.Error() != want {
				t.Errorf("error\n %s\nwant\n %s", err, want)
			}
			if !strings.HasPrefix(err.Error(), "effector.json: ") {
				t.Errorf("error does not name effector.json: %s", err)
			}
		})
	}
}

func TestCAFile(t *testing.T) {
	f := newFixture(t)
	ca := testpki.NewCA(t, "test CA")
	f.write("ca.pem", string(ca.CertPEM))
	f.env[EnvCAFile] = filepath.Join(f.dir, "ca.pem")
	c, err := f.load()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ca.Cert.Verify(x509.VerifyOptions{Roots: c.Roots}); err != nil {
		t.Errorf("the CA file's certificate is not a root: %v", err)
	}
}

// TestOwnPaths: every place the Effector's own files are, absolute, is
// what a command's child is denied; an unset one is left out.
func TestOwnPaths(t *testing.T) {
	f := newFixture(t)
	for _, d := range []string{"work", "scratch", "git"} {
		if err := os.Mkdir(filepath.Join(f.dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	f.env[EnvWork] = filepath.Join(f.dir, "work")
	f.env[EnvScratch] = filepath.Join(f.dir, "scratch")
	f.env[EnvGit] = filepath.Join(f.dir, "git")
	f.write("effector.json", `{"placement":"sandbox-1","commands":true}`)
	c, err := f.load()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"key", "effector.json", "secrets", "git", "work", "scratch"}
	got := c.OwnPaths()
	if len(got) != len(want) {
		t.Fatalf("own paths %q, want %q under %s", got, want, f.dir)
	}
	for i, w := range want {
		if got[i] != filepath.Join(f.dir, w) {
			t.Errorf("own path %d: %q, want %q", i, got[i], filepath.Join(f.dir, w))
		}
	}
	if !c.Commands || c.Repos != "" {
		t.Errorf("commands %v, repos %q", c.Commands, c.Repos)
	}
}

func TestTestOnlyDurations(t *testing.T) {
	f := newFixture(t)
	f.env[EnvTestPollMs] = "50"
	f.env[EnvTestExpireMs] = "200"
	f.env[EnvDrain] = "0"
	c, err := f.load()
	if err != nil {
		t.Fatal(err)
	}
	if c.Hold != 50*time.Millisecond || c.Expire != 200*time.Millisecond || c.Drain != 0 {
		t.Errorf("hold %v expire %v drain %v", c.Hold, c.Expire, c.Drain)
	}
}

// TestGitEntries: each entry under JR2_EFFECTOR_GIT is read once; its
// secret files are held under a label no start can name, known_hosts is
// not; an entry that cannot be read stops the start, and no error carries
// a value.
func TestGitEntries(t *testing.T) {
	token := "ghp_" + sentinel + "-token"
	setup := func(t *testing.T, files map[string]string) *fixture {
		f := newFixture(t)
		f.env[EnvGit] = filepath.Join(f.dir, "git")
		for name, content := range files {
			p := filepath.Join(f.dir, "git", name)
			if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
				t.Fatal(err)
			}
			f.write(filepath.Join("git", name), content)
		}
		return f
	}
	f := setup(t, map[string]string{
		"origin/entry.json":  `{"url":"https://git.example.com/org/","username":"x-access-token"}`,
		"origin/password":    token + "\n",
		"deploy/entry.json":  `{"url":"ssh://git@git.example.com/"}`,
		"deploy/identity":    "-----BEGIN OPENSSH PRIVATE KEY-----\n" + sentinel + "AAAAB3NzaC1yc2EAAAADAQABAAABAQ\n-----END OPENSSH PRIVATE KEY-----\n",
		"deploy/known_hosts": "git.example.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMq\n",
	})
	c, err := f.load()
	if err != nil {
		t.Fatal(err)
	}
	if len(c.GitEntries) != 2 || c.GitEntries[0].Name != "deploy" || c.GitEntries[1].Name != "origin" {
		t.Fatalf("entries %+v", c.GitEntries)
	}
	o, _ := c.GitEntry("origin")
	if o.URL != "https://git.example.com/org/" || o.Username != "x-access-token" {
		t.Errorf("origin %+v", o)
	}
	if h := o.Held(); len(h) != 1 || h[0].Name != "@git:origin:password" || string(h[0].Value) != token {
		t.Errorf("origin held %+v", h)
	}
	d, _ := c.GitEntry("deploy")
	if h := d.Held(); len(h) != 1 || h[0].Name != "@git:deploy:identity" {
		t.Errorf("deploy held %+v (known_hosts is public)", h)
	}
	if string(d.Files[GitKnownHosts]) == "" || !strings.HasSuffix(string(d.Files[GitIdentity]), "-----\n") {
		t.Errorf("files kept as read: %q", d.Files)
	}
	for name, files := range map[string]map[string]string{
		"no entry.json":  {"origin/password": token},
		"weak password":  {"origin/entry.json": `{"url":"https://g.example/"}`, "origin/password": "password"},
		"short password": {"origin/entry.json": `{"url":"https://g.example/"}`, "origin/password": "abc"},
		"unknown field":  {"origin/entry.json": `{"url":"https://g.example/","token":"` + sentinel + `"}`},
		"file not dir":   {"origin": sentinel},
		"bad name":       {"or igin/entry.json": `{"url":"https://g.example/"}`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := setup(t, files).load()
			if err == nil {
				t.Fatal("loaded")
			}
			if strings.Contains(err.Error(), sentinel) || strings.Contains(err.Error(), token) {
				t.Errorf("error carries a value: %v", err)
			}
			if !strings.HasPrefix(err.Error(), EnvGit+": ") {
				t.Errorf("error does not name %s: %v", EnvGit, err)
			}
		})
	}
}
