package benchenvoy

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestWithoutModule: on the module render's golden envoy.json, every
// dynamic-module filter and per-route config and jr2.rbac.mark go, and
// every listener, cluster and other filter stays.
func TestWithoutModule(t *testing.T) {
	for _, size := range []string{"small", "large"} {
		t.Run(size, func(t *testing.T) {
			data, err := os.ReadFile("../../../controlplane/testdata/golden/" + size + "/envoy.json")
			if err != nil {
				t.Fatal(err)
			}
			var before, after map[string]any
			if err := json.Unmarshal(data, &before); err != nil {
				t.Fatal(err)
			}
			json.Unmarshal(data, &after)
			listeners := func(c map[string]any) int { return len(c["static_resources"].(map[string]any)["listeners"].([]any)) }
			clusters := func(c map[string]any) int { return len(c["static_resources"].(map[string]any)["clusters"].([]any)) }
			n := WithoutModule(after)
			out, _ := json.Marshal(after)
			s := string(out)
			if n == 0 {
				t.Fatal("removed nothing")
			}
			for _, gone := range []string{"dynamic_modules", "jr2.rbac.mark", "custodian-module"} {
				if strings.Contains(s, gone) {
					t.Errorf("%s is left", gone)
				}
			}
			for _, kept := range []string{"jr2.rbac.guard", "envoy.filters.http.dynamic_forward_proxy", "envoy.filters.http.router", "envoy.transport_sockets.tls", "envoy.access_loggers.stdout", "internal_listener"} {
				if !strings.Contains(s, kept) {
					t.Errorf("%s was removed", kept)
				}
			}
			if listeners(after) != listeners(before) || clusters(after) != clusters(before) {
				t.Errorf("listeners %d→%d, clusters %d→%d", listeners(before), listeners(after), clusters(before), clusters(after))
			}
			if WithoutModule(after) != 0 {
				t.Error("a second pass removed more")
			}
		})
	}
}

// TestRelocate: every listener with a socket address moves to its own
// loopback port, the internal ones stay, the admin socket moves.
func TestRelocate(t *testing.T) {
	data, err := os.ReadFile("../../../controlplane/testdata/golden/small/envoy.json")
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	json.Unmarshal(data, &cfg)
	next := 40000
	addrs, err := Relocate(cfg, "/tmp/x/admin.sock", func() int { next++; return next })
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"control": "127.0.0.1:40001", "egress": "127.0.0.1:40002", "health": "127.0.0.1:40003"}
	if fmt.Sprint(addrs) != fmt.Sprint(want) {
		t.Errorf("addrs %v, want %v", addrs, want)
	}
	out, _ := json.Marshal(cfg)
	for _, s := range []string{`"pipe":{"mode":384,"path":"/tmp/x/admin.sock"}`, `"server_listener_name"`, `"internal_listener"`} {
		if !strings.Contains(string(out), s) {
			t.Errorf("%s missing", s)
		}
	}
	if strings.Contains(string(out), "15001") || strings.Contains(string(out), "jr2-custodian-admin-") {
		t.Error("an original port or admin socket is left")
	}
	if _, err := Relocate(map[string]any{}, "/a", func() int { return 1 }); err == nil {
		t.Error("an envoy.json without listeners was relocated")
	}
}

