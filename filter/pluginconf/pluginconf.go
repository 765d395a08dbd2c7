// Package pluginconf is the contract between the rendered Envoy bootstrap
// (controlplane render) and the Go filter inside Envoy: the plugin's name,
// the dynamic-metadata mark the fail-closed RBAC filter requires, and the
// per-route config that tells the filter which listener (and which bound
// target) a request arrived on.
//
// Invariant: both sides take these names from here, so the RBAC that
// requires the mark and the filter that sets it cannot disagree. Nothing
// here holds a value.
//
// The filter-level plugin config is a google.protobuf.StringValue whose
// value is custodian.json's bytes (the engine config). The per-route config
// (golang ConfigsPerRoute → plugins_config[PluginName].config) is a
// StringValue whose value is a RouteConfig as JSON.
package pluginconf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// PluginName is the golang filter's plugin_name and library_id. A config
// whose plugin_name matches no registered plugin passes traffic through
// silently in Envoy (envoyproxy/envoy#29332); the mark below is what makes
// that fail closed.
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
	RoleIntercept Role = "intercept" // an internal listener per bound target
)

// RouteConfig is the per-route plugin config.
type RouteConfig struct {
	Role Role `json:"role"`
	// Target is the bound host:port of an intercept route (canonical, as in
	// custodian.json); empty otherwise.
	Target string `json:"target,omitempty"`
}

// ParseRoute reads a RouteConfig strictly.
func ParseRoute(b []byte) (RouteConfig, error) {
	var rc RouteConfig
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rc); err != nil {
		return rc, fmt.Errorf("route config: %v", err)
	}
	if dec.More() {
		return rc, errors.New("route config: more than one JSON value")
	}
	switch rc.Role {
	case RoleControl, RoleEgress:
		if rc.Target != "" {
			return rc, fmt.Errorf("route config: role %s takes no target", rc.Role)
		}
	case RoleIntercept:
		if rc.Target == "" {
			return rc, errors.New("route config: role intercept needs the bound target")
		}
	default:
		return rc, fmt.Errorf("route config: role %q: want control, egress or intercept", rc.Role)
	}
	return rc, nil
}

// Marshal renders rc as the per-route JSON.
func (rc RouteConfig) Marshal() []byte {
	b, _ := json.Marshal(rc)
	return b
}
