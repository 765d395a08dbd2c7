//go:build !linux

package commandkind

import (
	"context"

	"jr2.dev/boundary/effector/internal/effect"
	"jr2.dev/boundary/effector/internal/wire"
)

// run runs nothing off Linux: the keeper, the subreaper and Landlock are
// Linux's (and Prepare refuses first, the probe having failed).
func (k *Kind) run(ctx context.Context, sc *effect.Scrubber, p *prepared) wire.Outcome {
	return notRun("credentialed commands run on Linux only")
}
