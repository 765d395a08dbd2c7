// Package dialguard is the dial guard of the Custodian's tunnels: one list
// of address ranges a tunnel never reaches (Ranges), a reader of every
// spelling a CONNECT target can use for an address (Judge), and the check
// of the address actually dialled (Guarded). docs/custodian.md ("The dial
// guard") lists the ranges.
//
// Invariant: Ranges is the only list. The Envoy config's RBAC ranges are
// rendered from it (controlplane), the Go host and the contained run check
// against it, and a test keeps it sorted and free of duplicates. The guard
// has two halves: a target that spells a guarded address, or names
// localhost, is refused before anything is resolved (Judge); a name that
// resolves to one is refused on the address the host dials (Guarded) — the
// Go host checks it in net.Dialer.Control, after resolution, so a
// rebinding cannot pass; Envoy's RBAC checks the address the dynamic
// forward proxy saved from its DNS cache entry.
//
// Not covered: private ranges (10/8, 172.16/12, 192.168/16, fc00::/7 other
// than the AWS metadata address) are reachable on purpose — an in-cluster
// gateway is a legitimate target. In Envoy the saved address is only the
// DNS entry's first address (review, not exercised here: no Envoy binary):
// the dynamic forward proxy's host carries every address the name resolved
// to and happy eyeballs tries the next one when the first fails or is slow
// (300 ms), so a name that resolves to a blackholed public address and then
// a guarded one may reach the guarded one; a DNS refresh between the filter
// and the dial can also swap the address. The Go host has neither gap
// (each dialled address is checked).
package dialguard

import (
	"net/netip"
	"strings"
)

// Range is one guarded prefix and why it is guarded.
type Range struct {
	Prefix netip.Prefix
	Why    string
}

// v4 are the guarded IPv4 ranges; each is also guarded in its IPv4-mapped,
// NAT64 and 6to4 IPv6 forms (see Ranges).
var v4 = []Range{
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified (this network)"},
	{netip.MustParsePrefix("100.100.100.200/32"), "Alibaba Cloud metadata"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("168.63.129.16/32"), "Azure metadata and wire server"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local (the cloud metadata address 169.254.169.254 included)"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("255.255.255.255/32"), "limited broadcast"},
}

// v6 are the guarded native IPv6 ranges, and the IPv6 ranges guarded
// whole because they carry an IPv4 address to a translator or tunnel: what
// such an address reaches is the IPv4 address's, and no IPv4 address
// reached that way is legitimate enough to read it (see the package doc).
var v6 = []Range{
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("::/96"), "IPv4-compatible (deprecated, RFC 4291; a SIT tunnel sends it to the IPv4 address it carries)"},
	{netip.MustParsePrefix("::ffff:0:0:0/96"), "IPv4-translated (SIIT, RFC 2765; a translator sends it to the IPv4 address it carries)"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "local-use NAT64 (RFC 8215; a local translator sends it to an IPv4 address it embeds at a length the guard cannot know)"},
	{netip.MustParsePrefix("fd00:ec2::254/128"), "AWS metadata (IPv6)"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
}

// Embeddings of an IPv4 address in IPv6 through which a dial can reach it.
var embeddings = []struct {
	base netip.Prefix // a /96 (the v4 address fills the last 32 bits) or 2002::/16 (bits 16–47)
	why  string
}{
	{netip.MustParsePrefix("::ffff:0:0/96"), "IPv4-mapped"},
	{netip.MustParsePrefix("64:ff9b::/96"), "NAT64 (well-known prefix)"},
	{netip.MustParsePrefix("2002::/16"), "6to4"},
}

// Ranges is the one list of guarded prefixes: the IPv4 ranges, the native
// IPv6 ranges, and each IPv4 range in its IPv4-mapped, NAT64 and 6to4 forms.
// Its order is fixed (IPv4 sorted, then IPv6 sorted), so what is rendered
// from it is deterministic.
//
// Each guarded IPv4 range is guarded in its IPv4-mapped (::ffff:0:0/96),
// well-known NAT64 (64:ff9b::/96) and 6to4 (2002::/16) forms, so a public
// IPv4 address stays reachable through them. Three prefixes are guarded
// whole: IPv4-compatible ::/96 (deprecated; no legitimate peer has such an
// address), IPv4-translated ::ffff:0:0:0/96 (SIIT; likewise) and local-use
// NAT64 64:ff9b:1::/48, whose translators embed the IPv4 address at an
// operator-chosen prefix length (RFC 6052: /48 to /96, the bits 64–71
// skipped), so no finite list of its sub-prefixes spells "a guarded IPv4
// address". Public IPv4 through a local NAT64 is the price; the well-known
// prefix still reaches it.
var Ranges = buildRanges()

func buildRanges() []Range {
	out := append([]Range(nil), v4...)
	var six []Range
	six = append(six, v6...)
	for _, e := range embeddings {
		for _, r := range v4 {
			six = append(six, Range{embed(e.base, r.Prefix), e.why + " form of " + r.Why})
		}
	}
	sortRanges(six)
	return append(out, six...)
}

// embed places the IPv4 prefix p inside the IPv6 embedding base.
func embed(base, p netip.Prefix) netip.Prefix {
	a := base.Addr().As16()
	v := p.Addr().As4()
	if base.Bits() == 16 { // 6to4: 2002:VVVV:VVVV::/48
		copy(a[2:6], v[:])
		return netip.PrefixFrom(netip.AddrFrom16(a), 16+p.Bits())
	}
	copy(a[12:16], v[:])
	return netip.PrefixFrom(netip.AddrFrom16(a), 96+p.Bits())
}

func sortRanges(rs []Range) {
	// insertion sort: the list is short and built once.
	for i := 1; i < len(rs); i++ {
		for j := i; j > 0 && less(rs[j].Prefix, rs[j-1].Prefix); j-- {
			rs[j], rs[j-1] = rs[j-1], rs[j]
		}
	}
}

func less(a, b netip.Prefix) bool {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c < 0
	}
	return a.Bits() < b.Bits()
}

