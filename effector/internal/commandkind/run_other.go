//go:build !linux

package commandkind

import (
	"context"

	"jr2.dev/boundary/effector/internal/wire"
	"jr2.dev/boundary/filter/scrub"
)

// run runs nothing off Linux: the keeper, the subreaper and Landlock are
// Linux's (and Prepare refuses first, the probe having failed).
func (k *Kind) run(ctx context.Context, sc *scrub.Scrubber, p *prepared) wire.Outcome {
	return notRun("credentialed commands run on Linux only")
}
