package pluginconf

import "testing"

func TestParseRoute(t *testing.T) {
	for _, c := range []struct {
		in, err string
		want    RouteConfig
	}{
		{in: `{"role":"control"}`, want: RouteConfig{Role: RoleControl}},
		{in: `{"role":"egress"}`, want: RouteConfig{Role: RoleEgress}},
		{in: `{"role":"intercept","target":"api.example.com:443"}`, want: RouteConfig{Role: RoleIntercept, Target: "api.example.com:443"}},
		{in: `{"role":"intercept"}`, err: "route config: role intercept needs the bound target"},
		{in: `{"role":"egress","target":"x:1"}`, err: "route config: role egress takes no target"},
		{in: `{"role":"admin"}`, err: `route config: role "admin": want control, egress or intercept`},
		{in: `{"role":"egress"} {"role":"control"}`, err: "route config: more than one JSON value"},
		{in: `{"role":"egress","extra":1}`, err: `route config: json: unknown field "extra"`},
		{in: `[]`, err: "route config: json: cannot unmarshal array into Go value of type pluginconf.RouteConfig"},
	} {
		got, err := ParseRoute([]byte(c.in))
		if c.err != "" {
			if err == nil || err.Error() != c.err {
				t.Errorf("ParseRoute(%s): err %v, want %s", c.in, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ParseRoute(%s) = %+v, %v", c.in, got, err)
		}
		if back, err := ParseRoute(got.Marshal()); err != nil || back != got {
			t.Errorf("Marshal round trip: %+v %v", back, err)
		}
	}
}
