package client

import (
	"context"
	"time"
)

// everyTick calls fn every interval and, when wake is not nil, at once
// whenever wake receives, until ctx ends. It is the shape of every
// background loop of the SDK (offset commits, heartbeats, rebalances,
// liveness checks); fn runs on the loop's goroutine, so a slow fn delays the
// next call rather than overlapping it.
func everyTick(ctx context.Context, interval time.Duration, wake <-chan struct{}, fn func(ctx context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-wake:
		}
		fn(ctx)
	}
}
