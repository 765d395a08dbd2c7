package dialguard

import (
	"net/netip"
	"strings"
	"testing"
)

func TestRangesOrderedAndUnique(t *testing.T) {
	seen := map[netip.Prefix]bool{}
	var prev4, prev6 netip.Prefix
	for i, r := range Ranges {
		if seen[r.Prefix] {
			t.Fatalf("Ranges[%d] %s is listed twice", i, r.Prefix)
		}
		seen[r.Prefix] = true
		if r.Prefix != r.Prefix.Masked() {
			t.Errorf("Ranges[%d] %s has host bits set", i, r.Prefix)
		}
		if r.Why == "" {
			t.Errorf("Ranges[%d] %s has no reason", i, r.Prefix)
		}
		prev := &prev6
		if r.Prefix.Addr().Is4() {
			prev = &prev4
			if prev6.IsValid() {
				t.Fatalf("Ranges[%d] %s: IPv4 after IPv6", i, r.Prefix)
			}
		}
		if prev.IsValid() && !less(*prev, r.Prefix) {
			t.Errorf("Ranges[%d] %s is not after %s", i, r.Prefix, *prev)
		}
		*prev = r.Prefix
	}
	// Each IPv4 range is present in each of its three IPv6 embeddings.
	for _, r := range v4 {
		for _, e := range embeddings {
			if !seen[embed(e.base, r.Prefix)] {
				t.Errorf("%s form of %s missing", e.why, r.Prefix)
			}
		}
	}
}

func TestEmbed(t *testing.T) {
	for _, c := range []struct{ base, v4, want string }{
		{"::ffff:0:0/96", "127.0.0.0/8", "::ffff:127.0.0.0/104"},
		{"64:ff9b::/96", "169.254.0.0/16", "64:ff9b::a9fe:0/112"},
		{"2002::/16", "127.0.0.0/8", "2002:7f00::/24"},
		{"2002::/16", "169.254.169.254/32", "2002:a9fe:a9fe::/48"},
	} {
		got := embed(netip.MustParsePrefix(c.base), netip.MustParsePrefix(c.v4))
		if got.String() != c.want {
			t.Errorf("embed(%s, %s) = %s, want %s", c.base, c.v4, got, c.want)
		}
	}
}

// Every spelling the spec lists, and more, is refused before resolution.
func TestJudgeRefusesEverySpelling(t *testing.T) {
	for _, host := range []string{
		// loopback, IPv4 spellings
		"127.0.0.1", "127.1", "127.0.1", "0x7f.0.0.1", "0x7f.1", "0X7F.0.0.1", "2130706433", "0x7f000001",
		"017700000001", "0177.0.0.1", "0177.1", "127.255.255.254", "127.0.0.1.",
		// unspecified, "this network"
		"0.0.0.0", "0", "0x0", "00", "0.1.2.3",
		// link-local and metadata
		"169.254.169.254", "0xa9fea9fe", "2852039166", "0251.0376.0251.0376", "169.254.1",
		// other clouds' metadata
		"100.100.100.200", "168.63.129.16", "0xa83f8110",
		// multicast, broadcast
		"224.0.0.1", "239.255.255.250", "255.255.255.255", "4294967295",
		// IPv6
		"::1", "::", "0:0:0:0:0:0:0:1", "fe80::1", "fe80::1%eth0", "ff02::1", "fd00:ec2::254",
		// IPv4-mapped, NAT64, 6to4 forms
		"::ffff:127.0.0.1", "::ffff:7f00:1", "::ffff:169.254.169.254", "64:ff9b::127.0.0.1",
		"64:ff9b::a9fe:a9fe", "2002:7f00:1::", "2002:a9fe:a9fe::1", "::ffff:0.0.0.0",
		// IPv4-compatible ::/96 (deprecated), whole: a SIT tunnel reaches the IPv4 address
		"::127.0.0.1", "::169.254.169.254", "::7f00:1", "::a9fe:a9fe", "0:0:0:0:0:0:127.0.0.1",
		"0000:0000:0000:0000:0000:0000:7f00:0001", "::0.0.0.2", "::8.8.8.8", "::ffff:ffff",
		// IPv4-translated (SIIT) ::ffff:0:0:0/96, whole
		"::ffff:0:127.0.0.1", "::ffff:0:7f00:1", "0:0:0:0:ffff:0:a9fe:a9fe", "::FFFF:0:169.254.169.254",
		"::ffff:0:8.8.8.8", "0:0:0:0:ffff:0:0:0",
		// local-use NAT64 64:ff9b:1::/48, whole, at every RFC 6052 length
		"64:ff9b:1::7f00:1", "64:ff9b:1::127.0.0.1", "64:ff9b:1:7f00:0:100::", "64:ff9b:1:ab::a9fe:a9fe",
		"64:ff9b:1:ab:cd:7f00:1::", "64:FF9B:0001:ffff:ffff:ffff:ffff:ffff", "64:ff9b:1::",
		// names
		"localhost", "LOCALHOST", "localhost.", "foo.localhost", "a.b.localhost.",
	} {
		v := Judge(host)
		if !v.Guarded || v.Why == "" {
			t.Errorf("Judge(%q) = %+v, want guarded with a reason", host, v)
		}
	}
}