// TestParts: each part transform touches its part only.
func TestParts(t *testing.T) {
	load := func(t *testing.T) map[string]any {
		data, err := os.ReadFile("../../../controlplane/testdata/golden/small/envoy.json")
		if err != nil {
			t.Fatal(err)
		}
		var cfg map[string]any
		if err := json.Unmarshal(data, &cfg); err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	t.Run("intercept logs", func(t *testing.T) {
		cfg := load(t)
		if n := WithoutInterceptLogs(cfg); n != 4 {
			t.Fatalf("removed %d access logs, want the intercept listener's 4", n)
		}
		if connectionManager(listener(cfg, "intercept"))["access_log"] != nil {
			t.Error("the intercept listener kept an access log")
		}
		if connectionManager(listener(cfg, "egress"))["access_log"] == nil {
			t.Error("the egress listener's access logs were removed")
		}
		if WithoutInterceptLogs(cfg) != 0 {
			t.Error("a second pass removed more")
		}
	})
	t.Run("stats", func(t *testing.T) {
		cfg := load(t)
		WithoutStats(cfg)
		out, _ := json.Marshal(cfg["stats_config"])
		if string(out) != `{"stats_matcher":{"reject_all":true}}` {
			t.Errorf("stats_config %s", out)
		}
	})
	t.Run("direct intercept", func(t *testing.T) {
		cfg := load(t)
		if name, err := DirectIntercept(cfg, "api.github.com:443"); err != nil || name != "intercept" {
			t.Fatal(name, err)
		}
		l := listener(cfg, "intercept")
		if _, ok := l["internal_listener"]; ok {
			t.Error("the intercept listener is still internal")
		}
		fs := l["filter_chains"].([]any)[0].(map[string]any)["filters"].([]any)
		out, _ := json.Marshal(fs[0])
		if !strings.Contains(string(out), `"inline_string":"api.github.com:443"`) || !strings.Contains(string(out), `"object_key":"jr2.custodian.target"`) {
			t.Errorf("first filter %s", out)
		}
		if fs[1].(map[string]any)["name"] != "envoy.filters.network.http_connection_manager" {
			t.Error("the connection manager is not second")
		}
		addrs, err := Relocate(cfg, "/a", func() int { return 1234 })
		if err != nil || addrs["intercept"] != "127.0.0.1:1234" {
			t.Errorf("relocated %v %v", addrs, err)
		}
		if _, err := DirectIntercept(map[string]any{}, "x:1"); err == nil {
			t.Error("an envoy.json without an intercept listener was changed")
		}
	})
}

// TestWithoutMark: the mark goes, the module stays.
func TestWithoutMark(t *testing.T) {
	data, err := os.ReadFile("../../../controlplane/testdata/golden/small/envoy.json")
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	json.Unmarshal(data, &cfg)
	if n := WithoutMark(cfg); n == 0 {
		t.Fatal("removed nothing")
	}
	out, _ := json.Marshal(cfg)
	if strings.Contains(string(out), "jr2.rbac.mark") || !strings.Contains(string(out), "envoy.filters.http.dynamic_modules") || !strings.Contains(string(out), `\"role\":\"intercept\"`) {
		t.Error("WithoutMark removed more or less than the mark")
	}
}

// TestPartsAddressTargets: a target named by its address has an intercept
// listener of its own; both transforms find it.
func TestPartsAddressTargets(t *testing.T) {
	data, err := os.ReadFile("../../../controlplane/testdata/golden/large/envoy.json")
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	json.Unmarshal(data, &cfg)
	if n := WithoutInterceptLogs(cfg); n != 3*4 {
		t.Errorf("removed %d access logs, want 4 on each of 3 intercept listeners", n)
	}
	if name, err := DirectIntercept(cfg, "10.20.30.40:4443"); err != nil || name != "intercept|10.20.30.40:4443" {
		t.Fatal(name, err)
	}
	if _, ok := listener(cfg, "intercept|10.20.30.40:4443")["address"]; !ok {
		t.Error("the target's own intercept listener was not placed")
	}
	if _, ok := listener(cfg, "intercept")["address"]; ok {
		t.Error("the shared intercept listener was placed instead")
	}
}

// TestWithModuleFile: every module reference moves, nothing else changes.
func TestWithModuleFile(t *testing.T) {
	data, err := os.ReadFile("../../../controlplane/testdata/golden/small/envoy.json")
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	json.Unmarshal(data, &cfg)
	n := WithModuleFile(cfg, "/bench/noop.so")
	out, _ := json.Marshal(cfg)
	if want := strings.Count(string(data), `"filename": "/opt/jr2/lib/custodian-module.so"`); n == 0 || n != want {
		t.Errorf("changed %d module files, the golden names %d", n, want)
	}
	if strings.Contains(string(out), "custodian-module.so") || strings.Count(string(out), "/bench/noop.so") != n {
		t.Error("a module reference was left or doubled")
	}
}
