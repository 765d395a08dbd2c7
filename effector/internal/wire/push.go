package wire

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"jr2.dev/boundary/internal/contract"
	sj "jr2.dev/boundary/internal/strictjson"
)

// Push is a push effect: the pinned commit of the worktree, sent to the
// Repo Slot's remote as Ref.
type Push struct {
	Slot Slot
	// Ref is the ref the remote updates ("refs/heads/…").
	Ref string
	// Pin is the commit to push; "" is the worktree's HEAD when the start
	// is read.
	Pin string
}

// Slot is the Repo Slot a push sends to: its name, the remote's url and
// the git.credentials entry that url matched.
type Slot struct {
	Name        string
	URL         string
	Credentials string
}

// Transports a push's remote may use.
const (
	TransportSSH   = "ssh"
	TransportHTTPS = "https"
)

// Remote is what ParseRemote reads of a slot's url.
type Remote struct {
	Transport string
	// Host is the remote's host name or address, without brackets.
	Host string
	// Port is the url's port, or 0 for the transport's own.
	Port int
}

// Compiled on first use (names.go).
var (
	reSSHUser = lazy(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,63}$`)
	// reHelper is git's "<transport>::<address>" (transport_get).
	reHelper = lazy(`^[A-Za-z0-9+.-]*::`)
)

// ValidSHA reports whether s is a full commit sha: 40 lowercase hex.
func ValidSHA(s string) bool { return validSHA(s) }

// ParseRemote reads a slot's url: ssh://[user@]host[:port]/path,
// user@host:path (scp-like) or https://host[:port]/path. Anything else —
// another scheme, a local path, a transport helper ("x::…"), a user name
// or password in an https url, a query, a host or user that begins with
// '-', a space or a control character — is refused: the url reaches git
// and ssh as an argument.
func ParseRemote(raw string) (Remote, error) {
	const forms = "want ssh://[user@]host[:port]/path, user@host:path or https://host[:port]/path"
	for _, c := range raw {
		if c <= ' ' || c == 0x7f || c == '\\' {
			return Remote{}, fmt.Errorf("holds a space, a control character or a backslash; %s", forms)
		}
	}
	switch {
	case reHelper.MatchString(raw):
		return Remote{}, fmt.Errorf("names a transport helper; %s", forms)
	case strings.HasPrefix(raw, "ssh://"), strings.HasPrefix(raw, "https://"):
		u, err := url.Parse(raw)
		if err != nil || u.Opaque != "" || u.RawQuery != "" || u.Fragment != "" || strings.Contains(raw, "?") || strings.Contains(raw, "#") {
			return Remote{}, fmt.Errorf("is not a url with a host and a path; %s", forms)
		}
		r := Remote{Transport: TransportSSH}
		if u.Scheme == "https" {
			r.Transport = TransportHTTPS
			if u.User != nil {
				return Remote{}, fmt.Errorf("names a user in an https url; the token is the git.credentials entry's, never the url's")
			}
		} else if u.User != nil {
			if _, has := u.User.Password(); has || !reSSHUser.MatchString(u.User.Username()) {
				return Remote{}, fmt.Errorf("the ssh user must be 1–64 of A-Z a-z 0-9 . _ -, not beginning with '-', and no password")
			}
		}
		if err := checkRemoteHost(u.Hostname()); err != nil {
			return Remote{}, err
		}
		r.Host = u.Hostname()
		if p := u.Port(); p != "" {
			n, err := strconv.Atoi(p)
			if err != nil || n < 1 || n > 65535 {
				return Remote{}, fmt.Errorf("port %q is not a port", p)
			}
			r.Port = n
		} else if strings.HasSuffix(u.Host, ":") {
			return Remote{}, fmt.Errorf("an empty port; %s", forms)
		}
		if u.Path == "" || u.Path == "/" {
			return Remote{}, fmt.Errorf("names no repository path; %s", forms)
		}
		return r, nil
	case strings.Contains(raw, "://"):
		return Remote{}, fmt.Errorf("a scheme this Effector does not push to; %s", forms)
	}
	// scp-like: user@host:path, with no '/' before the ':'. An IPv6 host
	// in brackets is refused here, not read: its ':' would be cut first.
	if at := strings.IndexByte(raw, '@'); at >= 0 && strings.HasPrefix(raw[at+1:], "[") {
		return Remote{}, fmt.Errorf("an IPv6 host in the scp-like form; write ssh://user@[address]/path")
	}
	userHost, path, ok := strings.Cut(raw, ":")
	user, host, hasUser := strings.Cut(userHost, "@")
	if !ok || !hasUser || strings.Contains(userHost, "/") || path == "" || strings.HasPrefix(path, "-") {
		return Remote{}, fmt.Errorf("is not a url git pushes over ssh or https; %s", forms)
	}
	if !reSSHUser.MatchString(user) {
		return Remote{}, fmt.Errorf("the ssh user must be 1–64 of A-Z a-z 0-9 . _ -, not beginning with '-'")
	}
	if err := checkRemoteHost(host); err != nil {
		return Remote{}, err
	}
	return Remote{Transport: TransportSSH, Host: host}, nil
}

// checkRemoteHost holds a remote's host to the one grammar (package
// contract), read as a target's host is: any case, an IP literal in any
// spelling netip reads.
func checkRemoteHost(h string) error {
	if h == "" {
		return fmt.Errorf("names no host")
	}
	if _, _, err := contract.SplitTarget(net.JoinHostPort(h, "443")); err != nil {
		return fmt.Errorf("host %q is not a host name or an IP address", h)
	}
	return nil
}

// CheckRef holds a ref to what `git check-ref-format` accepts, under
// "refs/", with at least two levels after it.
func CheckRef(ref string) error {
	if !strings.HasPrefix(ref, "refs/") || strings.Count(ref, "/") < 2 {
		return fmt.Errorf("%q is not a full ref; give refs/heads/<branch> (or another ref under refs/)", ref)
	}
	if strings.HasSuffix(ref, "/") || strings.HasSuffix(ref, ".") || strings.Contains(ref, "..") || strings.Contains(ref, "@{") || strings.Contains(ref, "//") {
		return fmt.Errorf("%q is not a ref git accepts (no '..', '@{', '//', and no '/' or '.' at its end)", ref)
	}
	for _, c := range ref {
		if c <= ' ' || c == 0x7f || strings.ContainsRune("~^:?*[\\", c) {
			return fmt.Errorf("%q is not a ref git accepts (no space, control character or any of ~^:?*[\\)", ref)
		}
	}
	for _, comp := range strings.Split(ref, "/") {
		if strings.HasPrefix(comp, ".") || strings.HasSuffix(comp, ".lock") {
			return fmt.Errorf("%q is not a ref git accepts (no part that begins with '.' or ends with .lock)", ref)
		}
	}
	if ref == "@" || len(ref) > 1024 {
		return fmt.Errorf("%q is not a ref git accepts", ref)
	}
	return nil
}

func decodePush(path string, raw json.RawMessage) (*Push, error) {
	o, err := sj.DecodeObject(path, raw, "slot", "ref", "pin")
	if err != nil {
		return nil, err
	}
	p := &Push{}
	slot, ok, err := o.Raw("slot")
	if err == nil && !ok {
		err = sj.Errorf(sj.Join(path, "slot"), "required: the Repo Slot (name, url, credentials)")
	}
	if err != nil {
		return nil, err
	}
	sp := sj.Join(path, "slot")
	so, err := sj.DecodeObject(sp, slot, "name", "url", "credentials")
	if err != nil {
		return nil, err
	}
	for _, f := range []struct {
		key  string
		dst  *string
		what string
	}{{"name", &p.Slot.Name, "a Repo Slot name"}, {"credentials", &p.Slot.Credentials, "a git.credentials entry name"}} {
		if *f.dst, _, err = so.Str(f.key, true); err != nil {
			return nil, err
		}
		if !ValidSecretName(*f.dst) || *f.dst == "." || *f.dst == ".." {
			return nil, sj.Errorf(sj.Join(sp, f.key), "%s is not %s (1–253 of A-Z a-z 0-9 . _ -)", sj.Quote(*f.dst), f.what)
		}
	}
	if p.Slot.URL, _, err = so.Str("url", true); err != nil {
		return nil, err
	}
	if _, err := ParseRemote(p.Slot.URL); err != nil {
		return nil, sj.Errorf(sj.Join(sp, "url"), "%s %v", sj.Quote(p.Slot.URL), err)
	}
	if p.Ref, _, err = o.Str("ref", true); err != nil {
		return nil, err
	}
	if err := CheckRef(p.Ref); err != nil {
		return nil, sj.Errorf(sj.Join(path, "ref"), "%v", err)
	}
	if p.Pin, _, err = o.Str("pin", false); err != nil {
		return nil, err
	}
	if o.Has("pin") && !ValidSHA(p.Pin) {
		return nil, sj.Errorf(sj.Join(path, "pin"), "%s is not a commit sha; give the full 40 lowercase hex characters, or leave it out for the worktree's HEAD", sj.Quote(p.Pin))
	}
	return p, nil
}

// MarshalJSON writes a push in the pinned member order.
func (p *Push) MarshalJSON() ([]byte, error) {
	slot := fields{{"name", p.Slot.Name}, {"url", p.Slot.URL}, {"credentials", p.Slot.Credentials}}
	return fields{{"slot", slot}, {"ref", p.Ref}, {"pin", opt(p.Pin)}}.MarshalJSON()
}
