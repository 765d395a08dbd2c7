package mode

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// Volatile are the request headers a canonical form leaves out: they
// change between two runs of the same command without changing what the
// request asks for, or the url or the body already carries them. In
// groups (docs/modes.md says why each):
//
//   - the url's and the framing's: host, content-length,
//     transfer-encoding, connection, keep-alive, proxy-connection, te,
//     trailer, upgrade, expect;
//   - the clock's: date, x-amz-date; the body's digest: x-amz-content-sha256;
//   - a trace or request id drawn fresh per call: traceparent, tracestate,
//     baggage, sentry-trace, b3 and x-b3-traceid, -spanid, -parentspanid,
//     -sampled and -flags, x-cloud-trace-context,
//     x-amzn-trace-id, x-datadog-trace-id, x-datadog-parent-id,
//     x-request-id, x-correlation-id, x-ms-client-request-id,
//     amz-sdk-invocation-id, amz-sdk-request;
//   - an idempotency key an SDK draws per write: idempotency-key.
//
// Every other header identifies the request, so a replay matches what the
// client really sent: user-agent among them (the same client sends the same
// one, and a changed client is named by headers.user-agent), and every
// header that carries a stand-in (authorization, x-amz-security-token,
// cookie), since a stand-in is the same in every run.
var Volatile = []string{
	"host", "content-length", "transfer-encoding", "connection", "keep-alive", "proxy-connection",
	"te", "trailer", "upgrade", "expect", "date", "x-amz-date", "x-amz-content-sha256",
	"traceparent", "tracestate", "baggage", "sentry-trace", "b3", "x-b3-traceid", "x-b3-spanid",
	"x-b3-parentspanid", "x-b3-sampled", "x-b3-flags", "x-cloud-trace-context", "x-amzn-trace-id",
	"x-datadog-trace-id", "x-datadog-parent-id", "x-request-id", "x-correlation-id",
	"x-ms-client-request-id", "amz-sdk-invocation-id", "amz-sdk-request", "idempotency-key",
}

// Canon returns the canonical form of a request: method, its absolute url
// (scheme://host[:port]/path?query), its headers as [name, value] pairs
// (values as the agent sent them: stand-ins, or labels) and the body as
// recorded (nil for none; an empty body is none).
func Canon(method, rawURL string, header [][2]string, body []byte) (Effect, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Effect{}, fmt.Errorf("mode: the request's url is not an absolute http or https url")
	}
	e := Effect{Method: method, Scheme: u.Scheme, Host: strings.ToLower(u.Hostname()), Path: u.EscapedPath(), Query: u.RawQuery}
	if e.Path == "" {
		e.Path = "/"
	}
	switch p := u.Port(); {
	case p != "":
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return Effect{}, fmt.Errorf("mode: the request's url has no valid port")
		}
		e.Port = n
	case u.Scheme == "https":
		e.Port = 443
	default:
		e.Port = 80
	}
	for _, h := range header {
		name := strings.ToLower(h[0])
		if isVolatile(name) {
			continue
		}
		e.Header = append(e.Header, [2]string{name, h[1]})
	}
	sort.SliceStable(e.Header, func(i, j int) bool { return e.Header[i][0] < e.Header[j][0] })
	if len(body) > 0 {
		sum := sha256.Sum256(body)
		e.Body, e.Length = hex.EncodeToString(sum[:]), int64(len(body))
	}
	return e, nil
}

// volatile is Volatile as a set.
var volatile = func() map[string]bool {
	m := make(map[string]bool, len(Volatile))
	for _, v := range Volatile {
		m[v] = true
	}
	return m
}()

func isVolatile(name string) bool { return volatile[name] }

// key is Key's rendering: JSON of the form, whose members are in a fixed
// order and whose strings are quoted, so two forms share a key only when
// every field is equal.
func (e Effect) key() string {
	b, _ := json.Marshal(e)
	return string(b)
}

// differs names the first field, in the order method, host, port, path,
// query, headers.<name>, body, in which e and o differ; "" when none.
func (e Effect) differs(o Effect) string {
	switch {
	case e.Method != o.Method:
		return "method"
	case e.Scheme != o.Scheme || e.Host != o.Host:
		return "host"
	case e.Port != o.Port:
		return "port"
	case e.Path != o.Path:
		return "path"
	case e.Query != o.Query:
		return "query"
	}
	if name := headerDiff(e.Header, o.Header); name != "" {
		return "headers." + name
	}
	if e.Body != o.Body || e.Length != o.Length {
		return "body"
	}
	return ""
}

// likeness counts the fields e and o share, headers one by one: the
// nearest recorded request is the one that shares the most.
func (e Effect) likeness(o Effect) int {
	n := 0
	for _, eq := range []bool{e.Method == o.Method, e.Scheme == o.Scheme && e.Host == o.Host, e.Port == o.Port,
		e.Path == o.Path, e.Query == o.Query, e.Body == o.Body && e.Length == o.Length} {
		if eq {
			n += 2 // a field of the request line outweighs one header
		}
	}
	for _, name := range headerNames(e.Header, o.Header) {
		if headerValues(e.Header, name) == headerValues(o.Header, name) {
			n++
		}
	}
	return n
}

func headerNames(a, b [][2]string) []string {
	seen := map[string]bool{}
	var names []string
	for _, h := range append(append([][2]string(nil), a...), b...) {
		if !seen[h[0]] {
			seen[h[0]] = true
			names = append(names, h[0])
		}
	}
	sort.Strings(names)
	return names
}

func headerValues(h [][2]string, name string) string {
	var vs []string
	for _, p := range h {
		if p[0] == name {
			vs = append(vs, strconv.Quote(p[1]))
		}
	}
	return strings.Join(vs, ",")
}

// headerDiff is the first header name, in sorted order, whose values
// differ between a and b (missing on one side included).
func headerDiff(a, b [][2]string) string {
	for _, name := range headerNames(a, b) {
		if headerValues(a, name) != headerValues(b, name) {
			return name
		}
	}
	return ""
}
