package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sort"
	"strconv"
	"strings"

	"jr2.dev/boundary/effector/internal/oserr"
	"jr2.dev/boundary/effector/internal/wire"
	"jr2.dev/boundary/internal/contract"
	sj "jr2.dev/boundary/internal/strictjson"
)

// Target is one scheme, host and port an http effect may call, with the
// secrets an effect toward it may name.
type Target struct {
	Scheme  string
	Host    string
	Port    int
	Secrets []string
}

// Sign forms of a push (effector.json pushes[].sign).
const (
	SignSSH = "sshKey" // ssh-keygen -Y sign with the entry's sign.identity
	SignGPG = "gpgKey" // gpg with the entry's sign.private.asc, in its own gpg-agent
)

// Push is one Repo Slot the Effector pushes and how its commits are signed
// ("" for unsigned, SignSSH or SignGPG).
type Push struct {
	Slot string
	Sign string
}

// Push returns the slot named slot.
func (c *Config) Push(slot string) (Push, bool) {
	for _, p := range c.Pushes {
		if p.Slot == slot {
			return p, true
		}
	}
	return Push{}, false
}

// loadFile reads effector.json.
func (c *Config) loadFile(path string) error {
	if path == "" {
		return fmt.Errorf("%s: not set; point it at effector.json", EnvConfig)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%s: %s; mount effector.json where it points", EnvConfig, oserr.Why(err))
	}
	if err := c.parseFile(b); err != nil {
		return fmt.Errorf("effector.json: %w", err)
	}
	return nil
}

// ParseFile reads effector.json alone — placement, targets, commands,
// pushes — with the checks Load makes of it, for the control plane that
// renders the Effector's objects (package effector/effectorconf). Every
// other field of the Config is left zero.
func ParseFile(b []byte) (*Config, error) {
	c := &Config{fileOnly: true}
	if err := c.parseFile(b); err != nil {
		return nil, fmt.Errorf("effector.json: %w", err)
	}
	return c, nil
}

func (c *Config) parseFile(b []byte) error {
	raw, err := sj.Document(b)
	if err != nil {
		return err
	}
	o, err := sj.DecodeObject("", raw, "placement", "targets", "commands", "pushes")
	if err != nil {
		return err
	}
	if c.Placement, _, err = o.Str("placement", true); err != nil {
		return err
	}
	if c.Placement == "" {
		return sj.Errorf("placement", "empty; name the placement (\"instance\", or the Sandbox's)")
	}
	if c.Commands, _, err = o.Bool("commands", false); err != nil {
		return err
	}
	targets, _, err := o.Array("targets", false)
	if err != nil {
		return err
	}
	seen := map[string]int{}
	for i, r := range targets {
		p := sj.Index("targets", i)
		t, err := c.parseTarget(p, r)
		if err != nil {
			return err
		}
		key := t.Scheme + "://" + net.JoinHostPort(t.Host, strconv.Itoa(t.Port))
		if j, dup := seen[key]; dup {
			return sj.Errorf(p, "the same scheme, host and port as targets[%d]; list each target once, with all its secrets", j)
		}
		seen[key] = i
		c.Targets = append(c.Targets, t)
	}
	return c.parsePushes(o)
}

// parsePushes reads effector.json's pushes: [{"slot": NAME, "sign"?:
// "sshKey"|"gpgKey"}], each slot once.
func (c *Config) parsePushes(o *sj.Object) error {
	pushes, _, err := o.Array("pushes", false)
	if err != nil {
		return err
	}
	seen := map[string]int{}
	for i, r := range pushes {
		p := sj.Index("pushes", i)
		po, err := sj.DecodeObject(p, r, "slot", "sign")
		if err != nil {
			return err
		}
		var push Push
		if push.Slot, _, err = po.Str("slot", true); err != nil {
			return err
		}
		if !wire.ValidSecretName(push.Slot) {
			return sj.Errorf(sj.Join(p, "slot"), "%s is not a Repo Slot name (1–253 of A-Z a-z 0-9 . _ -)", sj.Quote(push.Slot))
		}
		if j, dup := seen[push.Slot]; dup {
			return sj.Errorf(p, "the same slot as pushes[%d]; list each slot once", j)
		}
		seen[push.Slot] = i
		if push.Sign, _, err = po.Str("sign", false); err != nil {
			return err
		}
		if po.Has("sign") && push.Sign != SignSSH && push.Sign != SignGPG {
			return sj.Errorf(sj.Join(p, "sign"), "%s is not a signing form; want %q or %q, or leave it out for unsigned commits", sj.Quote(push.Sign), SignSSH, SignGPG)
		}
		c.Pushes = append(c.Pushes, push)
	}
	sort.Slice(c.Pushes, func(i, j int) bool { return c.Pushes[i].Slot < c.Pushes[j].Slot })
	return nil
}

func (c *Config) parseTarget(p string, r []byte) (Target, error) {
	var t Target
	o, err := sj.DecodeObject(p, r, "scheme", "host", "port", "secrets")
	if err != nil {
		return t, err
	}
	if t.Scheme, _, err = o.Str("scheme", true); err != nil {
		return t, err
	}
	if t.Scheme != "https" && t.Scheme != "http" {
		return t, sj.Errorf(sj.Join(p, "scheme"), "%s: want https or http", sj.Quote(t.Scheme))
	}
	if t.Host, _, err = o.Str("host", true); err != nil {
		return t, err
	}
	if err := checkHost(t.Host); err != nil {
		return t, sj.Errorf(sj.Join(p, "host"), "%s: %v", sj.Quote(t.Host), err)
	}
	port, _, err := o.Int("port", true, 1, 65535)
	if err != nil {
		return t, err
	}
	t.Port = int(port)
	if v, ok, err := o.Raw("secrets"); err != nil {
		return t, err
	} else if ok {
		if t.Secrets, err = sj.Strings(sj.Join(p, "secrets"), v); err != nil {
			return t, err
		}
	}
	for j, name := range t.Secrets {
		if c.fileOnly {
			if !wire.ValidSecretName(name) {
				return t, sj.Errorf(sj.Index(sj.Join(p, "secrets"), j), "%s is not a secret name (1–253 of A-Z a-z 0-9 . _ -)", sj.Quote(name))
			}
			continue
		}
		if _, held := c.Secret(name); !held {
			return t, sj.Errorf(sj.Index(sj.Join(p, "secrets"), j), "%s: no such secret in %s; project it there, or take it off this target", sj.Quote(name), EnvSecrets)
		}
	}
	return t, nil
}

// checkHost holds a target's host to the one grammar (package contract),
// written as requests are compared with it: lowercase, an IP literal in
// its one spelling.
func checkHost(h string) error {
	a, ipErr := netip.ParseAddr(h)
	switch {
	case h == "":
		return errors.New("empty; name the host")
	case strings.Contains(h, "*"):
		return errors.New("wildcards are not allowed; list each host")
	case strings.ContainsAny(h, "/:@?#[] ") && ipErr != nil:
		return errors.New("want a host name or an IP address alone; give the scheme and port in their own fields")
	case contract.Lower(h) != h:
		return errors.New("write the host in lowercase")
	case ipErr == nil && a.Zone() == "" && a.String() != h:
		return errors.New("write the address as " + a.String())
	}
	if err := contract.CheckHost(h); err != nil {
		return fmt.Errorf("not a host name or an IP address: %v", err)
	}
	return nil
}
