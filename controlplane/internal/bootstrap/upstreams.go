package bootstrap

import (
	"bytes"
	"errors"
	"net"
	"strconv"
	"strings"

	"jr2.dev/boundary/controlplane/internal/pki"
)

// The upstream clusters of a build, written from one template. Each bound
// target named by a DNS name has a cluster that differs from any other's
// only by its target, host and port (upstreamCluster): at 400 targets they
// are ~60 % of envoy.json, and building, packing and marshalling each was
// a third of the file's time. A lean build (build with lean set) leaves
// them out of the bootstrap; the cluster of a placeholder target is built and
// marshalled instead, and each target's JSON is that text with the
// target, host and port in the placeholder's places. The template is held
// to its own build at every render: the cluster of a second placeholder,
// built and marshalled, must be the first's text filled for it, else the
// build is not lean and every cluster is built (so a field derived from
// the target in another form, added to upstreamCluster, makes render
// build every cluster again, not write a wrong one). MarshalMounted is
// Marshal(Build(in)) either way (TestMarshalMountedIsBuild), and a lean
// build's bytes are Build's (TestLeanBuildIsBuild).

// The placeholders' hosts and ports: names no target may take
// (.invalid, RFC 6761), ports whose digits the template looks for only in
// port_value.
var upstreamPlaceholders = [2]upstreamFill{
	{target: "jr2-upstream-a.invalid:64001", host: "jr2-upstream-a.invalid", port: "64001"},
	{target: "jr2-upstream-b.invalid:64002", host: "jr2-upstream-b.invalid", port: "64002"},
}

// upstreamFill is what one upstream cluster's JSON is filled with.
type upstreamFill struct{ target, host, port string }

// upstreamFillOf is target's fill when its cluster may be written from
// the template: a DNS name (its SAN, SNI and dialled host all the same
// bytes) of the characters both JSON encoders write as they are, at most
// 253 of them (under the SNI's 255-byte rule, which the template's build
// checked for the placeholder only), and a port spelled as its number is.
func upstreamFillOf(target string) (upstreamFill, bool) {
	host, port, err := net.SplitHostPort(target)
	if err != nil || host == "" || len(host) > 253 || target != host+":"+port {
		return upstreamFill{}, false
	}
	if n, err := strconv.Atoi(port); err != nil || strconv.Itoa(n) != port || n < 1 || n > 65535 {
		return upstreamFill{}, false
	}
	if name, ip, err := pki.SAN(target); err != nil || ip || name != host {
		return upstreamFill{}, false
	}
	for i := 0; i < len(host); i++ {
		c := host[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			return upstreamFill{}, false
		}
	}
	for _, p := range upstreamPlaceholders {
		if strings.Contains(host, p.host) {
			return upstreamFill{}, false
		}
	}
	return upstreamFill{target: target, host: host, port: port}, true
}

// upstreamTemplate is an upstream cluster's JSON cut at each place of the
// placeholder's target, its port_value and its host: text[0], hole[0],
// text[1], …, text[len(hole)].
type upstreamTemplate struct {
	text [][]byte
	hole []int // holeTarget, holePort or holeHost
}

const (
	holeTarget = iota
	holePort
	holeHost
)

// parseUpstream cuts js, the placeholder p's cluster, into a template.
func parseUpstream(js []byte, p upstreamFill) upstreamTemplate {
	forms := [...][]byte{
		holeTarget: []byte(p.target),
		holePort:   []byte(`"port_value":` + p.port),
		holeHost:   []byte(p.host),
	}
	var t upstreamTemplate
	for {
		at, hole := -1, 0
		for h, f := range forms { // the target before its host, where both begin
			if i := bytes.Index(js, f); i >= 0 && (at < 0 || i < at) {
				at, hole = i, h
			}
		}
		if at < 0 {
			t.text = append(t.text, js)
			return t
		}
		t.text = append(t.text, js[:at])
		t.hole = append(t.hole, hole)
		js = js[at+len(forms[hole]):]
	}
}

// fill is the template's JSON for f.
func (t upstreamTemplate) fill(f upstreamFill) []byte {
	n := 0
	for _, s := range t.text {
		n += len(s)
	}
	out := make([]byte, 0, n+len(t.hole)*(len(f.target)+len(`"port_value":`)))
	for i, h := range t.hole {
		out = append(out, t.text[i]...)
		switch h {
		case holeTarget:
			out = append(out, f.target...)
		case holePort:
			out = append(out, `"port_value":`...)
			out = append(out, f.port...)
		case holeHost:
			out = append(out, f.host...)
		}
	}
	return append(out, t.text[len(t.hole)]...)
}

// leftOut is what a lean build left out of its clusters: the JSON of
// each, and its index among all of them.
type leftOut struct {
	at   []int
	json [][]byte
}

// merge puts the left-out clusters' JSON among the built ones' (parts, in
// order) at their places.
func (lo *leftOut) merge(parts [][]byte) [][]byte {
	all := make([][]byte, 0, len(parts)+len(lo.at))
	next := 0
	for len(all) < cap(all) {
		if next < len(lo.at) && lo.at[next] == len(all) {
			all = append(all, lo.json[next])
			next++
			continue
		}
		all = append(all, parts[0])
		parts = parts[1:]
	}
	return all
}

// errNotLean: a lean bootstrap cannot be marshalled in parts; it is built
// whole instead.
var errNotLean = errors.New("bootstrap: a lean build marshalled whole")

// marshalBuild is Marshal(Build(in)): lean where the template holds.
func marshalBuild(in Input) ([]byte, error) {
	bs, lo, err := build(in, true)
	if err != nil {
		return nil, err
	}
	if lo != nil {
		js, err := marshal(bs, lo)
		if !errors.Is(err, errNotLean) {
			return js, err
		}
		if bs, _, err = build(in, false); err != nil {
			return nil, err
		}
	}
	return Marshal(bs)
}

// upstreamTemplate is the template of b's upstream clusters, if it holds:
// the first placeholder's cluster, cut, filled for the second is the
// second's own.
func (b *builder) upstreamTemplate() (upstreamTemplate, bool) {
	var js [2][]byte
	for i, p := range upstreamPlaceholders {
		c := b.upstreamCluster(p.target)
		if b.err != nil || c.ValidateAll() != nil {
			return upstreamTemplate{}, false
		}
		raw, err := protojsonOptions.Marshal(c)
		if err != nil {
			return upstreamTemplate{}, false
		}
		js[i] = compact(make([]byte, 0, len(raw)), raw)
	}
	t := parseUpstream(js[0], upstreamPlaceholders[0])
	return t, bytes.Equal(t.fill(upstreamPlaceholders[1]), js[1])
}

// leave is whether the upstream cluster of target, at index at among all
// the clusters, is left out of b's bootstrap, its JSON the template's.
func (b *builder) leave(at int, target string) bool {
	if b.left == nil {
		return false
	}
	f, ok := upstreamFillOf(target)
	if !ok {
		return false
	}
	b.left.at = append(b.left.at, at)
	b.left.json = append(b.left.json, b.upstreams.fill(f))
	return true
}
