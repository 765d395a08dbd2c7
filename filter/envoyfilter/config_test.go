package envoyfilter

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/envoyproxy/envoy/contrib/golang/common/go/api"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/filter/pluginconf"
	"jr2.dev/boundary/filter/stream"
)

var update = flag.Bool("update", false, "rewrite testdata/refuse/*.want from what Parse answers")

// refuseValues is the value directory of the refusal cases: good values
// for the test table, and the broken ones the cases name.
func refuseValues(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"ANTHROPIC_API_KEY": anthropicValue + "\n",
		"SHORT":             "short\n",
		"BINARY":            githubValue + "\x01\n",
	}
	for name, v := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestParseRefusals: each testdata/refuse/NAME.json is refused by Parse
// with exactly the message in NAME.want; none panics, none names a value.
// A route-NAME or filter-NAME case is the plugin config itself; any other
// case is the custodian.json a filter config names (written to
// @DIR@/custodian.json). @VALUES@ is a value directory, @DIR@ the
// directory of custodian.json.
func TestParseRefusals(t *testing.T) {
	files, err := filepath.Glob("testdata/refuse/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no refusal cases: %v", err)
	}
	values := refuseValues(t)
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			b = []byte(strings.NewReplacer("@VALUES@", values, "@DIR@", dir).Replace(string(b)))
			if !strings.HasPrefix(name, "route-") && !strings.HasPrefix(name, "filter-") {
				b = engineFile(t, dir, b)
			}
			cfg, err := NewParser().Parse(stringAny(t, b), nil)
			if err == nil {
				t.Fatalf("accepted: %#v", cfg)
			}
			if cfg != nil {
				t.Errorf("a config came with the error: %#v", cfg)
			}
			got := strings.NewReplacer(values, "@VALUES@", dir, "@DIR@").Replace(err.Error())
			noSentinel(t, "the error", got)
			wantFile := strings.TrimSuffix(f, ".json") + ".want"
			if *update {
				if err := os.WriteFile(wantFile, []byte(got+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(wantFile)
			if err != nil {
				t.Fatal(err)
			}
			if got != strings.TrimSuffix(string(want), "\n") {
				t.Errorf("error\n got %s\nwant %s", got, want)
			}
		})
	}
}

