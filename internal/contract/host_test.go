package contract

import (
	"errors"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"jr2.dev/boundary/internal/contract/hosttest"
)

func TestCheck(t *testing.T) {
	long63 := strings.Repeat("a", 63)
	name253 := strings.Repeat(long63+".", 3) + strings.Repeat("b", 61) // 64*3 + 61 = 253
	for _, tc := range []struct {
		name string
		want error
	}{
		{"example.com", nil},
		{"a", nil},
		{"localhost", nil},
		{"_dmarc.example.com", nil},
		{"x-1.example.com", nil},
		{"1.2.3.example", nil},
		{"1e100.net", nil},
		{long63 + ".com", nil},
		{name253, nil},
		{name253 + "b", ErrTooLong},
		{"", ErrEmpty},
		{"example.com.", ErrEmptyLabel},
		{".example.com", ErrEmptyLabel},
		{"a..b", ErrEmptyLabel},
		{long63 + "a.com", ErrLabelTooLong},
		{"-a.com", ErrHyphen},
		{"a-.com", ErrHyphen},
		{"Example.com", ErrByte},
		{"a b.com", ErrByte},
		{"a*.com", ErrByte},
		{"a\x00.com", ErrByte},
		{"a=b.com", ErrByte},
		{"caf\xc3\xa9.com", ErrByte},
		{"127.0.0.1", ErrNumeric},
		{"127.1", ErrNumeric},
		{"2130706433", ErrNumeric},
		{"0x7f.0.0.1", ErrNumeric},
		{"[::1]", ErrByte},
	} {
		if got := CheckName(tc.name); !errors.Is(got, tc.want) {
			t.Errorf("CheckName(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestLower(t *testing.T) {
	for in, want := range map[string]string{
		"Example.COM": "example.com",
		"plain":       "plain",
		"\xc3\x89X":   "\xc3\x89x", // non-ASCII kept for CheckName to refuse
	} {
		if got := Lower(in); got != want {
			t.Errorf("Lower(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestTheGrammar: CheckHost accepts exactly the table's names and IP
// literals in their one spelling; SplitTarget accepts every name and IP
// literal and gives back the host in its one spelling, and the port.
func TestTheGrammar(t *testing.T) {
	for _, c := range hosttest.Cases {
		err := CheckHost(c.Host)
		if ok := err == nil; ok != (c.Accepts(true) && c.Canon == "") {
			t.Errorf("CheckHost(%q) = %v, want accepted %v", c.Host, err, c.Accepts(true) && c.Canon == "")
		}
		if IsIP(c.Host) != (c.Kind == hosttest.IP && c.Canon == "") {
			t.Errorf("IsIP(%q) = %v", c.Host, IsIP(c.Host))
		}
		h, p, err := SplitTarget(c.Bracketed() + ":8443")
		if ok := err == nil; ok != c.Accepts(true) || ok && (h != c.Want() || p != 8443) {
			t.Errorf("SplitTarget(%q:8443) = %q %d %v, want accepted %v", c.Bracketed(), h, p, err, c.Accepts(true))
		}
	}
}

func TestSplitTarget(t *testing.T) {
	for _, tc := range []struct {
		in, host string
		port     int
		err      string
	}{
		{"API.Example.COM.:443", "api.example.com", 443, ""},
		{"[2001:DB8::1]:443", "2001:db8::1", 443, ""},
		{"example.com", "", 0, "want host:port"},
		{":443", "", 0, "the host is empty"},
		{"example.com:0", "", 0, "the port must be a number from 1 to 65535"},
		{"example.com:0443", "", 0, "the port must be a number from 1 to 65535"},
		{"example.com:+443", "", 0, "the port must be a number from 1 to 65535"},
		{"example.com:65536", "", 0, "the port must be a number from 1 to 65535"},
		{"127.1:443", "", 0, ErrNotAHost.Error()},
		{"[fe80::1%eth0]:443", "", 0, ErrNotAHost.Error()},
	} {
		h, p, err := SplitTarget(tc.in)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if h != tc.host || p != tc.port || got != tc.err {
			t.Errorf("SplitTarget(%q) = %q %d %q, want %q %d %q", tc.in, h, p, got, tc.host, tc.port, tc.err)
		}
	}
}

// FuzzSplitTarget: SplitTarget, which walks the host's labels and reads
// the port by hand to allocate nothing, accepts and splits exactly as a
// plain reading of the grammar (refSplitTarget); a host it returns joins
// back to a target that splits to the same host and port.
func FuzzSplitTarget(f *testing.F) {
	for _, s := range []string{"api.anthropic.com:443", "API.Example.COM.:8443", "[2001:db8::1]:443", "[fe80::1%eth0]:443",
		"a..b:1", ".a:1", "a.:1", "a:0", "a:01", "a:+1", "a:65535", "a:65536", "a:099999", "x_y-z.9:80", "x_y-z.9a:80", "a b:1", ":443",
		strings.Repeat("a", 63) + ".b:1", strings.Repeat("a", 64) + ".b:1", strings.Repeat("a.", 126) + "a:1", "1.2.3.4:5",
		"127.1:443", "[2001:DB8:0::1]:1", "-a.b:1", "\u212aey.com:443"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h, p, err := SplitTarget(s)
		wh, wp, werr := refSplitTarget(s)
		if (err == nil) != (werr == nil) || h != wh || p != wp {
			t.Fatalf("SplitTarget(%q) = %q %d %v, the plain reading: %q %d %v", s, h, p, err, wh, wp, werr)
		}
		if err != nil {
			return
		}
		if h2, p2, err := SplitTarget(JoinTarget(h, p)); err != nil || h2 != h || p2 != p {
			t.Fatalf("round trip of %q: %q %d %v", s, h2, p2, err)
		}
	})
}

// refSplitTarget is the grammar read plainly: net.SplitHostPort, strconv
// for the port, strings.Split for the labels, netip's own spelling for an
// address.
func refSplitTarget(t string) (string, int, error) {
	bad := errors.New("bad")
	h, p, err := net.SplitHostPort(t)
	if err != nil || h == "" {
		return "", 0, bad
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != p {
		return "", 0, bad
	}
	h = strings.TrimSuffix(h, ".")
	var b strings.Builder
	for _, c := range []byte(h) {
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		b.WriteByte(c)
	}
	h = b.String()
	if a, err := netip.ParseAddr(h); err == nil {
		if a.Zone() != "" {
			return "", 0, bad
		}
		return a.String(), n, nil
	}
	if len(h) > 253 {
		return "", 0, bad
	}
	labels := strings.Split(h, ".")
	for _, label := range labels {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return "", 0, bad
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", 0, bad
			}
		}
	}
	if strings.Trim(labels[len(labels)-1], "0123456789") == "" {
		return "", 0, bad
	}
	return h, n, nil
}
