package nodetest

import (
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// hostState is what a node must not change on the host: sysctls, the
// top-level cgroups, the mount table, and the network's interfaces,
// addresses and routes.
type hostState map[string]string

// sysctlTrees are the /proc/sys trees compared; volatile are entries the
// kernel itself changes from moment to moment.
var (
	sysctlTrees = []string{"kernel", "vm", "fs/inotify", "net/core", "net/ipv4", "net/ipv6", "net/bridge"}
	volatile    = []string{"kernel/random/", "kernel/ns_last_pid", "kernel/pty/nr", "kernel/tainted", "net/netfilter/nf_conntrack_count", "vm/stat_refresh", "fs/inotify/", "kernel/perf_event_max_sample_rate"}
)

// otherTests matches the host interfaces other tests of this repository
// make and remove in runs of their own, side by side with a node's (go
// test ./... runs packages in parallel): the e2e suite's veths
// (e2e/netns_test.go names them je<pid>x<n>h), which that suite checks it
// removes. Their links, their per-interface sysctls and their routes are
// not the node's: the node's parts run in its own network namespace.
var otherTests = regexp.MustCompile(`^je[0-9]+x[0-9]+[hn]$`)

// ofOtherTests: a sysctl of such an interface (net/ipv4/conf/IF/…,
// net/ipv6/neigh/IF/…).
func ofOtherTests(sysctl string) bool {
	f := strings.Split(sysctl, "/")
	return len(f) > 3 && f[0] == "net" && (f[2] == "conf" || f[2] == "neigh") && otherTests.MatchString(f[3])
}

func snapshotHost() (hostState, error) {
	s := hostState{}
	for _, tree := range sysctlTrees {
		root := filepath.Join("/proc/sys", tree)
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			rel := strings.TrimPrefix(p, "/proc/sys/")
			for _, v := range volatile {
				if strings.HasPrefix(rel, v) && !strings.HasPrefix(rel, "fs/inotify/max_") {
					return nil
				}
			}
			if ofOtherTests(rel) {
				return nil
			}
			if b, err := os.ReadFile(p); err == nil {
				s["sysctl "+rel] = strings.TrimSpace(string(b))
			}
			return nil
		})
	}
	cs, err := hierarchies()
	if err != nil {
		return nil, err
	}
	for _, c := range cs {
		ents, _ := os.ReadDir(c)
		for _, e := range ents {
			if e.IsDir() {
				s["cgroup "+filepath.Join(c, e.Name())] = "present"
			}
		}
	}
	mts, err := mountTable()
	if err != nil {
		return nil, err
	}
	for _, f := range mts {
		// Named network namespaces (/run/netns/NAME) are other tests'
		// contained runs; a node makes none (containerd's are under its own
		// state). Nor is /run/netns itself: iproute2 makes it a shared
		// bind mount of itself at the first `ip netns add` the machine
		// sees and keeps it (so on a fresh machine the first contained run
		// of a parallel package makes it mid-run), as it makes the
		// directory; scripts/leftovers.sh takes the directory the same way.
		if f[4] != "/run/netns" && !strings.HasPrefix(f[4], "/run/netns/") {
			s["mount "+f[4]] += f[3] + " " // the mount point, and the root each mount there shows
		}
	}
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	for _, i := range ifs {
		if otherTests.MatchString(i.Name) {
			continue
		}
		addrs, _ := i.Addrs()
		var as []string
		for _, a := range addrs {
			as = append(as, a.String())
		}
		sort.Strings(as)
		s["interface "+i.Name] = fmt.Sprintf("%s %s", i.Flags, strings.Join(as, ","))
	}
	for f, counters := range routeCounters {
		b, _ := os.ReadFile(f)
		lines := routes(string(b), counters)
		s["routes "+f] = strings.Join(lines, "\n")
	}
	return s, nil
}

// routeCounters are the fields of each route table that count the
// route's use (RefCnt and Use), which change whenever a socket uses it.
var routeCounters = map[string][2]int{"/proc/net/route": {4, 5}, "/proc/net/ipv6_route": {6, 7}}

// routes are a route table's lines, sorted, each its fields but the
// counters, rejoined with one space (so the padding of the line that
// happened to be the file's last is no change either), without the
// routes of other tests' interfaces.
func routes(table string, counters [2]int) []string {
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(table), "\n") {
		// The device is the first field of /proc/net/route, the last of
		// ipv6_route.
		fs := strings.Fields(l)
		if len(fs) == 0 || otherTests.MatchString(fs[0]) || otherTests.MatchString(fs[len(fs)-1]) {
			continue
		}
		var kept []string
		for i, v := range fs {
			if i != counters[0] && i != counters[1] {
				kept = append(kept, v)
			}
		}
		lines = append(lines, strings.Join(kept, " "))
	}
	sort.Strings(lines)
	return lines
}

// diff names every entry that differs, in order.
func (s hostState) diff(after hostState) []string {
	var ds []string
	for k, v := range s {
		if w, ok := after[k]; !ok {
			ds = append(ds, fmt.Sprintf("%s is gone (was %q)", k, v))
		} else if w != v {
			ds = append(ds, fmt.Sprintf("%s was %q, is %q", k, v, w))
		}
	}
	for k, w := range after {
		if _, ok := s[k]; !ok {
			ds = append(ds, fmt.Sprintf("%s is new (%q)", k, w))
		}
	}
	sort.Strings(ds)
	return ds
}

// mountTable is this mount namespace's /proc/self/mountinfo, a line's
// fields each (ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS …), lines of fewer
// than six fields left out.
func mountTable() ([][]string, error) {
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out [][]string
	for _, line := range strings.Split(strings.TrimSpace(string(mi)), "\n") {
		if f := strings.Fields(line); len(f) > 5 {
			out = append(out, f)
		}
	}
	return out, nil
}
