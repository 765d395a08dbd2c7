package run

import (
	"fmt"
	"strings"
)

// needed are the capabilities a contained run uses, in its effective set:
// the namespaces and their mounts (ip netns add, unshare, mount) and the
// veth pair, its addresses and routes (ip link, ip addr, ip route).
var needed = []struct {
	name string
	num  int
}{
	{"CAP_SYS_ADMIN", capSysAdmin},
	{"CAP_NET_ADMIN", capNetAdmin},
}

// privilegeError is nil when a runner of effective uid euid that holds
// the capabilities has says it can make a run's namespaces; else it says
// that the run needs root and which capabilities are missing, and that
// nothing was written. It is checked before the bundle is created and
// before its key is announced.
func privilegeError(euid int, has func(c int) (bool, error)) error {
	var missing []string
	for _, c := range needed {
		ok, err := has(c.num)
		if err != nil {
			return fmt.Errorf("cannot read this process's capabilities: %w", err)
		}
		if !ok {
			missing = append(missing, c.name)
		}
	}
	switch {
	case euid != 0:
		return fmt.Errorf("a contained run needs root: it makes network and mount namespaces (ip netns add, with %s), which uid %d cannot; run it as root (sudo -E keeps the variables the policy's secrets name)", strings.Join(names(), " and "), euid)
	case len(missing) > 0:
		return fmt.Errorf("a contained run needs %s, which this root process lacks (a container without them?): it makes network and mount namespaces; run it where root holds them", strings.Join(missing, " and "))
	}
	return nil
}

func names() []string {
	out := make([]string, len(needed))
	for i, c := range needed {
		out[i] = c.name
	}
	return out
}
