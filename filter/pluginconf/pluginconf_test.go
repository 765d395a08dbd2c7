package pluginconf

import (
	"strings"
	"testing"
)

func TestParseRoute(t *testing.T) {
	for _, c := range []struct {
		in, err string
		want    RouteConfig
	}{
		{in: `{"role":"control"}`, want: RouteConfig{Role: RoleControl}},
		{in: `{"role":"egress"}`, want: RouteConfig{Role: RoleEgress}},
		{in: `{"role":"intercept","target":"api.example.com:443"}`, want: RouteConfig{Role: RoleIntercept, Target: "api.example.com:443"}},
		// No target: the connection's (TargetFilterState), the shared
		// intercept listener's one config.
		{in: `{"role":"intercept"}`, want: RouteConfig{Role: RoleIntercept}},
		{in: `{"role":"egress","target":"x:1"}`, err: "route config: role egress takes no target"},
		{in: `{"role":"admin"}`, err: `route config: role "admin": want control, egress or intercept`},
		{in: `{"role":"egress"} {"role":"control"}`, err: "route config: more than one JSON value; render it with controlplane render"},
		{in: `{"role":"egress","extra":1}`, err: `route config: extra: unknown field (known: role, target); render it with controlplane render`},
		{in: `{"role":"egress","role":"control"}`, err: `route config: role: given twice; give it once; render it with controlplane render`},
		{in: `{"Role":"egress"}`, err: `route config: Role: spelled "Role"; write "role" (keys are matched exactly); render it with controlplane render`},
		{in: `[]`, err: "route config: want an object; render it with controlplane render"},
	} {
		check(t, "ParseRoute", ParseRoute, c.in, c.err, c.want, RouteConfig.Marshal)
	}
}

// check runs one case of a parser: the error wanted, or the value and its
// round trip through marshal.
func check[T comparable](t *testing.T, name string, parse func([]byte) (T, error), in, wantErr string, want T, marshal func(T) []byte) {
	t.Helper()
	got, err := parse([]byte(in))
	if wantErr != "" {
		if err == nil || err.Error() != wantErr {
			t.Errorf("%s(%.60s): err %v, want %s", name, in, err, wantErr)
		}
		return
	}
	if err != nil || got != want {
		t.Errorf("%s(%s) = %+v, %v", name, in, got, err)
	}
	if back, err := parse(marshal(got)); err != nil || back != got {
		t.Errorf("%s: Marshal round trip: %+v %v", name, back, err)
	}
}

func TestParseFilter(t *testing.T) {
	const fix = " (custodian.json in the Custodian container, as controlplane render --mount-dir names it)"
	for _, c := range []struct {
		in, err string
		want    FilterConfig
	}{
		{in: `{"engineConfig":"/etc/jr2/custodian/custodian.json"}`, want: FilterConfig{EngineConfig: "/etc/jr2/custodian/custodian.json"}},
		{in: `{"engineConfig":"custodian.json"}`, err: `filter config: engineConfig "custodian.json": want an absolute, clean path` + fix},
		{in: `{"engineConfig":"/etc/jr2/../custodian.json"}`, err: `filter config: engineConfig "/etc/jr2/../custodian.json": want an absolute, clean path` + fix},
		{in: `{"engineConfig":"/etc//custodian.json"}`, err: `filter config: engineConfig "/etc//custodian.json": want an absolute, clean path` + fix},
		{in: `{"engineConfig":""}`, err: "filter config: engineConfig is empty; set it to custodian.json's absolute path in the Custodian container"},
		{in: `{}`, err: "filter config: engineConfig is empty; set it to custodian.json's absolute path in the Custodian container"},
		{in: `{"engineConfig":"/` + strings.Repeat("a", 4096) + `"}`, err: "filter config: engineConfig is longer than 4096 bytes; set it to custodian.json's absolute path in the Custodian container"},
		{in: `{"engineConfig":"/a"} {}`, err: "filter config: more than one JSON value; render it with controlplane render"},
		{in: `{"pod":"p"}`, err: `filter config: pod: unknown field (known: engineConfig); render it with controlplane render`},
		{in: `{"engineConfig":"/a","engineConfig":"/b"}`, err: `filter config: engineConfig: given twice; give it once; render it with controlplane render`},
		{in: `{"engineconfig":"/a"}`, err: `filter config: engineconfig: spelled "engineconfig"; write "engineConfig" (keys are matched exactly); render it with controlplane render`},
		{in: `"/a"`, err: "filter config: want an object; render it with controlplane render"},
	} {
		check(t, "ParseFilter", ParseFilter, c.in, c.err, c.want, FilterConfig.Marshal)
	}
}
