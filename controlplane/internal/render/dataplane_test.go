package render_test

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"jr2.dev/boundary/controlplane/internal/bootstrap"
	"jr2.dev/boundary/controlplane/internal/manifest"
	"jr2.dev/boundary/controlplane/internal/render"
	"jr2.dev/boundary/filter/pluginconf"
	"jr2.dev/boundary/internal/contract"
	"jr2.dev/boundary/internal/testkit/envoybin"
)

// renderPlane renders manifest name (under testdata/manifests) for one data
// plane into a fresh directory and returns envoy.json's bytes.
func renderPlane(t *testing.T, f *fixture, name string, dp bootstrap.DataPlane, edit func(*render.Options)) (dir string, envoyJSON []byte) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out")
	o := f.options(t, read(t, filepath.Join(testdata, "manifests", name+".json")), out)
	o.DataPlane, o.Plugin = dp, render.DefaultPlugin
	if edit != nil {
		edit(&o)
	}
	if _, err := render.Render(o); err != nil {
		t.Fatal(err)
	}
	return out, read(t, filepath.Join(out, render.EnvoyFile))
}

// engineSlot replaces what may differ between the data planes: the engine
// filter (name and typed config) in every http_filters list, and the
// per-route config keyed by its name. It counts what it replaced.
type engineSlot struct {
	name            string // bootstrap.FilterGolang or FilterModule
	filters, routes int
}

func (e *engineSlot) normalise(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, val := range x {
			switch {
			case k == "http_filters":
				var fs []any
				for _, f := range val.([]any) {
					if m, ok := f.(map[string]any); ok && m["name"] == e.name {
						e.filters++
						f = "ENGINE FILTER"
					}
					fs = append(fs, e.normalise(f))
				}
				out[k] = fs
			case k == "typed_per_filter_config":
				per := val.(map[string]any)
				if _, ok := per[e.name]; ok {
					// The engine's entry, under a name both planes share;
					// any other filter's (the guard disabled on a bound
					// target's CONNECT) stays as it is.
					e.routes++
					rest := map[string]any{"ENGINE": "ENGINE PER-ROUTE"}
					for pk, pv := range per {
						if pk != e.name {
							rest[pk] = e.normalise(pv)
						}
					}
					out[k] = rest
					continue
				}
				out[k] = e.normalise(val)
			default:
				out[k] = e.normalise(val)
			}
		}
		return out
	case []any:
		var out []any
		for _, y := range x {
			out = append(out, e.normalise(y))
		}
		return out
	}
	return v
}

// firstJSONDiff names the first path where a and b differ.
func firstJSONDiff(path string, a, b any) string {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			return path
		}
		var keys []string
		for k := range x {
			keys = append(keys, k)
		}
		for k := range y {
			if _, ok := x[k]; !ok {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			if d := firstJSONDiff(path+"."+k, x[k], y[k]); d != "" {
				return d
			}
		}
		return ""
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return path + " (length)"
		}
		for i := range x {
			if d := firstJSONDiff(fmt.Sprintf("%s[%d]", path, i), x[i], y[i]); d != "" {
				return d
			}
		}
		return ""
	}
	if !reflect.DeepEqual(a, b) {
		return fmt.Sprintf("%s: %v vs %v", path, a, b)
	}
	return ""
}

