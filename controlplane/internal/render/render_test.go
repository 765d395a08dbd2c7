package render_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"jr2.dev/boundary/controlplane/internal/bootstrap"
	"jr2.dev/boundary/controlplane/internal/manifest"
	"jr2.dev/boundary/controlplane/internal/manifesttest"
	"jr2.dev/boundary/controlplane/internal/pki"
	"jr2.dev/boundary/controlplane/internal/render"
	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/internal/contract"
	"jr2.dev/boundary/internal/testkit/testpki"
)

var update = flag.Bool("update", false, "rewrite the golden files under controlplane/testdata/golden")

const (
	testdata = "../../testdata"
	mountDir = "/etc/jr2/custodian"
)

// fixture is a CA and a set of "system roots", both made in code per run.
// The golden files hold no certificate bytes: envoy.json names the leaf
// and trust files by path, and custodian.json and harness.env hold none,
// so a fresh CA per run renders the same golden bytes.
type fixture struct {
	caDir string
	ca    *pki.CA
	roots []byte
	extra []byte
	now   time.Time
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	f := &fixture{caDir: filepath.Join(t.TempDir(), "ca"), now: time.Now()}
	if err := pki.InitCA(f.caDir, f.now); err != nil {
		t.Fatal(err)
	}
	var err error
	if f.ca, err = pki.LoadCA(f.caDir, f.now); err != nil {
		t.Fatal(err)
	}
	f.roots = append(rootPEM(t, "system-root-1"), rootPEM(t, "system-root-2")...)
	f.extra = rootPEM(t, "corp-root")
	return f
}

// rootPEM is a root made in code (never a committed PEM).
func rootPEM(t testing.TB, cn string) []byte { return testpki.NewCA(t, cn).CertPEM }

func (f *fixture) options(t testing.TB, manifestBytes []byte, out string) render.Options {
	return render.Options{
		Manifest: manifestBytes, CADir: f.caDir, OutDir: out, CABundle: f.extra, SystemRoots: f.roots,
		ValuesDir: render.DefaultValuesDir, Module: render.DefaultModule, MountDir: mountDir,
		HarnessCADir: render.DefaultHarnessCADir, Now: f.now, Rand: fixedID(),
	}
}

// fixedID draws the admin socket id 0123456789ab, so goldens stay byte
// for byte; a render's own draws from crypto/rand (TestAdminSocketPerDir).
func fixedID() io.Reader { return bytes.NewReader([]byte{0x01, 0x23, 0x45, 0x67, 0x89, 0xab}) }

// TestAdminSocketPerDir: each directory rendered names an admin socket of
// its own under /tmp, drawn at random, so two pods' Envoys on one machine
// never bind over each other's; a re-render of a directory keeps its
// socket (and writes nothing), and one whose envoy.json was altered gets
// the same socket back.
func TestAdminSocketPerDir(t *testing.T) {
	f := newFixture(t)
	m := read(t, filepath.Join(testdata, "manifests", "small.json"))
	socket := func(dir string) string {
		t.Helper()
		o := f.options(t, m, dir)
		o.Rand = nil
		if _, err := render.Render(o); err != nil {
			t.Fatal(err)
		}
		var js struct {
			Admin struct {
				Address struct {
					Pipe struct{ Path string }
				}
			}
		}
		if err := json.Unmarshal(read(t, filepath.Join(dir, render.EnvoyFile)), &js); err != nil {
			t.Fatal(err)
		}
		return js.Admin.Address.Pipe.Path
	}
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	sa, sb := socket(a), socket(b)
	pattern := regexp.MustCompile(`^/tmp/jr2-custodian-admin-[0-9a-f]{12}\.sock$`)
	if !pattern.MatchString(sa) || !pattern.MatchString(sb) || sa == sb {
		t.Errorf("the admin sockets of two directories: %q and %q; want two of %s", sa, sb, pattern)
	}
	if again := socket(a); again != sa {
		t.Errorf("a re-render moved the admin socket from %s to %s", sa, again)
	}
	envoy := filepath.Join(a, render.EnvoyFile)
	os.WriteFile(envoy, append([]byte("{"), read(t, envoy)...), 0o644)
	if again := socket(a); again != sa {
		t.Errorf("a render over an altered envoy.json moved the admin socket from %s to %s", sa, again)
	}
}

