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
			data, err := os.ReadFile("../../controlplane/testdata/golden/" + size + "/envoy-module.json")
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
	data, err := os.ReadFile("../../controlplane/testdata/golden/small/envoy-module.json")
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
	if strings.Contains(string(out), "15001") || strings.Contains(string(out), "jr2-custodian-admin.sock") {
		t.Error("an original port or admin socket is left")
	}
	if _, err := Relocate(map[string]any{}, "/a", func() int { return 1 }); err == nil {
		t.Error("an envoy.json without listeners was relocated")
	}
}