// TestRelativeValuesDir: a relative valuesDir in custodian.json is the
// directory beside the file, as custodian serve reads it.
func TestRelativeValuesDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "values"), 0o700); err != nil {
		t.Fatal(err)
	}
	c := testConfig()
	c.Secrets = c.Secrets[:1]
	c.ValuesDir = "values"
	if err := os.WriteFile(filepath.Join(dir, "values", "ANTHROPIC_API_KEY"), []byte(anthropicValue+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := NewParser().Parse(stringAny(t, engineFile(t, dir, js)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if fc, ok := cfg.(*filterConfig); !ok || fc.engine == nil {
		t.Fatalf("parsed to %#v", cfg)
	}
	logs.take()
}

// TestParseRefusesNonString: the plugin config must be a StringValue.
func TestParseRefusesNonString(t *testing.T) {
	i64, err := anypb.New(wrapperspb.Int64(7))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		a    *anypb.Any
		want string
	}{
		{"nil", nil, "jr2-custodian plugin config: empty; set the golang filter's plugin_config to a google.protobuf.StringValue"},
		{"int64", i64, `jr2-custodian plugin config: type "type.googleapis.com/google.protobuf.Int64Value": want a google.protobuf.StringValue holding a filter config (custodian.json's path) or a route config`},
		{"garbage", &anypb.Any{TypeUrl: "type.googleapis.com/google.protobuf.StringValue", Value: []byte{0xff, 0xff, 0xff}}, `jr2-custodian plugin config: type "type.googleapis.com/google.protobuf.StringValue": want a google.protobuf.StringValue holding a filter config (custodian.json's path) or a route config`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := NewParser().Parse(tc.a, nil)
			if err == nil || cfg != nil {
				t.Fatalf("got %#v, %v; want a refusal", cfg, err)
			}
			if err.Error() != tc.want {
				t.Errorf("error\n got %s\nwant %s", err, tc.want)
			}
		})
	}
}

// TestParseShapes: custodian.json becomes a filter config holding an
// engine, a route config a route; the ready line is logged once per engine.
func TestParseShapes(t *testing.T) {
	p := NewParser()
	logs.take()
	top, err := p.Parse(stringAny(t, writeConfig(t, testConfig())), nil)
	if err != nil {
		t.Fatal(err)
	}
	fc, ok := top.(*filterConfig)
	if !ok || fc.engine == nil {
		t.Fatalf("filter-level config parsed to %#v", top)
	}
	if got, want := logs.take(), []string{"jr2.custodian ready secrets=ANTHROPIC_API_KEY,GITHUB_TOKEN,JR2_SANDBOX_TOKEN hosts=3"}; !equal(got, want) {
		t.Errorf("logs %q, want %q", got, want)
	}
	for _, rc := range []pluginconf.RouteConfig{
		{Role: pluginconf.RoleControl},
		{Role: pluginconf.RoleEgress},
		{Role: pluginconf.RoleIntercept, Target: anthropic},
	} {
		got, err := p.Parse(stringAny(t, rc.Marshal()), nil)
		if err != nil {
			t.Fatalf("%+v: %v", rc, err)
		}
		r, ok := got.(*routeConfig)
		if !ok || r.route != rc {
			t.Errorf("%+v parsed to %#v", rc, got)
		}
	}
	if l := logs.take(); len(l) != 0 {
		t.Errorf("route configs logged %q", l)
	}
}

// TestEngineCache: filter configs naming one custodian.json build one
// engine and read the file and its values once per process (both can be
// gone by the second parse, and a changed file is not read again); another
// path builds another engine; a refused file is not remembered.
func TestEngineCache(t *testing.T) {
	p := NewParser()
	c := testConfig()
	b := writeConfig(t, c)
	logs.take()
	first, err := p.Parse(stringAny(t, b), nil)
	if err != nil {
		t.Fatal(err)
	}
	fc, err := pluginconf.ParseFilter(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(engineConfig(t, b).ValuesDir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fc.EngineConfig, []byte("changed, and not read again"), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 400; i++ {
		again, err := p.Parse(stringAny(t, b), nil)
		if err != nil {
			t.Fatalf("parse %d of the same config: %v", i+2, err)
		}
		if again.(*filterConfig).engine != first.(*filterConfig).engine {
			t.Fatalf("parse %d of the same config built another engine", i+2)
		}
	}
	if err := os.Remove(fc.EngineConfig); err != nil {
		t.Fatal(err)
	}
	if again, err := p.Parse(stringAny(t, b), nil); err != nil || again.(*filterConfig).engine != first.(*filterConfig).engine {
		t.Fatalf("the same path once its file is gone: %v", err)
	}
	if n := len(logs.take()); n != 1 {
		t.Errorf("%d ready lines for one config, want 1", n)
	}
	c.Pod = "ws-other"
	other, err := p.Parse(stringAny(t, writeConfig(t, c)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if other.(*filterConfig).engine == first.(*filterConfig).engine {
		t.Error("another config shared the first engine")
	}
	if n := len(logs.take()); n != 1 {
		t.Errorf("%d ready lines for the second config, want 1", n)
	}
	// A refused config is not cached: fixed, it parses.
	c.Pod = "ws-fixed"
	bad := writeConfig(t, c)
	badDir := engineConfig(t, bad).ValuesDir
	if err := os.Remove(filepath.Join(badDir, "GITHUB_TOKEN")); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Parse(stringAny(t, bad), nil); err == nil {
		t.Fatal("a config with a value file missing was accepted")
	}
	if err := os.WriteFile(filepath.Join(badDir, "GITHUB_TOKEN"), []byte(githubValue), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Parse(stringAny(t, bad), nil); err != nil {
		t.Fatalf("the fixed config: %v", err)
	}
	// A file not there yet is not remembered either.
	late := filepath.Join(t.TempDir(), "custodian.json")
	lateConfig := pluginconf.FilterConfig{EngineConfig: late}.Marshal()
	if _, err := p.Parse(stringAny(t, lateConfig), nil); err == nil {
		t.Fatal("a filter config naming no file was accepted")
	}
	if err := os.Rename(fc0(t, writeConfig(t, c)), late); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Parse(stringAny(t, lateConfig), nil); err != nil {
		t.Fatalf("the file once there: %v", err)
	}
	logs.take()
}

// fc0 is the path a filter-level plugin config names.
func fc0(t *testing.T, b []byte) string {
	t.Helper()
	fc, err := pluginconf.ParseFilter(b)
	if err != nil {
		t.Fatal(err)
	}
	return fc.EngineConfig
}

// TestParseConcurrent: listeners' configs may be parsed from several
// threads; one engine comes of it (run with -race).
func TestParseConcurrent(t *testing.T) {
	p := NewParser()
	a := stringAny(t, writeConfig(t, testConfig()))
	var wg sync.WaitGroup
	engines := make([]*filter.Engine, 8)
	for i := range engines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cfg, err := p.Parse(a, nil)
			if err != nil {
				t.Error(err)
				return
			}
			engines[i] = cfg.(*filterConfig).engine
		}()
	}
	wg.Wait()
	for _, e := range engines[1:] {
		if e != engines[0] {
			t.Fatal("concurrent parses of one config built several engines")
		}
	}
	logs.take()
}

// TestMerge: a filter config (or an earlier merge) and a route config make
// a stream config; anything else makes one that answers 500, never marks,
// and says why.
func TestMerge(t *testing.T) {
	pd := newPod(t, testConfig())
	engine := pd.top.(*filterConfig).engine
	intercept := &routeConfig{route: pluginconf.RouteConfig{Role: pluginconf.RoleIntercept, Target: anthropic}}
	control := &routeConfig{route: pluginconf.RouteConfig{Role: pluginconf.RoleControl}}
	merged := pd.p.Merge(pd.top, control)
	broken := pd.p.Merge(nil, control)
	logs.take()

	for _, tc := range []struct {
		name          string
		parent, child interface{}
		wantRole      pluginconf.Role
		wantWhy       string // "": merges
		wantLog       string
	}{
		{name: "filter+intercept", parent: pd.top, child: intercept, wantRole: pluginconf.RoleIntercept},
		{name: "filter+control", parent: pd.top, child: control, wantRole: pluginconf.RoleControl},
		{name: "merged+intercept: the more specific route wins", parent: merged, child: intercept, wantRole: pluginconf.RoleIntercept},
		{name: "a virtual host's connection-target config+control: the route wins", parent: pd.p.Merge(pd.top, &routeConfig{route: pluginconf.RouteConfig{Role: pluginconf.RoleIntercept}}), child: control, wantRole: pluginconf.RoleControl},
		{name: "broken stays broken", parent: broken, child: intercept, wantWhy: errBadParent.Why()},
		{name: "nil parent", parent: nil, child: control, wantWhy: errBadParent.Why(), wantLog: "jr2.custodian misconfigured reason=parent-config"},
		{name: "typed nil parent", parent: (*filterConfig)(nil), child: control, wantWhy: errBadParent.Why(), wantLog: "jr2.custodian misconfigured reason=parent-config"},
		{name: "route as parent", parent: control, child: intercept, wantWhy: errBadParent.Why(), wantLog: "jr2.custodian misconfigured reason=parent-config"},
		{name: "string parent", parent: "/etc/jr2/custodian/custodian.json", child: control, wantWhy: errBadParent.Why(), wantLog: "jr2.custodian misconfigured reason=parent-config"},
		{name: "raw Any parent", parent: &anypb.Any{}, child: control, wantWhy: errBadParent.Why(), wantLog: "jr2.custodian misconfigured reason=parent-config"},
		{name: "nil child", parent: pd.top, child: nil, wantWhy: errBadChild.Why(), wantLog: "jr2.custodian misconfigured reason=route-config"},
		{name: "typed nil child", parent: pd.top, child: (*routeConfig)(nil), wantWhy: errBadChild.Why(), wantLog: "jr2.custodian misconfigured reason=route-config"},
		{name: "filter config as child", parent: pd.top, child: pd.top, wantWhy: errBadChild.Why(), wantLog: "jr2.custodian misconfigured reason=route-config"},
		{name: "merged as child", parent: pd.top, child: merged, wantWhy: errBadChild.Why(), wantLog: "jr2.custodian misconfigured reason=route-config"},
		{
			name:   "unbound intercept target",
			parent: pd.top, child: &routeConfig{route: pluginconf.RouteConfig{Role: pluginconf.RoleIntercept, Target: "example.org:443"}},
			wantWhy: "the route's target example.org:443 is not bound in custodian.json",
			wantLog: "jr2.custodian misconfigured reason=route-target",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := pd.p.Merge(tc.parent, tc.child)
			l := logs.take()
			sc, ok := got.(*streamConfig)
			if !ok || sc == nil {
				t.Fatalf("Merge returned %#v", got)
			}
			if tc.wantWhy == "" {
				if sc.Why() != "" || sc.Engine() != engine || sc.Route().Role != tc.wantRole {
					t.Fatalf("Merge returned %+v", sc)
				}
				if len(l) != 0 {
					t.Errorf("a good merge logged %q", l)
				}
				return
			}
			if sc.Why() == "" || sc.Why() != tc.wantWhy {
				t.Fatalf("Merge returned %+v, want broken: %s", sc, tc.wantWhy)
			}
			if tc.wantLog != "" && !equal(l, []string{tc.wantLog}) {
				t.Errorf("logs %q, want %q", l, tc.wantLog)
			}
			o := exchange(t, got, headers(":method", "GET", ":authority", anthropic, ":path", "/v1/x", "x-api-key", "jr2-held-ANTHROPIC_API_KEY"), nil)
			wantBody := "jr2 custodian: misconfigured: " + tc.wantWhy + "; the request was not passed on"
			if o.status != 500 || o.body() != wantBody || o.cb.meta.marked() || o.upstreamReq != nil {
				t.Errorf("a broken config answered\n%s\nwant 500 %q, unmarked", o.describe(), wantBody)
			}
			if want := []string{"jr2.custodian action=refuse target=- reason=misconfigured"}; !equal(o.logs, want) {
				t.Errorf("logs %q, want %q", o.logs, want)
			}
		})
	}
}

// TestConnectionTarget: the shared intercept listener's route config has
// no target; Factory takes the connection's (TargetFilterState) and the
// stream is decided for it, the value swapped in as on a route of the
// target's own. A connection with no target, or one custodian.json does
// not bind, is refused 500 unmarked and nothing goes upstream.
func TestConnectionTarget(t *testing.T) {
	pd := newPod(t, testConfig())
	cfg := pd.p.Merge(pd.top, &routeConfig{route: pluginconf.RouteConfig{Role: pluginconf.RoleIntercept}})
	for _, c := range []struct {
		name, target string
		pass         bool
	}{
		{"bound", anthropic, true},
		{"none", "", false},
		{"not bound", "example.org:443", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cb := newCallbacks()
			cb.target = c.target
			o := exchangeOn(t, cb, cfg, headers(":method", "GET", ":authority", "api.anthropic.com", ":path", "/v1/x", "x-api-key", "jr2-held-ANTHROPIC_API_KEY"), &upstream{headers: headers(":status", "200")})
			if c.pass {
				if o.upstreamReq == nil || !o.cb.meta.marked() || o.upstreamReq.GetRaw("x-api-key") == "jr2-held-ANTHROPIC_API_KEY" {
					t.Fatalf("got\n%s\nwant the request swapped and passed", o.describe())
				}
				return
			}
			if o.status != 500 || o.cb.meta.marked() || o.upstreamReq != nil {
				t.Fatalf("got\n%s\nwant 500, unmarked, nothing upstream", o.describe())
			}
		})
	}
}

// TestFactoryWithoutRoute: a stream whose route carries no per-route
// config gets the filter-level config; it has no role, so it refuses.
func TestFactoryWithoutRoute(t *testing.T) {
	pd := newPod(t, testConfig())
	for _, tc := range []struct {
		name string
		cfg  interface{}
		why  string
	}{
		{"filter-level config", pd.top, errNoRouteConfig.Why()},
		{"nil", nil, errNoConfig.Why()},
		{"typed nil", (*streamConfig)(nil), errNoConfig.Why()},
		{"route config unmerged", &routeConfig{route: pluginconf.RouteConfig{Role: pluginconf.RoleControl}}, errNoConfig.Why()},
		{"raw Any", &anypb.Any{}, errNoConfig.Why()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := exchange(t, tc.cfg, headers(":method", "CONNECT", ":authority", anthropic), nil)
			want := "jr2 custodian: misconfigured: " + tc.why + "; the request was not passed on"
			if o.status != 500 || o.body() != want || o.cb.meta.marked() {
				t.Errorf("got\n%s\nwant 500 %q, unmarked", o.describe(), want)
			}
		})
	}
}

// TestUnknownRole: a stream config with a role ParseRoute never admits
// (a bug elsewhere) refuses rather than forwards.
func TestUnknownRole(t *testing.T) {
	pd := newPod(t, testConfig())
	cfg := stream.Merge(pd.top.(*filterConfig).engine, pluginconf.RouteConfig{Role: "health"}, nil)
	o := exchange(t, cfg, headers(":method", "GET", ":authority", anthropic, ":path", "/"), nil)
	if o.status != 500 || o.body() != "jr2 custodian: misconfigured: the route's role is unknown; the request was not passed on" || o.cb.meta.marked() {
		t.Errorf("got\n%s", o.describe())
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

var _ api.StreamFilterConfigParser = NewParser()
