// Package hosttest is the one table of hosts every reader of a host runs
// against its own parser: the engine's targets, the manifest, a contained
// run's policy and its mediator, and the Effector's targets and push
// remotes. Each reader accepts a case exactly when the grammar (package
// contract) does, except where it documents a refusal of its own (a
// contained run never dials an IP literal): it may refuse more, never
// accept more.
//
// Invariant: test code only; nothing outside _test.go files imports it.
package hosttest

import "strings"

// Kind is what the grammar makes of a case.
type Kind int

const (
	// Bad is no host: every reader refuses it.
	Bad Kind = iota
	// Name is a host name (contract.CheckName).
	Name
	// IP is an IP literal in its one spelling (contract.IsIP).
	IP
)

// Case is one host, lowercase, unbracketed, without a port.
type Case struct {
	Host string
	Kind Kind
	// Canon, for an IP literal not in its one spelling, is that spelling:
	// a reader of targets (contract.SplitTarget) gives it back, a reader
	// that holds a host as written (contract.CheckHost, custodian.json)
	// refuses Host.
	Canon string
}

// Want is the host a reader of targets gives back for c.
func (c Case) Want() string {
	if c.Canon != "" {
		return c.Canon
	}
	return c.Host
}

// Accepts reports whether a reader that takes IP literals when ip is true
// must accept c.
func (c Case) Accepts(ip bool) bool { return c.Kind == Name || c.Kind == IP && ip }

// Bracketed is c.Host as it stands before a port: an IPv6 literal in
// brackets.
func (c Case) Bracketed() string {
	if strings.Contains(c.Host, ":") {
		return "[" + c.Host + "]"
	}
	return c.Host
}

// Cases are the hosts; each reader runs them all.
var Cases = []Case{
	{Host: "example.com", Kind: Name},
	{Host: "api.example.com", Kind: Name},
	{Host: "localhost", Kind: Name},
	{Host: "_dmarc.example.com", Kind: Name},
	{Host: "x-1.example.com", Kind: Name},
	{Host: "1.2.3.example", Kind: Name},
	{Host: "1e100.net", Kind: Name},
	{Host: strings.Repeat("a", 63) + ".com", Kind: Name},
	{Host: "10.1.2.3", Kind: IP},
	{Host: "93.184.216.34", Kind: IP},
	{Host: "2001:db8::1", Kind: IP},
	{Host: "::ffff:93.184.216.34", Kind: IP},
	{Host: "2001:db8:0:0::1", Kind: IP, Canon: "2001:db8::1"},
	{Host: "::ffff:5db8:d822", Kind: IP, Canon: "::ffff:93.184.216.34"},
	{Host: "", Kind: Bad},
	{Host: "example..com", Kind: Bad},
	{Host: ".example.com", Kind: Bad},
	{Host: strings.Repeat("a", 64) + ".com", Kind: Bad},
	{Host: "-a.example.com", Kind: Bad},
	{Host: "a-.example.com", Kind: Bad},
	{Host: "a b.com", Kind: Bad},
	{Host: "a*.example.com", Kind: Bad},
	{Host: "a\x00.com", Kind: Bad},
	{Host: "a%2e.com", Kind: Bad},
	{Host: "a@b.com", Kind: Bad},
	{Host: "caf\xc3\xa9.com", Kind: Bad},
	{Host: "\u212aey.com", Kind: Bad}, // the Kelvin sign, which strings.ToLower makes 'k'
	{Host: "127.1", Kind: Bad},        // reads as 127.0.0.1 to a resolver
	{Host: "2130706433", Kind: Bad},   // so does this
	{Host: "0x7f.0.0.1", Kind: Bad},
	{Host: "010.1.2.3", Kind: Bad}, // octal to inet_aton
	{Host: "fe80::1%eth0", Kind: Bad},
}
