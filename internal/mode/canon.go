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
// request asks for (the framing, the connection, the clock, a trace id),
// or they are the host, which the url carries. Every other header
// identifies the request, so a replay matches what the client really
// sent.
var Volatile = []string{
	"host", "content-length", "transfer-encoding", "connection", "keep-alive", "proxy-connection",
	"te", "trailer", "upgrade", "expect", "date", "traceparent", "tracestate", "x-request-id",
	"x-amz-date", "x-amz-content-sha256",
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

func isVolatile(name string) bool {
	for _, v := range Volatile {
		if v == name {
			return true
		}
	}
	return false
}

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
