package bootstrap

import (
	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	accesslogdatav3 "github.com/envoyproxy/go-control-plane/envoy/data/accesslog/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"jr2.dev/boundary/filter"
)

// What Envoy's HTTP/1 codec and connection manager refuse before any
// filter runs, so before the engine can: each is answered with the
// engine's own text by a local-reply mapper, and logged with the engine's
// line by an access log, so that no refusal of one host is silent or
// worded otherwise in the other.
const (
	// fragmentRejected: a request target holding '#' (Envoy's
	// http_reject_path_with_fragment, on by default): rule 5's 400.
	fragmentRejected = "response.code_details == 'path_normalization_failed'"
	// invalidURL: a CONNECT target the codec cannot parse (no port, a port
	// above 65535, a '_' in the name): the egress listener's target refusal.
	invalidURL = "response.code_details == 'http1.invalid_url'"
	// upgradeFailed: an Upgrade of a token the listener has no
	// upgrade_configs entry for (anything but websocket; h2c the codec
	// drops before): the engine's upgrade refusal, 400, not Envoy's 403.
	upgradeFailed = "response.code_details == 'upgrade_failed'"
	// tunnelFailed: a tunnel that never came up (one that did was
	// answered 200, whatever ended it).
	tunnelFailed = "xds.route_name == '" + RouteTunnel + "' && response.code >= 500"
)

// strictTarget makes an intercept or control listener's codec hand an
// absolute-form request target to the connection manager as it was sent,
// which refuses it (absolute_path_rejected) for the mappers to answer as
// the engine does. Parsed, the codec would keep only its path and drop the
// userinfo: "GET https://user:<stand-in>@target/v1/x" would reach the
// engine as "/v1/x".
func strictTarget(m *hcmv3.HttpConnectionManager) {
	m.HttpProtocolOptions.AllowAbsoluteUrl = wrapperspb.Bool(false)
}

// interceptCodecReplies answer what Envoy refuses before the engine on an
// intercept listener as the engine does: a fragment is rule 5's 400 (the
// absolute-form target's mapper is interceptReplies'), and a CONNECT
// whose target the codec cannot parse (the only URL it parses there) is
// rule 1's 405 (any other CONNECT reaches the engine: connectInside).
func (b *builder) interceptCodecReplies() []*hcmv3.ResponseMapper {
	return []*hcmv3.ResponseMapper{
		mapper(b.celFilter(fragmentRejected), 400, "jr2 custodian: "+filter.FragmentText, nil),
		mapper(b.celFilter(invalidURL), 405, "jr2 custodian: "+connectNotAllowed, nil),
		mapper(b.celFilter(upgradeFailed), 400, "jr2 custodian: "+filter.UpgradeText, nil),
	}
}

// connectNotAllowed is rule 1's text for CONNECT.
const connectNotAllowed = "method CONNECT is not allowed; use GET, HEAD, POST, PUT, PATCH, DELETE or OPTIONS"

// interceptCodecLogs are the lines of the refusals Envoy makes before the
// engine on an intercept listener: an absolute-form target and a fragment
// (rule 5), an unparsable CONNECT (rule 1), an upgrade to another
// protocol than websocket. The target is the connection's (filter state),
// the bound target the egress listener decided, never what the agent
// wrote.
func (b *builder) interceptCodecLogs() []*accesslogv3.AccessLog {
	line := func(reason string) string {
		return "jr2.custodian action=refuse target=" + connectionTarget + " reason=" + reason + "\n"
	}
	return []*accesslogv3.AccessLog{
		b.stdoutLog(line(filter.ReasonPath), b.endedWith(absolutePath)),
		b.stdoutLog(line(filter.ReasonPath), b.endedWith(fragmentRejected)),
		b.stdoutLog(line(filter.ReasonMethod), b.endedWith(invalidURL)),
		b.stdoutLog(line(filter.ReasonUpgrade), b.endedWith(upgradeFailed)),
	}
}

// controlCodecReplies are the control listener's answers to the same
// refusals: no route (404), as the engine answers such a target there,
// and its upgrade refusal (400) to an upgrade of another protocol than
// websocket.
func (b *builder) controlCodecReplies() []*hcmv3.ResponseMapper {
	return []*hcmv3.ResponseMapper{
		mapper(b.celFilter(absolutePath), 404, "jr2 custodian: "+controlNotRouteText, nil),
		mapper(b.celFilter(fragmentRejected), 404, "jr2 custodian: "+controlNotRouteText, nil),
		mapper(b.celFilter(upgradeFailed), 400, "jr2 custodian: "+filter.ControlUpgradeText, nil),
	}
}

// controlNotRouteText is the engine's 404 of the control listener.
const controlNotRouteText = "not a route of the control listener; it serves GET /agents/{id}/surface, POST /agents/{id}/events, GET /agents/{id}/deliveries/{d} and POST /fetch"

