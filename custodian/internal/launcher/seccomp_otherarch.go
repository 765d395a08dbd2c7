//go:build linux && !amd64 && !arm64

package launcher

// No architecture is pinned here: installSeccomp refuses, so the child
// never runs without its filter.
const (
	auditArch = 0
	checkX32  = false
	pinned    = false
)
