// Package pluginconf is the contract between the rendered Envoy bootstrap
// (controlplane render) and the engine's filter inside Envoy (the dynamic
// module or the Go filter): the plugin's name,
// the dynamic-metadata mark the fail-closed RBAC filter requires, and the
// per-route config that tells the filter which listener (and which bound
// target) a request arrived on.
//
// Invariant: both sides take these names from here, so the RBAC that
// requires the mark and the filter that sets it cannot disagree. Nothing
// here holds a value.
//
// The filter-level plugin config (the golang filter's plugin_config, the
// module's filter_config) is a google.protobuf.StringValue whose value is a
// FilterConfig as JSON: the absolute path of custodian.json in the
// Custodian container, never its contents. Every listener's engine filter
// carries the same few bytes; the filter reads the file once per process
// (package stream's Engines), so envoy.json grows with targets plus
// secrets, not with their product. The per-route config (golang
// ConfigsPerRoute → plugins_config[PluginName].config, the module's
// DynamicModuleFilterPerRoute.filter_config) is a StringValue whose value
// is a RouteConfig as JSON. The two are told apart by their one required
// key: "engineConfig" or "role".
package pluginconf

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"

	"jr2.dev/boundary/internal/strictjson"
)

// PluginName is the golang filter's plugin_name and library_id. A config
// whose plugin_name matches no registered plugin passes traffic through
// Envoy's golang filter silently; the mark below is what makes that fail
// closed.
const PluginName = "jr2-custodian"

// MetadataNamespace is the dynamic-metadata namespace the filter writes.
const MetadataNamespace = "jr2.custodian"

// MarkKey is set to true (a bool) in MetadataNamespace on every request the
// filter decided to forward. The RBAC filter after it allows only requests
// that carry it. Dynamic metadata cannot be set by a client.
const MarkKey = "decided"

// Role names the listener a route belongs to.
type Role string

// The three listeners whose routes run the filter.
const (
	RoleControl   Role = "control"   // 127.0.0.1:8081: the four routes to the Orchestrator
	RoleEgress    Role = "egress"    // 127.0.0.1:15001: CONNECT; intercept or tunnel
	RoleIntercept Role = "intercept" // an intercept (internal) listener's route of one bound target
)

// RouteConfig is the per-route plugin config.
type RouteConfig struct {
	Role Role `json:"role"`
	// Target is the bound host:port of an intercept route (canonical, as in
	// custodian.json); empty otherwise. An intercept config without one
	// takes the connection's, TargetFilterState: the shared intercept
	// listener's one config for all its targets, where a config per
	// target route was a fifth of a large envoy.json.
	Target string `json:"target,omitempty"`
}

// TargetFilterState is the filter state key of an intercepted
// connection's target: written by the egress listener from the CONNECT
// the engine decided (rewritten to its canonical host:port), shared with
// the intercept listener's connection, where its routes match it and an
// intercept config without a target reads it. A client cannot set filter
// state.
const TargetFilterState = "jr2.custodian.target"

// ParseRoute reads a RouteConfig strictly.
func ParseRoute(b []byte) (RouteConfig, error) {
	var rc RouteConfig
	if err := decodeOne(b, &rc, "route config", "; render it with controlplane render"); err != nil {
		return rc, err
	}
	switch rc.Role {
	case RoleControl, RoleEgress:
		if rc.Target != "" {
			return rc, fmt.Errorf("route config: role %s takes no target", rc.Role)
		}
	case RoleIntercept:
		// No target: the connection's, TargetFilterState.
	default:
		return rc, fmt.Errorf("route config: role %q: want control, egress or intercept", rc.Role)
	}
	return rc, nil
}

// decodeOne reads exactly one JSON value of b into v with the one strict
// reader (package strictjson): a key unknown, in another case or given
// twice is refused. Its errors begin with what and end with fix.
func decodeOne(b []byte, v any, what, fix string) error {
	return strictjson.Decode(b, v, what, fix)
}

// Marshal renders rc as the per-route JSON.
func (rc RouteConfig) Marshal() []byte {
	b, _ := json.Marshal(rc)
	return b
}

// FilterConfig is the filter-level plugin config: where the engine config
// is.
type FilterConfig struct {
	// EngineConfig is the absolute, clean path of custodian.json in the
	// Custodian container (controlplane render: --mount-dir/custodian.json).
	EngineConfig string `json:"engineConfig"`
}

// ParseFilter reads a FilterConfig strictly: one JSON object, no other
// key, an absolute clean path. Its errors name the fix; they quote no
// more of the input than the path.
func ParseFilter(b []byte) (FilterConfig, error) {
	var fc FilterConfig
	if err := decodeOne(b, &fc, "filter config", "; render it with controlplane render"); err != nil {
		return fc, err
	}
	p := fc.EngineConfig
	switch {
	case p == "":
		return fc, errors.New("filter config: engineConfig is empty; set it to custodian.json's absolute path in the Custodian container")
	case len(p) > 4096:
		return fc, errors.New("filter config: engineConfig is longer than 4096 bytes; set it to custodian.json's absolute path in the Custodian container")
	case !path.IsAbs(p) || path.Clean(p) != p:
		return fc, fmt.Errorf("filter config: engineConfig %q: want an absolute, clean path (custodian.json in the Custodian container, as controlplane render --mount-dir names it)", p)
	}
	return fc, nil
}

// Marshal renders fc as the filter-level JSON.
func (fc FilterConfig) Marshal() []byte {
	b, _ := json.Marshal(fc)
	return b
}
