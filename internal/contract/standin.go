package contract

import (
	"path/filepath"
	"strconv"
	"strings"
)

// StandInPrefix begins every stand-in: the stand-in of NAME is
// "jr2-held-NAME".
const StandInPrefix = "jr2-held-"

// StandIn returns the public stand-in of the held secret name.
func StandIn(name string) string { return StandInPrefix + name }

// TokenName is the kit's own held secret: the Sandbox token the control
// listener swaps in.
const TokenName = "JR2_SANDBOX_TOKEN"

// LeafBase is where controlplane render writes a bound target's leaf, and
// where custodian serve reads it, relative to the rendered directory:
// LeafBase(t)+".crt" and LeafBase(t)+".key".
func LeafBase(target string) string {
	host, port, err := SplitTarget(target)
	if err != nil {
		host, port = target, 0
	}
	host = leafName.Replace(host)
	return filepath.Join("tls", host+"_"+strconv.Itoa(port))
}

// leafName spells a host as a file name: an IPv6 literal's ':' and any '/'
// become '_'. One replacer for every call: render asks for hundreds of
// leaves, and building its table each time was a share of render's CPU.
var leafName = strings.NewReplacer(":", "_", "/", "_")