// Guarded reports whether a is in a guarded range, and the reason of the
// most specific range that holds it (::1 is loopback, though ::/96 holds
// it too). An IPv4-mapped IPv6 address is judged as itself (its mapped form
// is in the list) and as the IPv4 address it carries.
func Guarded(a netip.Addr) (bool, string) {
	a = a.WithZone("")
	best := -1
	for i, r := range Ranges {
		if r.Prefix.Contains(a) && (best < 0 || r.Prefix.Bits() > Ranges[best].Prefix.Bits()) {
			best = i
		}
	}
	if best >= 0 {
		return true, Ranges[best].Why
	}
	if a.Is4In6() {
		return Guarded(a.Unmap())
	}
	return false, ""
}

// SpelledHost is the verdict on a CONNECT target's host before anything is
// resolved.
type SpelledHost struct {
	Addr    netip.Addr // valid when the host spells an address
	IsAddr  bool
	Guarded bool   // the host spells a guarded address or a localhost name
	Why     string // why it is guarded
}

// Judge decides a host as spelled (lowercase, without brackets or a trailing
// dot). Every IPv4 spelling inet_aton accepts is read as the address it
// spells; an IPv6 literal with a zone is refused as guarded (a zone names a
// local interface).
func Judge(host string) SpelledHost {
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return SpelledHost{Guarded: true, Why: "a localhost name"}
	}
	if a, ok := ParseIPv4Spelling(h); ok {
		g, why := Guarded(a)
		return SpelledHost{Addr: a, IsAddr: true, Guarded: g, Why: why}
	}
	if strings.Contains(h, ":") {
		if strings.Contains(h, "%") {
			return SpelledHost{IsAddr: true, Guarded: true, Why: "an IPv6 address with a zone"}
		}
		if a, err := netip.ParseAddr(h); err == nil {
			g, why := Guarded(a)
			return SpelledHost{Addr: a, IsAddr: true, Guarded: g, Why: why}
		}
	}
	return SpelledHost{}
}

// ParseIPv4Spelling reads s as inet_aton(3) does: one to four parts split by
// '.', each decimal, octal (leading 0) or hex (leading 0x), the last part
// filling the remaining bytes (a.b.c.d, a.b.c16, a.b24, a32).
func ParseIPv4Spelling(s string) (netip.Addr, bool) {
	if s == "" || len(s) > 64 {
		return netip.Addr{}, false
	}
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	vals := make([]uint64, len(parts))
	for i, p := range parts {
		v, ok := parseAtonPart(p)
		if !ok {
			return netip.Addr{}, false
		}
		vals[i] = v
	}
	var n uint64
	last := len(vals) - 1
	for i := 0; i < last; i++ {
		if vals[i] > 0xff {
			return netip.Addr{}, false
		}
		n |= vals[i] << (8 * (3 - i))
	}
	rest := uint(8 * (4 - last))
	if vals[last] >= 1<<rest {
		return netip.Addr{}, false
	}
	n |= vals[last]
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), true
}

func parseAtonPart(p string) (uint64, bool) {
	if p == "" {
		return 0, false
	}
	base := uint64(10)
	switch {
	case len(p) > 1 && (p[:2] == "0x" || p[:2] == "0X"):
		base, p = 16, p[2:]
		if p == "" { // "0x" alone is 0 to inet_aton
			return 0, true
		}
	case len(p) > 1 && p[0] == '0':
		base, p = 8, p[1:]
	}
	var v uint64
	for i := 0; i < len(p); i++ {
		d, ok := digit(p[i])
		if !ok || d >= base {
			return 0, false
		}
		v = v*base + d
		if v > 0xffffffff {
			return 0, false
		}
	}
	return v, true
}

func digit(c byte) (uint64, bool) {
	switch {
	case c >= '0' && c <= '9':
		return uint64(c - '0'), true
	case c >= 'a' && c <= 'f':
		return uint64(c-'a') + 10, true
	case c >= 'A' && c <= 'F':
		return uint64(c-'A') + 10, true
	}
	return 0, false
}