func read(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// tree reads every file under dir, by slash path relative to dir.
func tree(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = read(t, p)
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return files
}

// withoutDigest is an object file without its jr2.dev/config-digest line,
// which hashes the leaves' certificates: fresh leaves, another digest.
func withoutDigest(b []byte) []byte {
	var out [][]byte
	for _, l := range bytes.SplitAfter(b, []byte("\n")) {
		if !bytes.Contains(l, []byte("jr2.dev/config-digest: ")) {
			out = append(out, l)
		}
	}
	return bytes.Join(out, nil)
}

// TestGolden: envoy.json (the default data plane, the module's, and
// envoy-golang.json, --data-plane golang), custodian.json, harness.env,
// wgetrc and the summary line of a small (the spec's example) and a large
// manifest, byte for byte.
// Refresh with: go test ./controlplane/internal/render -run TestGolden -update
func TestGolden(t *testing.T) {
	f := newFixture(t)
	for _, name := range []string{"small", "large"} {
		t.Run(name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			res, err := render.Render(f.options(t, read(t, filepath.Join(testdata, "manifests", name+".json")), out))
			if err != nil {
				t.Fatal(err)
			}
			got := map[string][]byte{"summary.txt": []byte(res.Summary + "\n")}
			for _, file := range []string{render.EnvoyFile, render.CustodianFile, render.HarnessFile, render.WgetrcFile} {
				got[path.Base(file)] = read(t, filepath.Join(out, file))
			}
			// The golang render's envoy.json; its other files are these
			// (TestDataPlanesDifferOnlyInTheEngine).
			_, got["envoy-golang.json"] = renderPlane(t, f, name, bootstrap.DataPlaneGolang, nil)
			dir := filepath.Join(testdata, "golden", name)
			for file, b := range got {
				golden := filepath.Join(dir, file)
				if strings.HasSuffix(file, ".json") && file != render.CustodianFile {
					// envoy.json is compact; its golden is the same JSON
					// indented, so a change reads as a diff. Compacting
					// the golden gives back exactly the bytes rendered.
					if !isCompact(b) {
						t.Errorf("%s is not compact JSON and one newline", file)
					}
					var ind bytes.Buffer
					if err := json.Indent(&ind, b, "", "  "); err != nil {
						t.Fatal(err)
					}
					b = ind.Bytes()
				}
				if *update {
					if err := os.MkdirAll(dir, 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(golden, b, 0o644); err != nil {
						t.Fatal(err)
					}
					continue
				}
				want, err := os.ReadFile(golden)
				if err != nil {
					t.Fatalf("%v (run with -update to create it)", err)
				}
				if !bytes.Equal(b, want) {
					t.Errorf("%s differs from %s (run with -update after checking the change)\n%s", file, golden, firstDiff(b, want))
				}
			}
		})
	}
}

// isCompact reports whether b is compact JSON followed by one newline.
func isCompact(b []byte) bool {
	var c bytes.Buffer
	if json.Compact(&c, b) != nil {
		return false
	}
	c.WriteByte('\n')
	return bytes.Equal(c.Bytes(), b)
}

func firstDiff(got, want []byte) string {
	gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < len(gl) || i < len(wl); i++ {
		var g, w string
		if i < len(gl) {
			g = gl[i]
		}
		if i < len(wl) {
			w = wl[i]
		}
		if g != w {
			return fmt.Sprintf("line %d\n got: %s\nwant: %s", i+1, g, w)
		}
	}
	return ""
}

// TestSpecSummary pins the line custodian.md shows.
func TestSpecSummary(t *testing.T) {
	f := newFixture(t)
	res, err := render.Render(f.options(t, read(t, filepath.Join(testdata, "manifests", "small.json")), filepath.Join(t.TempDir(), "out")))
	if err != nil {
		t.Fatal(err)
	}
	if want := "pod ws-7f3a: Custodian holds ANTHROPIC_API_KEY, GITHUB_TOKEN; 3 bound targets"; res.Summary != want {
		t.Errorf("summary %q; want %q", res.Summary, want)
	}
	for _, tc := range []struct{ manifest, want string }{
		{`{"pod":"instance","orchestrator":"o.svc:4000"}`, "pod instance: Custodian holds only JR2_SANDBOX_TOKEN; 0 bound targets"},
		{`{"pod":"p","orchestrator":"o.svc:4000","secrets":[{"name":"K","hosts":["a.example.com"]}]}`, "pod p: Custodian holds K; 1 bound target"},
	} {
		res, err := render.Render(f.options(t, []byte(tc.manifest), filepath.Join(t.TempDir(), "out")))
		if err != nil || res.Summary != tc.want {
			t.Errorf("summary %q, %v; want %q", res.Summary, err, tc.want)
		}
	}
}

// TestRendersAreByteIdentical: two renders of the same inputs into two
// directories differ only in the fresh leaves; a render into a directory
// already rendered changes no byte, the leaves included (reused).
func TestRendersAreByteIdentical(t *testing.T) {
	f := newFixture(t)
	m := read(t, filepath.Join(testdata, "manifests", "large.json"))
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	resA, err := render.Render(f.options(t, m, a))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := render.Render(f.options(t, m, b)); err != nil {
		t.Fatal(err)
	}
	ta, tb := tree(t, a), tree(t, b)
	if !slices.Equal(sortedKeys(ta), sortedKeys(tb)) || !slices.Equal(sortedKeys(ta), resA.Files) {
		t.Fatalf("file sets differ:\n%v\n%v\n%v", sortedKeys(ta), sortedKeys(tb), resA.Files)
	}
	leaves := 0
	for p := range ta {
		if strings.HasPrefix(p, "tls/") {
			leaves++
			continue
		}
		if strings.HasPrefix(p, "kubernetes/secret-") { // the fresh leaves, again
			continue
		}
		if !bytes.Equal(withoutDigest(ta[p]), withoutDigest(tb[p])) {
			t.Errorf("%s differs between two renders of the same inputs", p)
		}
	}
	mf, err := manifest.Parse(m)
	if err != nil {
		t.Fatal(err)
	}
	n := len(bootstrap.BoundTargets(render.Config(mf, render.DefaultValuesDir)))
	if n != 15 || leaves != 2*n || resA.Issued != n || resA.Reused != 0 {
		t.Errorf("%d targets, %d leaf files, issued %d, reused %d; want 15, 30, 15, 0", n, leaves, resA.Issued, resA.Reused)
	}
	again, err := render.Render(f.options(t, m, a))
	if err != nil {
		t.Fatal(err)
	}
	if again.Issued != 0 || again.Reused != n {
		t.Errorf("second render issued %d, reused %d; want 0, %d", again.Issued, again.Reused, n)
	}
	for p, want := range ta {
		if got := read(t, filepath.Join(a, p)); !bytes.Equal(got, want) {
			t.Errorf("%s changed when the directory was rendered again", p)
		}
	}
	// No temporary directory is left beside DIR.
	entries, _ := os.ReadDir(filepath.Dir(a))
	if len(entries) != 1 {
		t.Errorf("beside DIR: %v", entries)
	}
}

func sortedKeys(m map[string][]byte) []string {
	var k []string
	for p := range m {
		k = append(k, p)
	}
	slices.Sort(k)
	return k
}

// TestRefusedManifestWritesNothing: every refusal file, its exact message,
// and no byte written — neither a new DIR nor a change to a rendered one.
func TestRefusedManifestWritesNothing(t *testing.T) {
	f := newFixture(t)
	rendered := filepath.Join(t.TempDir(), "rendered")
	if _, err := render.Render(f.options(t, read(t, filepath.Join(testdata, "manifests", "small.json")), rendered)); err != nil {
		t.Fatal(err)
	}
	before := tree(t, rendered)
	files, _ := filepath.Glob(filepath.Join(testdata, "refuse", "*.json"))
	if len(files) < 40 {
		t.Fatalf("%d refusal files", len(files))
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".json"), func(t *testing.T) {
			want := strings.TrimSuffix(string(read(t, strings.TrimSuffix(file, ".json")+".want")), "\n")
			fresh := filepath.Join(t.TempDir(), "out")
			for _, out := range []string{fresh, rendered} {
				_, err := render.Render(f.options(t, read(t, file), out))
				var refused *manifest.Refused
				if !errors.As(err, &refused) || err.Error() != want {
					t.Fatalf("render into %s: %v; want the refusal\n%s", out, err, want)
				}
			}
			if _, err := os.Stat(fresh); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a refused render created %s", fresh)
			}
			if after := tree(t, rendered); !equalTrees(before, after) {
				t.Error("a refused render changed a rendered directory")
			}
			if entries, _ := os.ReadDir(filepath.Dir(rendered)); len(entries) != 1 {
				t.Errorf("a refused render left %v beside DIR", entries)
			}
		})
	}
}

