package bootstrap

import (
	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"jr2.dev/boundary/filter"
)

// The answers the Custodian makes when a target gives none (ADR-0059). One
// reply can carry several response flags and Envoy uses the first mapper
// that matches, so the flags that mean "nothing was sent" come first.
var (
	// NotSentFlags: the connection failed, no healthy host, DNS failed —
	// Envoy sent nothing.
	NotSentFlags = []string{"UF", "UH", "DF"}
	// MaySentFlags: these can come after the request went to the target.
	// URX and UMSDR are unset on routes without a retry policy or a
	// max_stream_duration; they are listed so the union equals the
	// Orchestrator route's list.
	MaySentFlags = []string{"UC", "DPE", "UPE", "UR", "LR", "UMSDR", "URX"}
)

// ReasonOperator is the command operator that ends each answer: Envoy's
// response code details, e.g. upstream_reset_before_response_started{
// connection_failure}, which also carries a TLS verification failure.
const ReasonOperator = "%RESPONSE_CODE_DETAILS%"

// Headers the control listener's answers add for the Harness, which reads
// them to decide whether a pick may be sent again.
const (
	HeaderUnreachable      = "x-jr2-custodian"
	HeaderUnreachableValue = "unreachable"
	HeaderFlags            = "x-jr2-custodian-flags"
)

// NotSentText is the first answer: nothing was sent.
func NotSentText(target string) string {
	return "jr2 custodian: " + target + " could not be reached: " + ReasonOperator
}

// MaySentText is the second answer: the request may have reached the target.
func MaySentText(target string) string {
	return "jr2 custodian: " + target + " did not answer; the request may have reached it: " + ReasonOperator
}

// tunnelTarget is the CONNECT target as the agent wrote it, cut at 256
// bytes.
const tunnelTarget = "%REQ(:AUTHORITY):256%"

// Refusals by the two RBAC filters, told apart by the policy their
// response code details name: the mark's ALLOW policy matched nothing
// ([none]); the dial guard's DENY policy matched ([guard]).
const (
	markDenied  = "response.code_details == 'rbac_access_denied_matched_policy[none]'"
	guardDenied = "response.code_details == 'rbac_access_denied_matched_policy[" + GuardPolicy + "]'"
)

// Texts of the two RBAC refusals (Envoy's own is "RBAC: access denied").
const (
	MarkDeniedText  = "jr2 custodian: refused: the Custodian's filter did not decide this request (is its plugin loaded?)"
	GuardDeniedText = "jr2 custodian: " + tunnelTarget + " is guarded (it resolves to a guarded address); a tunnel never reaches it"
)

// boundReplies: the mark's refusal, then two mappers, the first text for
// the not-sent flags, the second for the rest.
func (b *builder) boundReplies(target string, headers ...*corev3.HeaderValueOption) *hcmv3.LocalReplyConfig {
	return &hcmv3.LocalReplyConfig{Mappers: []*hcmv3.ResponseMapper{
		b.markReply(),
		mapper(flagFilter(NotSentFlags), 502, NotSentText(target), headers),
		mapper(flagFilter(MaySentFlags), 502, MaySentText(target), headers),
	}}
}

// absolutePath is Envoy's own refusal of a request target that is not a
// path (OPTIONS *, an absolute URI): the connection manager answers it 404
// before any filter runs, so the engine never sees it.
const absolutePath = "response.code_details == 'absolute_path_rejected'"

// interceptReplies: a bound target's replies, with Envoy's own refusal of
// a target that is not a path answered as the engine answers it (rule 5's
// 400), as custodian serve does.
func (b *builder) interceptReplies(target string) *hcmv3.LocalReplyConfig {
	r := b.boundReplies(target)
	r.Mappers = append(append([]*hcmv3.ResponseMapper{
		mapper(b.celFilter(absolutePath), 400, "jr2 custodian: "+filter.NotAPathText, nil),
	}, b.interceptCodecReplies()...), r.Mappers...)
	return r
}

// tunnelReplies: the mark's and the guard's refusals, then one mapper for
// every flag with the first text. Envoy answers a CONNECT 200 only once its
// connection to the target is up and sends no byte of the agent's before
// that, so a 502 here always means nothing was sent.
func (b *builder) tunnelReplies() *hcmv3.LocalReplyConfig {
	all := append(append([]string(nil), NotSentFlags...), MaySentFlags...)
	return &hcmv3.LocalReplyConfig{Mappers: []*hcmv3.ResponseMapper{
		b.markReply(),
		mapper(b.celFilter(guardDenied), 0, GuardDeniedText, nil),
		mapper(flagFilter(all), 502, NotSentText(tunnelTarget), nil),
	}}
}

// controlReplies: the Orchestrator route's answers, each also carrying
// x-jr2-custodian: unreachable and the flags.
func (b *builder) controlReplies(orchestrator string) *hcmv3.LocalReplyConfig {
	r := b.boundReplies(orchestrator,
		setHeader(HeaderUnreachable, HeaderUnreachableValue),
		setHeader(HeaderFlags, "%RESPONSE_FLAGS%"))
	r.Mappers = append(b.controlCodecReplies(), r.Mappers...)
	return r
}

// markReply names the Custodian in the mark's refusal; its status (403)
// stays.
func (b *builder) markReply() *hcmv3.ResponseMapper {
	return mapper(b.celFilter(markDenied), 0, MarkDeniedText, nil)
}

func flagFilter(flags []string) *accesslogv3.AccessLogFilter {
	return &accesslogv3.AccessLogFilter{FilterSpecifier: &accesslogv3.AccessLogFilter_ResponseFlagFilter{
		ResponseFlagFilter: &accesslogv3.ResponseFlagFilter{Flags: flags},
	}}
}

// mapper answers text (and status, when not 0) for a local reply f matches.
func mapper(f *accesslogv3.AccessLogFilter, status uint32, text string, headers []*corev3.HeaderValueOption) *hcmv3.ResponseMapper {
	m := &hcmv3.ResponseMapper{
		Filter: f,
		BodyFormatOverride: &corev3.SubstitutionFormatString{
			Format:      &corev3.SubstitutionFormatString_TextFormatSource{TextFormatSource: inline(text)},
			ContentType: "text/plain; charset=utf-8",
		},
		HeadersToAdd: headers,
	}
	if status != 0 {
		m.StatusCode = wrapperspb.UInt32(status)
	}
	return m
}

func setHeader(name, value string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{
		Header:       &corev3.HeaderValue{Key: name, Value: value},
		AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
	}
}

func inline(s string) *corev3.DataSource {
	return &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: s}}
}
