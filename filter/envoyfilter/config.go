package envoyfilter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/envoyproxy/envoy/contrib/golang/common/go/api"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/filter/pluginconf"
	"jr2.dev/boundary/filter/stream"
)

// Parser is the plugin's api.StreamFilterConfigParser. It is safe for
// concurrent use; the engines it builds are read-only and shared.
type Parser struct {
	engines *stream.Engines
}

var _ api.StreamFilterConfigParser = (*Parser)(nil)

// NewParser returns a Parser with an empty engine cache. The plugin
// registers one for the life of the process.
func NewParser() *Parser {
	return &Parser{engines: stream.NewEngines(api.LogInfo)}
}

// filterConfig is a parsed filter-level config: the engine of the
// custodian.json its path names.
type filterConfig struct {
	engine *filter.Engine
}

// routeConfig is a parsed per-route config: the listener role (and target)
// of the routes that carry it.
type routeConfig struct {
	route pluginconf.RouteConfig
}

// streamConfig is what the factory runs a stream with (package stream).
type streamConfig = stream.Config

// The ways a stream can end up without a usable config (package stream).
var (
	errNoRouteConfig = stream.NoRouteConfig
	errNoConfig      = stream.NoConfig
	errBadParent     = stream.BadParent
	errBadChild      = stream.BadChild
)

// Parse reads one plugin config: a StringValue holding a
// pluginconf.FilterConfig (the filter level: custodian.json's path, read
// once per path and process, so the many listeners that share one
// custodian.json build one engine and read the value directory once) or a
// RouteConfig (a route). It tells them apart by shape, not by guessing: a
// JSON object with a top-level "role" key is a RouteConfig (a
// FilterConfig has no such key); anything else must be a FilterConfig.
// Every error is returned, which makes Envoy reject the config; no input
// panics.
func (p *Parser) Parse(a *anypb.Any, _ api.ConfigCallbackHandler) (cfg interface{}, err error) {
	defer func() {
		if recover() != nil {
			cfg, err = nil, errors.New(pluginconf.PluginName+" plugin config: internal error while parsing; the config was rejected")
		}
	}()
	b, err := unpack(a)
	if err != nil {
		return nil, err
	}
	if isRouteConfig(b) {
		rc, err := pluginconf.ParseRoute(b)
		if err != nil {
			return nil, fmt.Errorf("%s %w", pluginconf.PluginName, err)
		}
		return &routeConfig{route: rc}, nil
	}
	fc, err := pluginconf.ParseFilter(b)
	if err != nil {
		return nil, fmt.Errorf("%s %w", pluginconf.PluginName, err)
	}
	e, err := p.engine(fc)
	if err != nil {
		return nil, fmt.Errorf("%s plugin config: %w", pluginconf.PluginName, err)
	}
	return &filterConfig{engine: e}, nil
}

// unpack returns the bytes of the StringValue in a.
func unpack(a *anypb.Any) ([]byte, error) {
	if a == nil {
		return nil, errors.New(pluginconf.PluginName + " plugin config: empty; set the golang filter's plugin_config to a google.protobuf.StringValue")
	}
	var sv wrapperspb.StringValue
	if err := a.UnmarshalTo(&sv); err != nil {
		return nil, fmt.Errorf("%s plugin config: type %q: want a google.protobuf.StringValue holding a filter config (custodian.json's path) or a route config", pluginconf.PluginName, clip(a.GetTypeUrl(), 120))
	}
	return []byte(sv.GetValue()), nil
}

// isRouteConfig reports whether b begins with a JSON object with a
// top-level "role" key (in any case): the shape of a RouteConfig, and never of a
// FilterConfig.
func isRouteConfig(b []byte) bool {
	var top map[string]json.RawMessage
	if json.NewDecoder(bytes.NewReader(b)).Decode(&top) != nil {
		return false
	}
	for k := range top {
		if strings.EqualFold(k, "role") { // "ROLE" too, so that ParseRoute names its spelling
			return true
		}
	}
	return false
}

// engine returns the engine of the custodian.json fc names (package
// stream's cache: read and built once per path and process).
func (p *Parser) engine(fc pluginconf.FilterConfig) (*filter.Engine, error) {
	return p.engines.Engine(fc)
}

// Merge joins a parent config (the filter level, or an earlier merge) with a
// route's config. Envoy calls it once per route and level; it never panics,
// and what it cannot merge becomes a config that refuses every request.
func (p *Parser) Merge(parent, child interface{}) (merged interface{}) {
	defer func() {
		if recover() != nil {
			merged = brokenConfig(errBadParent)
		}
	}()
	var e *filter.Engine
	switch pc := parent.(type) {
	case *filterConfig:
		if pc != nil {
			e = pc.engine
		}
	case *streamConfig:
		// A parent waiting for the connection's target (a virtual host's
		// intercept config) is not broken: a route's own config below it
		// wins, as any more specific one does.
		if _, broken := pc.Broken(); broken && !pc.FromConnection() {
			return pc
		}
		e = pc.Engine()
	}
	if e == nil {
		return brokenConfig(errBadParent)
	}
	rc, ok := child.(*routeConfig)
	if !ok || rc == nil {
		return brokenConfig(errBadChild)
	}
	return stream.Merge(e, rc.route, api.LogError)
}

// brokenConfig logs why a config cannot decide and returns it.
func brokenConfig(c *streamConfig) *streamConfig { return stream.LogBroken(c, api.LogError) }

// clip bounds a string quoted into an error.
func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
