package netns

import (
	"context"
	"fmt"
)

// Flaky links: a link's shaping changed for a while — more delay, jitter,
// loss — and put back. With netem the link's qdisc on the bridge is
// changed in place; with the user-space delay line the next packet reads
// the new shaping. Only links shaped when the topology was built (a
// non-zero Link) can be changed under netem: the others have no qdisc of
// their own.

// degraded maps a directed pair to its temporary shaping (copy on write:
// the delay line reads it for every packet).
type degraded map[Pair]Link

// Degrade shapes the direction from → to as l until Restore.
func (t *Topology) Degrade(ctx context.Context, from, to int, l Link) error {
	if err := t.checkPair(from, to); err != nil {
		return err
	}
	if err := checkLink(l); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.setNetemLocked(ctx, from, to, l); err != nil {
		return err
	}
	next := degraded{}
	if cur := t.degraded.Load(); cur != nil {
		for p, v := range *cur {
			next[p] = v
		}
	}
	next[Pair{from, to}] = l
	t.degraded.Store(&next)
	t.log.Info("netns: link degraded", "from", from, "to", to, "delay", l.Delay, "jitter", l.Jitter, "loss", l.LossPercent)
	return nil
}

// Restore puts every degraded link back as the topology was built.
func (t *Topology) Restore(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	cur := t.degraded.Load()
	if cur == nil {
		return nil
	}
	for p := range *cur {
		if err := t.setNetemLocked(ctx, p.A, p.B, t.builtLink(p.A, p.B)); err != nil {
			return err
		}
		t.log.Info("netns: link restored", "from", p.A, "to", p.B)
	}
	t.degraded.Store(nil)
	return nil
}

// setNetemLocked changes the netem qdisc of from → to (a no-op with the
// user-space delay line, which reads t.link per packet).
func (t *Topology) setNetemLocked(ctx context.Context, from, to int, l Link) error {
	if t.shaper != "netem" {
		return nil
	}
	if t.builtLink(from, to) == (Link{}) {
		return fmt.Errorf("netns: the link %d → %d was built unshaped; only shaped links can be degraded under netem", from, to)
	}
	args := append([]string{"-n", t.BridgeNamespace(), "qdisc", "change", "dev", port(to), "parent", fmt.Sprintf("1:%x", from+1),
		"handle", fmt.Sprintf("%x:", from+16), "netem"}, netemArgs(l)...)
	return run(ctx, "tc", args...)
}

// degradedLink is the temporary shaping of from → to, if any.
func (t *Topology) degradedLink(from, to int) (Link, bool) {
	cur := t.degraded.Load()
	if cur == nil {
		return Link{}, false
	}
	l, ok := (*cur)[Pair{from, to}]
	return l, ok
}