// TestDataPlanesDifferOnlyInTheEngine: a golang and a module render of the
// same manifest differ in envoy.json only in the engine filter (its name
// and typed config, in the same place of every filter list) and in the
// per-route configs keyed by its name; every other file is byte-identical
// but the fresh leaves.
func TestDataPlanesDifferOnlyInTheEngine(t *testing.T) {
	f := newFixture(t)
	for _, name := range []string{"small", "large"} {
		t.Run(name, func(t *testing.T) {
			gdir, gjs := renderPlane(t, f, name, bootstrap.DataPlaneGolang, nil)
			mdir, mjs := renderPlane(t, f, name, bootstrap.DataPlaneModule, nil)
			var g, m any
			if err := json.Unmarshal(gjs, &g); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(mjs, &m); err != nil {
				t.Fatal(err)
			}
			gs, ms := &engineSlot{name: bootstrap.FilterGolang}, &engineSlot{name: bootstrap.FilterModule}
			gn, mn := gs.normalise(g), ms.normalise(m)
			if d := firstJSONDiff("", gn, mn); d != "" {
				t.Errorf("the golang and module renders differ outside the engine filter, first at %s", d)
			}
			if gs.filters == 0 || gs.routes == 0 || *gs != (engineSlot{bootstrap.FilterGolang, ms.filters, ms.routes}) {
				t.Errorf("engine filters golang %d, module %d; per-route configs golang %d, module %d", gs.filters, ms.filters, gs.routes, ms.routes)
			}
			for _, other := range [][]byte{[]byte("golang"), []byte(render.DefaultPlugin)} {
				if bytes.Contains(mjs, other) {
					t.Errorf("the module render names %s", other)
				}
			}
			gt, mt := tree(t, gdir), tree(t, mdir)
			for p, b := range gt {
				if p == render.EnvoyFile || strings.HasPrefix(p, "tls/") || strings.HasPrefix(p, "kubernetes/secret-") {
					continue
				}
				if !bytes.Equal(withoutDigest(b), withoutDigest(mt[p])) {
					t.Errorf("%s differs between the data planes", p)
				}
			}
			if len(gt) != len(mt) {
				t.Errorf("golang render wrote %d files, module %d", len(gt), len(mt))
			}
		})
	}
}

// envoyBinary is the Envoy to validate with, at the pinned version
// (internal/testkit/envoybin). Without one the test fails, naming the fix, unless
// JR2_E2E_HOST=serve says the run has no Envoy on purpose (then it skips,
// loudly); another version always fails.
func envoyBinary(t *testing.T) string {
	t.Helper()
	bin, err := envoybin.Find()
	switch {
	case err == nil:
		return bin
	case err == envoybin.ErrNone && os.Getenv("JR2_E2E_HOST") == "serve":
		t.Skip("NOT RUN: envoy --mode validate — " + err.Error() + " (JR2_E2E_HOST=serve)")
	case err == envoybin.ErrNone:
		t.Fatal(err.Error() + "; or set JR2_E2E_HOST=serve to run without Envoy")
	}
	t.Fatal(err)
	return ""
}

// buildModule builds the engine's dynamic module (what make module builds)
// into a temporary directory.
func buildModule(t *testing.T) string {
	t.Helper()
	so := filepath.Join(t.TempDir(), "custodian-module.so")
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", so, "jr2.dev/boundary/filter/module/custodian-module")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the module (make module builds the same: ./filter/module/custodian-module): %v\n%s", err, b)
	}
	return so
}

// sentinel marks every value writeValues writes.
const sentinel = "SENTINEL"

