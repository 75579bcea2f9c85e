package broker

import (
	"context"
	"time"
)

// topicRegisterMinGap is the least time between two full registrations
// caused by topic changes. A full REGISTER_BROKER carries every topic, so
// registering once per created topic would cost O(topics) per creation;
// pacing lets one registration carry every change of the gap.
const topicRegisterMinGap = 200 * time.Millisecond

// paceTopicRegistration waits, after a topic-change kick, until the gap
// since the last full registration is at least topicRegisterMinGap and four
// times what that registration took (so registrations use at most a fifth
// of the loop's time however large the table), then drops kicks that
// arrived meanwhile: the registration that follows covers them. The wait is
// below the heartbeat interval, so heartbeats are not held up.
func (r *registrar) paceTopicRegistration(ctx context.Context, p *namesrvPeer, st *peerState) {
	gap := min(max(topicRegisterMinGap, 4*st.lastFullTook), r.s.opts.HeartbeatInterval/2)
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
