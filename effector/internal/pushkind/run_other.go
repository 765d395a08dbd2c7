//go:build !linux

package pushkind

import (
	"context"

	"jr2.dev/boundary/effector/internal/wire"
)

// run pushes nothing off Linux: the confined git, the subreaper and the
// settle loop are Linux's (and Prepare rejects first, the Landlock probe
// having failed).
func (k *Kind) run(ctx context.Context, p *prepared) wire.Outcome {
	return rejected(StageStart, "a push runs on Linux only")
}