// controlCodecLogs are the lines of the control listener's refusals
// before the engine.
func (b *builder) controlCodecLogs(orchestrator string) []*accesslogv3.AccessLog {
	line := func(reason string) string {
		return "jr2.custodian action=refuse target=" + orchestrator + " reason=" + reason + "\n"
	}
	return []*accesslogv3.AccessLog{
		b.stdoutLog(line(filter.ReasonRoute), b.endedWith(absolutePath)),
		b.stdoutLog(line(filter.ReasonRoute), b.endedWith(fragmentRejected)),
		b.stdoutLog(line(filter.ReasonUpgrade), b.endedWith(upgradeFailed)),
	}
}

// egressCodecLogs: a CONNECT target Envoy's codec cannot parse is the
// engine's target refusal, logged without the target (the codec kept
// none, and it is the agent's); a tunnel whose far end could not be
// reached (any of Envoy's upstream failure flags) is the engine's
// unreachable line, its target logged as the tunnel lines log it.
func (b *builder) egressCodecLogs() []*accesslogv3.AccessLog {
	logs := []*accesslogv3.AccessLog{
		b.stdoutLog("jr2.custodian action=refuse target=- reason="+filter.ReasonTarget+"\n", b.endedWith(invalidURL)),
	}
	all := append(append([]string(nil), NotSentFlags...), MaySentFlags...)
	for _, standIn := range []bool{false, true} {
		target := tunnelTarget
		if standIn {
			target = "[stand-in]"
		}
		logs = append(logs, b.stdoutLog("jr2.custodian action=refuse target="+target+" reason="+filter.ReasonUnreached+"\n",
			andFilter(endLog(), b.celFilter(tunnelFailed), flagFilter(all), standInFilter(standIn))))
	}
	return logs
}

// endedWith matches a stream's last log (DownstreamEnd) when expr holds.
// Each expr names a refusal of Envoy's codec, whose answer is 400 or
// above: the status is compared first, so a request that went upstream
// and was answered below 400 (most of them) costs no CEL evaluation (an
// and_filter stops at its first false).
func (b *builder) endedWith(expr string) *accesslogv3.AccessLogFilter {
	return andFilter(endLog(), refusedStatus(), b.celFilter(expr))
}

// refusedStatus matches a response status of 400 or above.
func refusedStatus() *accesslogv3.AccessLogFilter {
	return &accesslogv3.AccessLogFilter{FilterSpecifier: &accesslogv3.AccessLogFilter_StatusCodeFilter{StatusCodeFilter: &accesslogv3.StatusCodeFilter{
		Comparison: &accesslogv3.ComparisonFilter{
			Op:    accesslogv3.ComparisonFilter_GE,
			Value: &corev3.RuntimeUInt32{DefaultValue: 400, RuntimeKey: "jr2.custodian.refused_status"},
		},
	}}}
}

func endLog() *accesslogv3.AccessLogFilter {
	return &accesslogv3.AccessLogFilter{FilterSpecifier: &accesslogv3.AccessLogFilter_LogTypeFilter{LogTypeFilter: &accesslogv3.LogTypeFilter{
		Types: []accesslogdatav3.AccessLogType{accesslogdatav3.AccessLogType_DownstreamEnd},
	}}}
}

func andFilter(fs ...*accesslogv3.AccessLogFilter) *accesslogv3.AccessLogFilter {
	return &accesslogv3.AccessLogFilter{FilterSpecifier: &accesslogv3.AccessLogFilter_AndFilter{AndFilter: &accesslogv3.AndFilter{Filters: fs}}}
}

// RouteConnectInside names an intercept listener's one route for a
// CONNECT inside the intercepted TLS.
const RouteConnectInside = "intercept|connect"

// connectInside is an intercept listener's one route for a CONNECT inside
// the intercepted TLS, whatever its target: it matches any connection the
// egress listener gave a target (TargetFilterState), as the targets' own
// routes together do, and carries no engine config of its own, so the
// engine decides it with the virtual host's for the connection's target:
// rule 1's 405, its answer and its line, as in every host. The direct
// response behind it is never reached by a decided CONNECT and forwards
// nothing (one it did reach would be refused by the mark's RBAC first).
// Without a CONNECT route the request matched none and the engine
// answered 500 for want of its config.
func (b *builder) connectInside() *routev3.Route {
	m := &routev3.RouteMatch{
		PathSpecifier: &routev3.RouteMatch_ConnectMatcher_{ConnectMatcher: &routev3.RouteMatch_ConnectMatcher{}},
		FilterState: []*matcherv3.FilterStateMatcher{{Key: TargetFilterState, Matcher: &matcherv3.FilterStateMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{
			MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: ".+"}},
		}}}},
	}
	return directRoute(RouteConnectInside, m, 405, "jr2 custodian: "+connectNotAllowed)
}
