//go:build !linux || !(amd64 || arm64)

package netns

import (
	"context"
	"fmt"
)

// Do would run fn inside IDC n's namespace; this platform has no setns
// number here, so it fails. Command works everywhere ip does.
func (t *Topology) Do(n int, fn func() error) error {
	return fmt.Errorf("%w: setns is not wired for this platform", ErrUnavailable)
}

type delayLine struct{}

func (t *Topology) startDelayLine(ctx context.Context) (*delayLine, error) {
	return nil, fmt.Errorf("%w: no user-space delay line on this platform", ErrNoNetem)
}

func (dl *delayLine) stop() {}
