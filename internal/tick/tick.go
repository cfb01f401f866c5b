// Package tick runs periodic work: the sweeps, janitors and refreshes of the fleet's
// parts share this one loop, so each of them stops the same way — when its context ends,
// and only once the work in progress has returned.
package tick

import (
	"context"
	"time"
)

// Every calls f every d until ctx ends, then returns. The first call is d after the
// start, not at once; a call that takes longer than d delays the next one rather than
// piling calls up. f gets ctx and should return soon after ctx ends. Every blocks: run it
// in a goroutine whose owner waits for it (an errgroup, a WaitGroup).
func Every(ctx context.Context, d time.Duration, f func(context.Context)) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if ctx.Err() != nil {
				return
			}
			f(ctx)
		}
	}
}
