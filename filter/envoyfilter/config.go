package envoyfilter

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"

	"github.com/envoyproxy/envoy/contrib/golang/common/go/api"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/filter/pluginconf"
	"jr2.dev/boundary/internal/logline"
)

// Parser is the plugin's api.StreamFilterConfigParser. It is safe for
// concurrent use; the engines it builds are read-only and shared.
type Parser struct {
	mu      sync.Mutex
	engines map[[sha256.Size]byte]*filter.Engine
}

var _ api.StreamFilterConfigParser = (*Parser)(nil)

// NewParser returns a Parser with an empty engine cache. The plugin
// registers one for the life of the process.
func NewParser() *Parser {
	return &Parser{engines: map[[sha256.Size]byte]*filter.Engine{}}
}

// filterConfig is a parsed filter-level config: the engine of one
// custodian.json.
type filterConfig struct {
	engine *filter.Engine
}

// routeConfig is a parsed per-route config: the listener role (and target)
// of the routes that carry it.
type routeConfig struct {
	route pluginconf.RouteConfig
}

// streamConfig is what the factory runs a stream with: an engine and a
// route, or, when broken is set, nothing but the refusal of every request.
type streamConfig struct {
	engine *filter.Engine
	route  pluginconf.RouteConfig
	broken *misconfig
}

// misconfig is why a stream config cannot decide: a word for the log and a
// sentence for the 500 the agent gets. Neither holds a value.
type misconfig struct {
	word string
	why  string
}

// The ways a stream can end up without a usable config. Each answers every
// request 500 and never marks.
var (
	errNoRouteConfig = &misconfig{"no-route-config", "the route carries no " + pluginconf.PluginName + " per-route config"}
	errNoConfig      = &misconfig{"no-config", "the filter was given no " + pluginconf.PluginName + " config"}
	errBadParent     = &misconfig{"parent-config", "the filter-level config is not custodian.json"}
	errBadChild      = &misconfig{"route-config", "the per-route config is not a " + pluginconf.PluginName + " route config"}
)

// Parse reads one plugin config: a StringValue holding custodian.json (the
// filter level) or a RouteConfig (a route). Every error is returned, which
// makes Envoy reject the config; no input panics.
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
		if err := oneValue(b); err != nil {
			return nil, fmt.Errorf("%s route config: %w", pluginconf.PluginName, err)
		}
		rc, err := pluginconf.ParseRoute(b)
		if err != nil {
			return nil, fmt.Errorf("%s %w", pluginconf.PluginName, err)
		}
		return &routeConfig{route: rc}, nil
	}
	e, err := p.engine(b)
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
		return nil, fmt.Errorf("%s plugin config: type %q: want a google.protobuf.StringValue holding custodian.json or a route config", pluginconf.PluginName, clip(a.GetTypeUrl(), 120))
	}
	return []byte(sv.GetValue()), nil
}

// isRouteConfig reports whether b begins with a JSON object with a
// top-level "role" key: the shape of a RouteConfig, and never of
// custodian.json.
func isRouteConfig(b []byte) bool {
	var top map[string]json.RawMessage
	if json.NewDecoder(bytes.NewReader(b)).Decode(&top) != nil {
		return false
	}
	_, ok := top["role"]
	return ok
}

// oneValue refuses bytes after the first JSON value, which ParseRoute
// would ignore.
func oneValue(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	var v json.RawMessage
	if err := dec.Decode(&v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("more than one JSON value; render it with controlplane render")
	}
	return nil
}

// engine returns the engine of custodian.json's bytes b, building it (and
// reading the values) only the first time these bytes are seen.
func (p *Parser) engine(b []byte) (*filter.Engine, error) {
	key := sha256.Sum256(b)
	p.mu.Lock()
	defer p.mu.Unlock()
	if e, ok := p.engines[key]; ok {
		return e, nil
	}
	c, err := filter.ParseConfig(b)
	if err != nil {
		return nil, err
	}
	if !filepath.IsAbs(c.ValuesDir) {
		return nil, fmt.Errorf("custodian.json: valuesDir: %q is relative, and a plugin config has no directory to resolve it against; render it with an absolute --values-dir", c.ValuesDir)
	}
	values, err := filter.LoadValues(c)
	if err != nil {
		return nil, err
	}
	e, err := filter.New(c, values)
	for _, v := range values {
		clear(v) // the engine keeps its own copy
	}
	if err != nil {
		return nil, err
	}
	p.engines[key] = e
	api.LogInfo(logline.Event(logline.Custodian, "ready", e.ReadyFields()...))
	return e, nil
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
		if pc != nil && pc.broken != nil {
			return pc
		}
		if pc != nil {
			e = pc.engine
		}
	}
	if e == nil {
		return brokenConfig(errBadParent)
	}
	rc, ok := child.(*routeConfig)
	if !ok || rc == nil {
		return brokenConfig(errBadChild)
	}
	if rc.route.Role == pluginconf.RoleIntercept && !bound(e, rc.route.Target) {
		return brokenConfig(&misconfig{"route-target", "the route's target " + rc.route.Target + " is not bound in custodian.json"})
	}
	return &streamConfig{engine: e, route: rc.route}
}

// brokenConfig logs why a config cannot decide and returns the config that
// refuses every request with it.
func brokenConfig(m *misconfig) *streamConfig {
	api.LogError(logline.Event(logline.Custodian, "misconfigured", "reason", m.word))
	return &streamConfig{broken: m}
}

func bound(e *filter.Engine, target string) bool {
	for _, t := range e.Targets() {
		if t == target {
			return true
		}
	}
	return false
}

// clip bounds a string quoted into an error.
func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
