package stream

import (
	"crypto/sha256"
	"fmt"
	"path/filepath"
	"sync"

	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/filter/pluginconf"
	"jr2.dev/boundary/internal/logline"
)

// Config is what a stream runs with: an engine and the route's role (and
// target), or, when broken, nothing but the refusal of every request.
// It is read-only once made.
type Config struct {
	engine *filter.Engine
	route  pluginconf.RouteConfig
	broken *misconfig
}

// misconfig is why a config cannot decide: a word for the log and a
// sentence for the 500 the agent gets. Neither holds a value.
type misconfig struct {
	word string
	why  string
}

// The ways a stream can end up without a usable config. Each answers every
// request 500 and never marks.
var (
	// NoRouteConfig: the filter-level config arrived, the route's did not.
	NoRouteConfig = &Config{broken: &misconfig{"no-route-config", "the route carries no " + pluginconf.PluginName + " per-route config"}}
	// NoConfig: the filter was given no config it could use.
	NoConfig = &Config{broken: &misconfig{"no-config", "the filter was given no " + pluginconf.PluginName + " config"}}
	// BadParent: the filter-level config is not custodian.json.
	BadParent = &Config{broken: &misconfig{"parent-config", "the filter-level config is not custodian.json"}}
	// BadChild: the per-route config is not a route config.
	BadChild = &Config{broken: &misconfig{"route-config", "the per-route config is not a " + pluginconf.PluginName + " route config"}}
)

// Broken reports whether c refuses every request, and the log word why.
func (c *Config) Broken() (string, bool) {
	if c == nil || c.broken == nil {
		return "", false
	}
	return c.broken.word, true
}

// Why is the sentence a broken config answers with; empty when c is not
// broken.
func (c *Config) Why() string {
	if c == nil || c.broken == nil {
		return ""
	}
	return c.broken.why
}

// Route is the route config c decides for.
func (c *Config) Route() pluginconf.RouteConfig {
	if c == nil {
		return pluginconf.RouteConfig{}
	}
	return c.route
}

// Engine is c's engine; nil when c is broken.
func (c *Config) Engine() *filter.Engine {
	if c == nil {
		return nil
	}
	return c.engine
}

// Merge joins the engine of the filter-level config with a route's config.
// A nil engine, or an intercept route whose target the engine does not
// bind, gives a broken config; log receives the misconfigured line then.
func Merge(e *filter.Engine, rc pluginconf.RouteConfig, log func(string)) *Config {
	if e == nil {
		return logBroken(BadParent, log)
	}
	if rc.Role == pluginconf.RoleIntercept && !bound(e, rc.Target) {
		return logBroken(&Config{broken: &misconfig{"route-target", "the route's target " + rc.Target + " is not bound in custodian.json"}}, log)
	}
	return &Config{engine: e, route: rc}
}

// logBroken logs why c cannot decide and returns it.
func logBroken(c *Config, log func(string)) *Config {
	if log != nil {
		log(logline.Event(logline.Custodian, "misconfigured", "reason", c.broken.word))
	}
	return c
}

// LogBroken is logBroken for the adapters' own broken configs.
func LogBroken(c *Config, log func(string)) *Config { return logBroken(c, log) }

func bound(e *filter.Engine, target string) bool {
	for _, t := range e.Targets() {
		if t == target {
			return true
		}
	}
	return false
}

// Engines builds the engine of each distinct custodian.json once: the many
// listeners (and filter configs) that share one custodian.json share one
// engine, and the value directory is read once. It is safe for concurrent
// use; the engines it returns are read-only and shared.
type Engines struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]*filter.Engine
	// log receives the ready line of each engine built.
	log func(string)
}

// NewEngines returns an empty cache whose ready lines go to log.
func NewEngines(log func(string)) *Engines {
	return &Engines{m: map[[sha256.Size]byte]*filter.Engine{}, log: log}
}

// Engine returns the engine of custodian.json's bytes b, building it (and
// reading the values) only the first time these bytes are seen. Its errors
// name the file and the fix, never a value.
func (c *Engines) Engine(b []byte) (*filter.Engine, error) {
	key := sha256.Sum256(b)
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[key]; ok {
		return e, nil
	}
	cfg, err := filter.ParseConfig(b)
	if err != nil {
		return nil, err
	}
	if !filepath.IsAbs(cfg.ValuesDir) {
		return nil, fmt.Errorf("custodian.json: valuesDir: %q is relative, and a filter config has no directory to resolve it against; render it with an absolute --values-dir", cfg.ValuesDir)
	}
	values, err := filter.LoadValues(cfg)
	if err != nil {
		return nil, err
	}
	e, err := filter.New(cfg, values)
	for _, v := range values {
		clear(v) // the engine keeps its own copy
	}
	if err != nil {
		return nil, err
	}
	c.m[key] = e
	if c.log != nil {
		c.log(logline.Event(logline.Custodian, "ready", e.ReadyFields()...))
	}
	return e, nil
}
