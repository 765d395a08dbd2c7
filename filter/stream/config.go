package stream

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/filter/pluginconf"
	"jr2.dev/boundary/internal/contract"
	"jr2.dev/boundary/internal/logline"
	"jr2.dev/boundary/internal/valuedir"
)

// Config is what a stream runs with: an engine and the route's role (and
// target), or, when broken, nothing but the refusal of every request.
// It is read-only once made.
type Config struct {
	engine *filter.Engine
	route  pluginconf.RouteConfig
	broken *misconfig
	// upstream is the intercept route's Host for its upstream
	// (contract.UpstreamHost of its target), spelled once.
	upstream string
	// targets are an intercept config without a target of its own
	// (FromConnection) merged with each connection target it met, by
	// target: each bound target's config is made once. Nil otherwise.
	targets *byTarget
}

// byTarget is a map read by every stream and written once per target: a
// lookup by a string allocates nothing, where a sync.Map's any key would.
type byTarget struct {
	mu sync.RWMutex
	m  map[string]*Config
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
	if rc.Role == pluginconf.RoleIntercept && rc.Target == "" {
		// The connection's target, one per stream: refused until
		// ForConnection names it.
		return &Config{engine: e, route: rc, broken: noConnectionTarget, targets: &byTarget{m: map[string]*Config{}}}
	}
	if rc.Role == pluginconf.RoleIntercept && !bound(e, rc.Target) {
		return logBroken(&Config{broken: &misconfig{"route-target", "the route's target " + rc.Target + " is not bound in custodian.json"}}, log)
	}
	return &Config{engine: e, route: rc, upstream: contract.UpstreamHost(rc.Target)}
}

// noConnectionTarget: an intercept config that takes its target from the
// connection, used before ForConnection named it.
var noConnectionTarget = &misconfig{"route-target", "the connection carries no bound target (" + pluginconf.TargetFilterState + ")"}

// FromConnection reports whether c is an intercept config whose target is
// the connection's (pluginconf.TargetFilterState), so that a host must
// give it the stream's with ForConnection before the stream runs.
func (c *Config) FromConnection() bool { return c != nil && c.targets != nil }

// ForConnection is c for the connection's target t, which the egress
// listener decided (found says whether the connection carries one): the
// Merge of c's engine and route with t, made once per target. t may be a
// view of the host's memory valid only during the call: it is copied when
// kept. A connection without a target, or with one the engine does not
// bind, gets a broken config that refuses every request (and log its
// line); a config not FromConnection is returned as it is.
func (c *Config) ForConnection(t string, found bool, log func(string)) *Config {
	if !c.FromConnection() {
		return c
	}
	if !found || t == "" {
		return logBroken(c, log)
	}
	c.targets.mu.RLock()
	m, ok := c.targets.m[t]
	c.targets.mu.RUnlock()
	if ok {
		return m
	}
	rc := c.route
	rc.Target = strings.Clone(t)
	m = Merge(c.engine, rc, log)
	if _, broken := m.Broken(); !broken {
		// Only bound targets are kept: the map stays as small as
		// custodian.json's targets, whatever a connection carried.
		c.targets.mu.Lock()
		c.targets.m[rc.Target] = m
		c.targets.mu.Unlock()
	}
	return m
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

// Engines builds the engine of each custodian.json once per process: the
// many listeners (and filter configs) that name one custodian.json share
// one engine lineage, and the file is read once, by the first filter
// config that names the path. Its values then follow their files
// (filter.Live.Watch): a rotation of the value directory swaps, on Go's
// side, the pointer each new stream reads (filter.Engine.Latest); a stream
// keeps the engine it began with. The watcher's goroutine never calls into
// Envoy: its reload lines (action=reload) are written to the process's
// stderr, whole, where Envoy's own log goes too. A changed custodian.json
// takes effect when Envoy starts again. A file that could not be read or
// was refused is not remembered, so a fixed file is read by the next
// filter config. It is safe for concurrent use; the engines it returns
// are read-only and shared.
type Engines struct {
	mu sync.Mutex
	m  map[string]*filter.Engine
	// log receives the ready line of each engine built.
	log func(string)
	// reload receives the reload lines of the watchers (ReloadLog).
	reload func(string)
}

// ReloadLog writes one reload line to stderr, whole: what the watchers of
// Engines log, from a goroutine of their own.
func ReloadLog(line string) {
	os.Stderr.Write([]byte(line + "\n"))
}

// NewEngines returns an empty cache whose ready lines go to log.
func NewEngines(log func(string)) *Engines {
	return &Engines{m: map[string]*filter.Engine{}, log: log, reload: ReloadLog}
}

// Engine returns the engine of the filter-level config fc, building it
// (reading custodian.json and the values) only the first time its path is
// seen. A relative valuesDir is resolved against custodian.json's
// directory, as custodian serve resolves it. Its errors name the file and
// the fix, never a value.
func (c *Engines) Engine(fc pluginconf.FilterConfig) (*filter.Engine, error) {
	path := fc.EngineConfig
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("engineConfig %q is relative; render it with controlplane render, which writes custodian.json's absolute path in the Custodian container", path)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[path]; ok {
		return e, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		why := err
		var pe *fs.PathError
		if errors.As(err, &pe) {
			why = pe.Err
		}
		return nil, fmt.Errorf("engineConfig %s: cannot be read (%v); mount controlplane render's directory there (its --mount-dir), readable by Envoy's user", path, why)
	}
	cfg, err := filter.ParseConfig(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %s", path, strings.TrimPrefix(err.Error(), "custodian.json: "))
	}
	if !filepath.IsAbs(cfg.ValuesDir) {
		cfg.ValuesDir = filepath.Join(filepath.Dir(path), cfg.ValuesDir)
	}
	values, err := filter.LoadValues(cfg)
	if err != nil {
		return nil, err
	}
	reload := c.reload
	live, err := filter.NewLive(cfg, values, filter.LiveOptions{Log: func(kv ...string) {
		reload(logline.Format(logline.Custodian, kv...))
	}})
	for _, v := range values {
		clear(v) // the engine keeps its own copy
	}
	if err != nil {
		return nil, err
	}
	// The watcher runs for the life of the process, as the engine does.
	live.Watch(valuedir.WatchOptions{})
	e := live.Engine()
	if cfg.HasOAuth() {
		// The minter's token fetches run on its own goroutines through a
		// Go transport of this process (filter.TokenTransport), never on
		// an Envoy worker: no callback waits on one.
		roots, err := upstreamRoots(filepath.Join(filepath.Dir(path), "ca", "upstream.crt"))
		if err != nil {
			return nil, err
		}
		live.Mint(filter.TokenTransport(e, &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}, roots))
	}
	c.m[path] = e
	if c.log != nil {
		c.log(logline.Event(logline.Custodian, "ready", e.ReadyFields()...))
	}
	return e, nil
}

// upstreamRoots reads the roots every upstream is verified against, for
// an OAuth secret's token endpoint.
func upstreamRoots(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("upstream roots for the token endpoints: %w; mount controlplane render's directory, its ca/upstream.crt too", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("upstream roots for the token endpoints: %s holds no certificate; render the directory again with controlplane render", file)
	}
	return roots, nil
}