func equalTrees(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for p, v := range a {
		if !bytes.Equal(v, b[p]) {
			return false
		}
	}
	return true
}

// TestFailuresWriteNothing: a render that fails after the manifest passed
// (no CA, no roots, a bad --ca-bundle) writes nothing either.
func TestFailuresWriteNothing(t *testing.T) {
	f := newFixture(t)
	m := read(t, filepath.Join(testdata, "manifests", "small.json"))
	for _, tc := range []struct {
		name  string
		edit  func(o *render.Options)
		wants string
	}{
		{"no CA", func(o *render.Options) { o.CADir = t.TempDir() }, "controlplane ca init"},
		{"no system roots", func(o *render.Options) { o.SystemRoots = nil }, "system roots"},
		{"a key in --ca-bundle", func(o *render.Options) {
			o.CABundle = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: []byte("x")})
		}, "--ca-bundle"},
		{"the CA in --ca-bundle", func(o *render.Options) { o.CABundle = f.ca.CertPEM }, "is the jr2 CA"},
		{"relative module", func(o *render.Options) { o.Module = "custodian-module.so" }, "absolute"},
		{"relative plugin", func(o *render.Options) { o.DataPlane, o.Plugin = bootstrap.DataPlaneGolang, "custodian.so" }, "absolute"},
		{"relative values dir", func(o *render.Options) { o.ValuesDir = "values" }, "write an absolute path"},
		{"two targets, one leaf file", func(o *render.Options) {
			o.Manifest = []byte(`{"pod":"p","orchestrator":"o:1","secrets":[{"name":"K","hosts":["[fd00::10]","fd00__10"]}]}`)
		}, "[fd00::10]:443 and fd00__10:443 would share the leaf tls/fd00__10_443"},
	} {
		out := filepath.Join(t.TempDir(), "out")
		o := f.options(t, m, out)
		tc.edit(&o)
		_, err := render.Render(o)
		if err == nil || !strings.Contains(err.Error(), tc.wants) {
			t.Errorf("%s: %v; want an error with %q", tc.name, err, tc.wants)
		}
		if _, err := os.Stat(out); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: DIR was created", tc.name)
		}
	}
}

