package broker

import (
	"context"
	"time"
)

// paceTopicRegistration waits, after a topic-change kick, until the time
// since the last full registration is four times what that registration
// took (so registrations use at most a fifth of the loop's time however
// large the table: a full REGISTER_BROKER carries every topic, and one per
// created topic would cost O(topics) per creation), then drops kicks that
// arrived meanwhile: the registration that follows covers them. A small
// table registers at once (its registration takes a millisecond); the wait
// never exceeds half the heartbeat interval, so heartbeats are not held up.
func (r *registrar) paceTopicRegistration(ctx context.Context, p *namesrvPeer, st *peerState) {
	gap := min(4*st.lastFullTook, r.s.opts.HeartbeatInterval/2)
	wait := time.Until(st.lastFull.Add(gap))
	if wait <= 0 {
		return
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-ctx.Done():
	case <-timer.C:
	}
	select {
	case <-p.kick:
	default:
	}
}
