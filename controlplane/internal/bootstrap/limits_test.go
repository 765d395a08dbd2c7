package bootstrap_test

import (
	"path"
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	connlimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/connection_limit/v3"
	downstreamv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/downstream_connections/v3"

	"jr2.dev/boundary/controlplane/internal/bootstrap"
	"jr2.dev/boundary/internal/hostlimits"
)

// TestAdminOnlyOnAUnixSocket: Envoy's admin interface is the unix socket
// custodian envoy drives the stop through (the directory's own, under
// hostlimits.AdminSocketDir), mode 0600, and nothing else.
func TestAdminOnlyOnAUnixSocket(t *testing.T) {
	a := build(t, config("ws-7f3a")).Admin
	p := a.GetAddress().GetPipe()
	if p.GetPath() != adminPath || path.Dir(adminPath) != hostlimits.AdminSocketDir || p.GetMode() != 0o600 || a.GetAddress().GetSocketAddress() != nil || len(a.SocketOptions) != 0 {
		t.Errorf("admin %v; want only the unix socket %s, mode 0600", a, adminPath)
	}
}

// TestAgentLimits: every listener of the agent's (control, egress, each
// intercept listener) holds the limits of package hostlimits, the numbers
// custodian serve reads too; the health listener keeps its own.
func TestAgentLimits(t *testing.T) {
	for _, dp := range []bootstrap.DataPlane{bootstrap.DataPlaneGolang, bootstrap.DataPlaneModule} {
		bs := buildPlane(t, config("ws-7f3a"), dp)
		for _, l := range bs.StaticResources.Listeners {
			m := hcm(t, l)
			if l.Name == bootstrap.ListenerHealth {
				if m.CommonHttpProtocolOptions.IdleTimeout.AsDuration() != 5*time.Second {
					t.Errorf("health idle %v", m.CommonHttpProtocolOptions.IdleTimeout)
				}
				continue
			}
			if m.RequestHeadersTimeout.AsDuration() != hostlimits.HeaderTimeout ||
				m.CommonHttpProtocolOptions.GetIdleTimeout().AsDuration() != hostlimits.IdleTimeout ||
				m.StreamIdleTimeout.AsDuration() != hostlimits.StreamIdle ||
				m.DrainTimeout.AsDuration() != time.Millisecond ||
				m.MaxRequestHeadersKb.GetValue() != hostlimits.MaxHeaderBytes>>10 {
				t.Errorf("%s %s: headers %v, idle %v, stream idle %v, drain %v, header kb %v", dp, l.Name, m.RequestHeadersTimeout,
					m.CommonHttpProtocolOptions.GetIdleTimeout(), m.StreamIdleTimeout, m.DrainTimeout, m.MaxRequestHeadersKb)
			}
			// The stop drains every listener: none is modify-only.
			if l.DrainType != listenerv3.Listener_DEFAULT {
				t.Errorf("%s %s: drain type %v", dp, l.Name, l.DrainType)
			}
		}
	}
}

// TestConnectionLimits: the egress and control listeners each hold at
// most their own number (a connection_limit filter first), the health
// listener its own, and the overload manager's global limit is the sum; no
// listener ignores it (Envoy 1.39.3 gives back a place it never took when a
// connection of such a listener closes).
func TestConnectionLimits(t *testing.T) {
	bs := build(t, config("ws-7f3a"))
	rm := bs.OverloadManager.GetResourceMonitors()
	if len(rm) != 1 || rm[0].Name != bootstrap.ResourceMonitorConnections ||
		unpack[*downstreamv3.DownstreamConnectionsConfig](t, rm[0].GetTypedConfig()).MaxActiveDownstreamConnections != hostlimits.MaxConnections {
		t.Fatalf("resource monitors %v; want the global connection limit %d", rm, hostlimits.MaxConnections)
	}
	if hostlimits.MaxConnections != hostlimits.EgressConnections+hostlimits.ControlConnections+hostlimits.HealthConnections {
		t.Fatal("the global limit is not the sum of the listeners' own")
	}
	want := map[string]uint64{
		bootstrap.ListenerEgress:  hostlimits.EgressConnections,
		bootstrap.ListenerControl: hostlimits.ControlConnections,
		bootstrap.ListenerHealth:  hostlimits.HealthConnections,
	}
	for _, l := range bs.StaticResources.Listeners {
		if l.IgnoreGlobalConnLimit {
			t.Errorf("%s ignores the global limit", l.Name)
		}
		max, ok := want[l.Name]
		if !ok {
			continue // an internal listener: its connections ride egress connections
		}
		fs := l.FilterChains[0].Filters
		if len(fs) != 2 || fs[0].Name != bootstrap.FilterConnLimit || unpack[*connlimitv3.ConnectionLimit](t, fs[0].GetTypedConfig()).MaxConnections.GetValue() != max {
			t.Errorf("%s: filters %v; want a connection limit of %d, then the connection manager", l.Name, fs, max)
		}
	}
}