func TestJudgeAllowsOrdinaryTargets(t *testing.T) {
	for _, host := range []string{
		"api.anthropic.com", "example.com", "1.1.1.1", "8.8.8.8", "93.184.216.34", "10.0.0.1", "192.168.1.1",
		"172.16.0.1", "2606:4700:4700::1111", "2001:db8::1", "localhost.example.com", "mylocalhost",
		"100.100.100.201", "168.63.129.17", "1.2.3.4.5", "0x7g.0.0.1", "127.0.0.256", "4294967296",
		"fd00:ec2::253", "64:ff9b::808:808", "2002:808:808::1",
		// next to the prefixes guarded whole
		"::1:0:0:1", "::fffe:7f00:1", "::ffff:1:7f00:1", "64:ff9b:2::7f00:1", "64:ff9b:0:1::7f00:1",
		"64:ff9a:ffff:ffff:ffff:ffff:ffff:ffff", "2001:db8::127.0.0.1",
	} {
		if v := Judge(host); v.Guarded {
			t.Errorf("Judge(%q) = %+v, want allowed", host, v)
		}
	}
}

func TestParseIPv4Spelling(t *testing.T) {
	for _, c := range []struct {
		in   string
		want string // "" = not an address
	}{
		{"127.0.0.1", "127.0.0.1"}, {"127.1", "127.0.0.1"}, {"127.0.1", "127.0.0.1"},
		{"0x7f.0.0.1", "127.0.0.1"}, {"0177.0.0.1", "127.0.0.1"}, {"2130706433", "127.0.0.1"},
		{"0x7f000001", "127.0.0.1"}, {"1.2.65535", "1.2.255.255"}, {"1.16777215", "1.255.255.255"},
		{"08.0.0.1", ""}, {"1.2.3.256", ""}, {"1.2.65536", ""}, {"", ""}, {"1..2", ""}, {"a.b.c.d", ""},
		{"1.2.3.4.5", ""}, {"0x", "0.0.0.0"}, {"4294967296", ""}, {"-1", ""}, {"1.2.3.4 ", ""},
	} {
		a, ok := ParseIPv4Spelling(c.in)
		got := ""
		if ok {
			got = a.String()
		}
		if got != c.want {
			t.Errorf("ParseIPv4Spelling(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// Guarded judges the address a host dials, and gives the reason of the most
// specific range that holds it.
func TestGuardedResolvedAddresses(t *testing.T) {
	for _, c := range []struct {
		addr    string
		guarded bool
		why     string // a prefix of the reason; "" = any
	}{
		{"127.0.0.1", true, "loopback"}, {"::1", true, "loopback"}, {"::", true, "unspecified"},
		{"::ffff:127.0.0.1", true, "IPv4-mapped form of loopback"}, {"169.254.169.254", true, "link-local"},
		{"fe80::1%eth0", true, "link-local"}, {"1.1.1.1", false, ""}, {"::ffff:1.1.1.1", false, ""}, {"10.1.2.3", false, ""},
		{"::127.0.0.1", true, "IPv4-compatible"}, {"::169.254.169.254", true, "IPv4-compatible"}, {"::2", true, "IPv4-compatible"},
		{"::ffff:0:127.0.0.1", true, "IPv4-translated (SIIT"}, {"::ffff:0:a9fe:a9fe", true, "IPv4-translated (SIIT"},
		{"64:ff9b:1::7f00:1", true, "local-use NAT64"}, {"64:ff9b:1:7f00:0:100::", true, "local-use NAT64"},
		{"64:ff9b::7f00:1", true, "NAT64 (well-known prefix) form of loopback"}, {"64:ff9b::101:101", false, ""},
		{"64:ff9b:2::7f00:1", false, ""},
	} {
		g, why := Guarded(netip.MustParseAddr(c.addr))
		if g != c.guarded || !strings.HasPrefix(why, c.why) {
			t.Errorf("Guarded(%s) = %v %q, want %v %q…", c.addr, g, why, c.guarded, c.why)
		}
	}
}

// The prefixes guarded whole are in the one list, as Envoy's RBAC gets it.
func TestRangesHoldTheTranslationPrefixes(t *testing.T) {
	for _, p := range []string{"::/96", "::ffff:0:0:0/96", "64:ff9b:1::/48"} {
		want := netip.MustParsePrefix(p)
		found := false
		for _, r := range Ranges {
			found = found || r.Prefix == want
		}
		if !found {
			t.Errorf("Ranges lacks %s", p)
		}
	}
}

// FuzzJudge: no panic, and a host that spells an address spells the address
// it reports (its canonical form judges the same).
func FuzzJudge(f *testing.F) {
	for _, s := range []string{"127.1", "0x7f.0.0.1", "2130706433", "::ffff:127.0.0.1", "fe80::1%lo", "localhost", "example.com", "0177.0.0.01"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, host string) {
		v := Judge(host)
		if v.Guarded && v.Why == "" {
			t.Fatalf("guarded without a reason: %q", host)
		}
		if v.IsAddr && v.Addr.IsValid() {
			if w := Judge(v.Addr.String()); w.Guarded != v.Guarded {
				t.Fatalf("%q judged %v, its address %s judged %v", host, v.Guarded, v.Addr, w.Guarded)
			}
		}
	})
}