// writeValues writes a value file for every secret manifest name holds,
// the Sandbox token included: a strong random value carrying sentinel,
// since the module's config_new loads values as the Go host does.
func writeValues(t *testing.T, name string) string {
	t.Helper()
	mf, err := manifest.Parse(read(t, filepath.Join(testdata, "manifests", name+".json")))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, s := range append(mf.Secrets, manifest.Secret{Name: contract.TokenName}) {
		v := sentinel + "-" + rand.Text() + "\n"
		if err := os.WriteFile(filepath.Join(dir, s.Name), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// validate runs envoy --mode validate on config and returns its exit code
// and output.
func validate(t *testing.T, envoy, config string) (int, string) {
	t.Helper()
	cmd := exec.Command(envoy, "--mode", "validate", "-c", config, "--concurrency", "1", "--log-level", "warn")
	cmd.Dir = t.TempDir() // the module is never looked up in the working directory
	b, err := cmd.CombinedOutput()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("envoy --mode validate: %v", err)
	}
	return cmd.ProcessState.ExitCode(), string(b)
}

// configError is Envoy's one reason for refusing a config file.
var configError = regexp.MustCompile(`error initializing configuration '[^']*': (.*)`)

// customMethodsWIP is the one warning a module render is allowed: Envoy
// 1.39 marks Http1ProtocolOptions.allow_custom_methods work in progress,
// and the render sets it so that a method Envoy's parser does not know
// reaches the engine (rule 1's 405) instead of Envoy's own 400, as in
// custodian serve (envoy/README.md).
const customMethodsWIP = "field 'envoy.config.core.v3.Http1ProtocolOptions.allow_custom_methods' is marked as work-in-progress."

// withoutWIP drops the lines of log that are customMethodsWIP's warning.
func withoutWIP(log string) string {
	var keep []string
	for _, l := range strings.Split(log, "\n") {
		if !strings.Contains(l, "[warning]") || !strings.Contains(l, customMethodsWIP) {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// TestEnvoyValidate runs core Envoy's `envoy --mode validate` on renders of
// both data planes. Validate builds every listener's real filter factories:
// for the module it dlopens the .so and runs its program_init and
// config_new on custodian.json and per route on each RouteConfig, so a
// module render must pass, with no warning. Core Envoy has no golang
// filter, so a golang render must fail, and only for that: the first such
// reason Envoy meets is the golang filter's. envoy.json is handed over as
// binary proto, because Envoy's JSON parser would refuse the golang
// filter's Any type before any filter factory is asked. Everything else in
// a golang render is what the module render holds
// (TestDataPlanesDifferOnlyInTheEngine), which passes.
func TestEnvoyValidate(t *testing.T) {
	envoy := envoyBinary(t)
	if out, err := exec.Command(envoy, "--version").CombinedOutput(); err != nil {
		t.Fatalf("%s --version: %v\n%s", envoy, err, out)
	} else {
		t.Logf("%s", bytes.TrimSpace(out))
	}
	f := newFixture(t)
	so := buildModule(t)

	for _, name := range []string{"small", "large"} {
		t.Run("module/"+name, func(t *testing.T) {
			values := writeValues(t, name)
			out, _ := renderPlane(t, f, name, bootstrap.DataPlaneModule, func(o *render.Options) {
				o.Module, o.MountDir, o.ValuesDir = so, o.OutDir, values
			})
			code, log := validate(t, envoy, filepath.Join(out, render.EnvoyFile))
			if code != 0 || !strings.Contains(log, "configuration '"+filepath.Join(out, render.EnvoyFile)+"' OK") {
				t.Fatalf("envoy --mode validate refused the module render: exit %d\n%s", code, log)
			}
			if log := withoutWIP(log); strings.Contains(log, "[warning]") || strings.Contains(log, "[error]") || strings.Contains(log, "[critical]") {
				t.Errorf("envoy --mode validate warned on the module render:\n%s", log)
			}
			if strings.Contains(log, sentinel) {
				t.Errorf("envoy --mode validate printed a held value:\n%s", log)
			}
		})
	}

	t.Run("golang", func(t *testing.T) {
		out, js := renderPlane(t, f, "small", bootstrap.DataPlaneGolang, func(o *render.Options) { o.MountDir = o.OutDir })
		var bs bootstrapv3.Bootstrap
		if err := protojson.Unmarshal(js, &bs); err != nil {
			t.Fatal(err)
		}
		pb, err := proto.MarshalOptions{Deterministic: true}.Marshal(&bs)
		if err != nil {
			t.Fatal(err)
		}
		binary := filepath.Join(out, "envoy.pb")
		if err := os.WriteFile(binary, pb, 0o644); err != nil {
			t.Fatal(err)
		}
		code, log := validate(t, envoy, binary)
		const want = "Didn't find a registered implementation for 'envoy.filters.http.golang' with type URL: 'envoy.extensions.filters.http.golang.v3alpha."
		m := configError.FindAllStringSubmatch(log, -1)
		if code != 1 || len(m) != 1 || !strings.HasPrefix(m[0][1], want) {
			t.Fatalf("envoy --mode validate on a golang render: exit %d, reasons %q; want exit 1 and only %q…\n%s", code, m, want, log)
		}
		t.Logf("golang render refused as it must be: %s", m[0][1])
	})
}

// TestMarkInEnvoy runs the rendered mark RBAC in a real Envoy behind core
// Envoy's set_metadata filter: a request passes only when its dynamic
// metadata holds jr2.custodian/decided = true as a bool; no mark, false,
// the string "true" or the number 1 are refused with 403. The module (or
// the golang filter) is the only writer of that mark in a render.
func TestMarkInEnvoy(t *testing.T) {
	envoy := envoyBinary(t)
	f := newFixture(t)
	_, js := renderPlane(t, f, "small", bootstrap.DataPlaneModule, nil)
	var rendered struct {
		StaticResources struct {
			Listeners []struct {
				Name         string `json:"name"`
				FilterChains []struct {
					Filters []struct {
						TypedConfig struct {
							HTTPFilters []json.RawMessage `json:"http_filters"`
						} `json:"typed_config"`
					} `json:"filters"`
				} `json:"filter_chains"`
			} `json:"listeners"`
		} `json:"static_resources"`
	}
	if err := json.Unmarshal(js, &rendered); err != nil {
		t.Fatal(err)
	}
	var mark json.RawMessage
	for _, f := range rendered.StaticResources.Listeners[0].FilterChains[0].Filters { // the connection limit, then the manager
		for _, hf := range f.TypedConfig.HTTPFilters {
			var named struct{ Name string }
			if json.Unmarshal(hf, &named) == nil && named.Name == bootstrap.FilterMark {
				mark = hf
			}
		}
	}
	if rendered.StaticResources.Listeners[0].Name != bootstrap.ListenerControl || mark == nil {
		t.Fatal("no mark filter on the control listener")
	}
	for _, tc := range []struct {
		name   string
		value  string // JSON of decided; empty: no metadata at all
		status int
	}{
		{"bool true", "true", 200},
		{"no mark", "", 403},
		{"bool false", "false", 403},
		{"string true", `"true"`, 403},
		{"number 1", "1", 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			port := freePort(t)
			filters := []string{}
			if tc.value != "" {
				filters = append(filters, `{"name":"envoy.filters.http.set_metadata","typed_config":{"@type":"type.googleapis.com/envoy.extensions.filters.http.set_metadata.v3.Config","metadata":[{"metadata_namespace":"`+pluginconf.MetadataNamespace+`","value":{"`+pluginconf.MarkKey+`":`+tc.value+`}}]}}`)
			}
			filters = append(filters, string(mark), `{"name":"envoy.filters.http.router","typed_config":{"@type":"type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}`)
			config := fmt.Sprintf(`{"static_resources":{"listeners":[{"name":"l","address":{"socket_address":{"address":"127.0.0.1","port_value":%d}},"filter_chains":[{"filters":[{"name":"envoy.filters.network.http_connection_manager","typed_config":{"@type":"type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager","stat_prefix":"l","route_config":{"virtual_hosts":[{"name":"v","domains":["*"],"routes":[{"match":{"prefix":"/"},"direct_response":{"status":200,"body":{"inline_string":"passed"}}}]}]},"http_filters":[%s]}}]}]}]}}`, port, strings.Join(filters, ","))
			file := filepath.Join(t.TempDir(), "mark.json")
			if err := os.WriteFile(file, []byte(config), 0o644); err != nil {
				t.Fatal(err)
			}
			startEnvoy(t, envoy, file)
			resp := getWhenUp(t, fmt.Sprintf("http://127.0.0.1:%d/", port))
			if resp.StatusCode != tc.status {
				t.Errorf("decided=%s: status %d; want %d", tc.value, resp.StatusCode, tc.status)
			}
		})
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startEnvoy runs envoy on config until the test ends, then kills it and
// waits for it.
func startEnvoy(t *testing.T, envoy, config string) {
	t.Helper()
	cmd := exec.Command(envoy, "-c", config, "--concurrency", "1", "--disable-hot-restart", "--log-level", "error")
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("envoy:\n%s", log.String())
		}
	})
}

// getWhenUp GETs url, retrying while nothing listens yet (10 s at most).
func getWhenUp(t *testing.T, url string) *http.Response {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			return resp
		}
		if time.Now().After(deadline) {
			t.Fatalf("Envoy never answered on %s: %v", url, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