// TestSentinel: with a sentinel value in the value directory for every
// held secret, no file render writes and no line it prints carries it; and
// the CA's key — PEM, DER or scalar — is nowhere in DIR.
func TestSentinel(t *testing.T) {
	f := newFixture(t)
	const sentinel = "sk-ant-api03-SENTINEL-4b1d9e7f2a6c8e0d"
	m := read(t, filepath.Join(testdata, "manifests", "large.json"))
	values := t.TempDir()
	mf, err := manifest.Parse(m)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range append(mf.Secrets, manifest.Secret{Name: contract.TokenName}) {
		if err := os.WriteFile(filepath.Join(values, s.Name), []byte(sentinel+"-"+s.Name+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "out")
	o := f.options(t, m, out)
	o.ValuesDir = values
	res, err := render.Render(o)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM := read(t, filepath.Join(f.caDir, pki.CAKeyFile))
	block, _ := pem.Decode(keyPEM)
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	scalar, err := key.(*ecdsa.PrivateKey).Bytes()
	if err != nil {
		t.Fatal(err)
	}
	// PKCS #8 P-256 keys share their first 36 DER bytes (48 base64
	// characters after the 28-byte PEM header); bytes 80–120 of the PEM
	// are the CA's own scalar.
	forbidden := map[string][]byte{
		"the sentinel value":  []byte("SENTINEL"),
		"the CA key (PEM)":    bytes.TrimSpace(keyPEM),
		"the CA key (base64)": keyPEM[80:120],
		"the CA key (DER)":    block.Bytes,
		"the CA key (scalar)": scalar,
	}
	files := tree(t, out)
	files["(summary)"] = []byte(res.Summary)
	for p, b := range files {
		for what, bad := range forbidden {
			if bytes.Contains(b, bad) {
				t.Errorf("%s carries %s", p, what)
			}
		}
	}
	// The values directory is named, never read: render left it alone.
	if got := tree(t, values); len(got) != len(mf.Secrets)+1 {
		t.Errorf("value directory now holds %d files", len(got))
	}
}

// TestLeavesInDirectory: one leaf per bound target at contract.LeafBase, key
// 0600, SAN the target's host, chaining to the CA; one from another CA is
// re-issued; a leaf of a target no longer bound is removed.
func TestLeavesInDirectory(t *testing.T) {
	f := newFixture(t)
	other := newFixture(t)
	out := filepath.Join(t.TempDir(), "out")
	m := read(t, filepath.Join(testdata, "manifests", "small.json"))
	if _, err := render.Render(f.options(t, m, out)); err != nil {
		t.Fatal(err)
	}
	for _, tg := range []string{"api.anthropic.com:443", "api.github.com:443", "github.com:443"} {
		cert, key := bootstrap.LeafFiles(tg)
		if err := f.ca.Reusable(tg, read(t, filepath.Join(out, cert)), read(t, filepath.Join(out, key)), f.now); err != nil {
			t.Errorf("%s: rendered leaf: %v", tg, err)
		}
		if st, err := os.Stat(filepath.Join(out, key)); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: key mode %v", tg, st.Mode().Perm())
		}
		if filepath.ToSlash(contract.LeafBase(tg))+".crt" != cert {
			t.Errorf("%s: leaf at %s, not where contract.LeafBase says", tg, cert)
		}
	}
	// A leaf of another CA is re-issued; the others are reused.
	foreign, _ := other.ca.Issue("github.com:443", f.now)
	cert, key := bootstrap.LeafFiles("github.com:443")
	os.WriteFile(filepath.Join(out, cert), foreign.CertPEM, 0o644)
	os.WriteFile(filepath.Join(out, key), foreign.KeyPEM, 0o600)
	stale := filepath.Join(out, "tls", "old.example.com_443.crt")
	os.WriteFile(stale, foreign.CertPEM, 0o644)
	res, err := render.Render(f.options(t, m, out))
	if err != nil {
		t.Fatal(err)
	}
	if res.Issued != 1 || res.Reused != 2 {
		t.Errorf("issued %d, reused %d; want 1, 2", res.Issued, res.Reused)
	}
	if err := f.ca.Reusable("github.com:443", read(t, filepath.Join(out, cert)), read(t, filepath.Join(out, key)), f.now); err != nil {
		t.Errorf("re-issued leaf: %v", err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, fs.ErrNotExist) {
		t.Error("the leaf of a target no longer bound was kept")
	}
}

// TestTrustFiles: upstream.crt never holds the jr2 CA; extra.crt and
// bundle.crt do, with --ca-bundle.
func TestTrustFiles(t *testing.T) {
	f := newFixture(t)
	out := filepath.Join(t.TempDir(), "out")
	if _, err := render.Render(f.options(t, read(t, filepath.Join(testdata, "manifests", "small.json")), out)); err != nil {
		t.Fatal(err)
	}
	ca := bytes.TrimSpace(f.ca.CertPEM)
	for _, tc := range []struct {
		file     string
		holdsCA  bool
		holdsAll [][]byte
	}{
		{render.ExtraCAFile, true, [][]byte{f.extra}},
		{render.BundleCAFile, true, [][]byte{f.roots, f.extra}},
		{render.UpstreamFile, false, [][]byte{f.roots, f.extra}},
	} {
		b := read(t, filepath.Join(out, tc.file))
		if bytes.Contains(b, ca) != tc.holdsCA {
			t.Errorf("%s holds the jr2 CA: %v; want %v", tc.file, !tc.holdsCA, tc.holdsCA)
		}
		for _, want := range tc.holdsAll {
			if !bytes.Contains(b, want) {
				t.Errorf("%s lacks a root it should hold", tc.file)
			}
		}
	}
}

// TestCustodianServeCanRun: the rendered directory is what the Go host
// runs from — its engine config loads and builds an engine with values,
// every bound target is intercepted, and each leaf serves real TLS that a
// Harness client trusting bundle.crt accepts for the target's name.
func TestCustodianServeCanRun(t *testing.T) {
	f := newFixture(t)
	out := filepath.Join(t.TempDir(), "out")
	values := t.TempDir()
	o := f.options(t, read(t, filepath.Join(testdata, "manifests", "small.json")), out)
	o.ValuesDir = values
	if _, err := render.Render(o); err != nil {
		t.Fatal(err)
	}
	cfg, err := filter.LoadConfig(filepath.Join(out, render.CustodianFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range cfg.Secrets {
		os.WriteFile(filepath.Join(values, s.Name), []byte("value-of-"+s.Name+"-0123456789\n"), 0o600)
	}
	vals, err := filter.LoadValues(cfg)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := filter.New(cfg, vals)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(read(t, filepath.Join(out, render.BundleCAFile))) {
		t.Fatal("bundle.crt holds no certificate")
	}
	for _, tg := range bootstrap.BoundTargets(cfg) {
		if d := eng.DecideConnect("CONNECT", tg); !d.Intercept {
			t.Errorf("%s: not intercepted: %+v", tg, d)
		}
		base := filepath.Join(out, contract.LeafBase(tg))
		pair, err := tls.LoadX509KeyPair(base+".crt", base+".key")
		if err != nil {
			t.Fatalf("%s: %v", tg, err)
		}
		host := tg[:strings.LastIndex(tg, ":")]
		serverTLS(t, pair, pool, host)
	}
}

// serverTLS runs one handshake between a server holding pair and a client
// trusting pool, asking for host.
func serverTLS(t *testing.T, pair tls.Certificate, pool *x509.CertPool, host string) {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		done <- c.(*tls.Conn).Handshake()
	}()
	c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: pool, ServerName: host})
	if err != nil {
		t.Errorf("%s: a client trusting bundle.crt refused the leaf: %v", host, err)
		return
	}
	c.Close()
	if err := <-done; err != nil {
		t.Errorf("%s: server handshake: %v", host, err)
	}
}

// BenchmarkRender times one render in process (manifest to written DIR) for
// 10 to 400 bound targets: "again" into the rendered DIR (every leaf
// reused after the first iteration), "fresh" into a new DIR each time
// (every leaf issued), on /dev/shm where there is one, so that the
// profile (-cpuprofile) is the render's and not a disk's file creates.
// The cold-process numbers are BenchmarkRenderCold in package main.
func BenchmarkRender(b *testing.B) {
	f := newFixture(b)
	base := b.TempDir()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		shm, err := os.MkdirTemp("/dev/shm", "jr2-render-bench-")
		if err != nil {
			b.Fatal(err)
		}
		defer os.RemoveAll(shm)
		base = shm
	}
	for _, n := range []int{10, 100, 400} {
		held := manifesttest.Generate(n)
		b.Run(fmt.Sprintf("targets=%d/again", n), func(b *testing.B) {
			o := f.options(b, held, filepath.Join(base, fmt.Sprintf("again-%d", n)))
			for i := 0; i < b.N; i++ {
				if _, err := render.Render(o); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("targets=%d/fresh", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				out := filepath.Join(base, fmt.Sprintf("fresh-%d-%d", n, i))
				if _, err := render.Render(f.options(b, held, out)); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				os.RemoveAll(out)
				b.StartTimer()
			}
		})
	}
}

// A local target is refused by default, with the flag that lifts it named;
// with AllowLocalTargets it renders, and custodian.json says so, so the Go
// host lets a bound target resolve to a guarded address only then.
func TestLocalTargets(t *testing.T) {
	f := newFixture(t)
	m := []byte(`{"pod":"demo","orchestrator":"orch.example:4000","secrets":[{"name":"DEMO_KEY","hosts":["127.0.0.1:8443"]}]}`)
	out := filepath.Join(t.TempDir(), "out")
	_, err := render.Render(f.options(t, m, out))
	var refused *manifest.Refused
	if !errors.As(err, &refused) || !strings.Contains(err.Error(), "--allow-local-targets") {
		t.Fatalf("local target: err = %v", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("a refused render wrote %s", out)
	}
	o := f.options(t, m, out)
	o.AllowLocalTargets = true
	if _, err := render.Render(o); err != nil {
		t.Fatal(err)
	}
	cfg, err := filter.LoadConfig(filepath.Join(out, "custodian.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.LocalTargets || len(cfg.Secrets) == 0 || cfg.Secrets[0].Targets[0] != "127.0.0.1:8443" {
		t.Fatalf("custodian.json: %+v", cfg)
	}
}

// harnessVars reads harness.env into its keys in order and a map.
func harnessVars(t *testing.T, b []byte) ([]string, map[string]string) {
	t.Helper()
	var keys []string
	vars := map[string]string{}
	for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			t.Fatalf("harness.env line %q is not KEY=VALUE", l)
		}
		if _, dup := vars[k]; dup {
			t.Fatalf("harness.env sets %s twice", k)
		}
		keys = append(keys, k)
		vars[k] = v
	}
	return keys, vars
}

// TestHarnessVarsAreNeverHeld: every variable harness.env sets beside the
// stand-ins is one a manifest may not hold (contract.ProxyOrTrustVar), so no
// held name can collide with one; each trust variable names a file render
// wrote under the Harness's CA directory; and wgetrc points wget at the
// bundle.
func TestHarnessVarsAreNeverHeld(t *testing.T) {
	f := newFixture(t)
	out := filepath.Join(t.TempDir(), "out")
	o := f.options(t, read(t, filepath.Join(testdata, "manifests", "large.json")), out)
	if _, err := render.Render(o); err != nil {
		t.Fatal(err)
	}
	keys, vars := harnessVars(t, read(t, filepath.Join(out, render.HarnessFile)))
	for _, k := range keys {
		if vars[k] == contract.StandIn(k) || strings.Contains(vars[k], contract.StandInMark) {
			continue // a held secret's stand-in, plain or shaped
		}
		if !contract.ProxyOrTrustVar(k) {
			t.Errorf("harness.env sets %s, which a manifest could hold: add it to contract.ProxyTrustVars", k)
		}
	}
	for _, k := range []string{"SSL_CERT_FILE", "CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "GIT_SSL_CAINFO", "AWS_CA_BUNDLE", "PIP_CERT",
		"CARGO_HTTP_CAINFO", "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH", "CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE", "NODE_EXTRA_CA_CERTS", "DENO_CERT", "WGETRC"} {
		rel, ok := strings.CutPrefix(vars[k], render.DefaultHarnessCADir+"/")
		if !ok {
			t.Errorf("%s=%q is not under %s", k, vars[k], render.DefaultHarnessCADir)
			continue
		}
		if _, err := os.Stat(filepath.Join(out, "ca", rel)); err != nil {
			t.Errorf("%s names a file render did not write: %v", k, err)
		}
	}
	if want := "ca_certificate = " + render.DefaultHarnessCADir + "/bundle.crt\n"; !strings.HasSuffix(string(read(t, filepath.Join(out, render.WgetrcFile))), want) {
		t.Errorf("wgetrc does not end %q", want)
	}
}

// TestGitCredentialHelper asks git's own credential machinery (git
// credential fill, as git runs it after a 401) with harness.env as the
// whole environment: each bound https target of a secret that rides
// authorization gets the stand-in as the password, over any helper the
// machine configured; any other host gets nothing.
func TestGitCredentialHelper(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("SKIP: no git binary on PATH; the rendered credential helper is not exercised")
	}
	f := newFixture(t)
	out := filepath.Join(t.TempDir(), "out")
	if _, err := render.Render(f.options(t, read(t, filepath.Join(testdata, "manifests", "large.json")), out)); err != nil {
		t.Fatal(err)
	}
	keys, vars := harnessVars(t, read(t, filepath.Join(out, render.HarnessFile)))
	home := t.TempDir()
	// A machine's own helper, which the rendered one must override: it
	// would answer every host with a password of its own.
	gitconfig := "[credential]\n\thelper = \"!f() { echo username=machine; echo password=machine-password; }; f\"\n"
	if err := os.WriteFile(filepath.Join(home, ".gitconfig"), []byte(gitconfig), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=", "SSH_ASKPASS="}
	for _, k := range keys {
		env = append(env, k+"="+vars[k])
	}
	fill := func(host string) (string, error) {
		cmd := exec.Command("git", "credential", "fill")
		cmd.Env, cmd.Dir = env, home
		cmd.Stdin = strings.NewReader("protocol=https\nhost=" + host + "\n\n")
		b, err := cmd.Output()
		return string(b), err
	}
	for _, c := range []struct{ host, standIn string }{
		{"github.com", "GITHUB_TOKEN"},
		{"api.github.com", "GITHUB_TOKEN"},
		{"ghe.example.com:8443", "GHE_TOKEN"},
		{"10.20.30.40:4443", "LITELLM_KEY"},
		{"jira.example.com", "JIRA_TOKEN"},
	} {
		got, err := fill(c.host)
		want := "protocol=https\nhost=" + c.host + "\nusername=" + render.GitUser + "\npassword=" + contract.StandIn(c.standIn) + "\n"
		if err != nil || got != want {
			t.Errorf("git credential fill for %s: %q %v\nwant %q", c.host, got, err, want)
		}
	}
	// Not bound, bound on another port, or bound in another header only:
	// the machine's own helper answers, never a stand-in.
	for _, host := range []string{"example.org", "github.com:8443", "gitlab.com", "api.anthropic.com"} {
		got, err := fill(host)
		if err != nil || strings.Contains(got, "jr2-held-") || !strings.Contains(got, "password=machine-password") {
			t.Errorf("git credential fill for %s: %q %v; want the machine's helper's answer", host, got, err)
		}
	}
	// store and erase (git runs them after an answer) print nothing.
	for _, op := range []string{"approve", "reject"} {
		cmd := exec.Command("git", "credential", op)
		cmd.Env, cmd.Dir = env, home
		cmd.Stdin = strings.NewReader("protocol=https\nhost=github.com\nusername=" + render.GitUser + "\npassword=" + contract.StandIn("GITHUB_TOKEN") + "\n\n")
		if b, err := cmd.CombinedOutput(); err != nil || len(b) != 0 {
			t.Errorf("git credential %s: %q %v", op, b, err)
		}
	}
}
