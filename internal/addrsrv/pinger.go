package addrsrv

import (
	"context"
	"fmt"
	"time"

	"github.com/zonemq/zonemq/internal/remoting"
)

// The pinger is the fast half of the prober. The probe loop (prober.go)
// decides every ProbeInterval, on a fresh connection when the last one
// failed, whether a name server works; between its probes the pinger keeps
// asking, PingInterval apart, on the connection the probe loop left open,
// and takes a listed name server off the list once nothing at all has come
// back from it for SilentAfter.
//
// Why this is not a false delisting under load: pings go out whether or not
// the last one was answered, so a name server that answers slowly still
// answers something every PingInterval; only one that answered nothing for
// SilentAfter (many pings in a row) is judged. And the pinger judges only on
// ticks that came on time: after its own process was starved of CPU, the
// answers may sit unread in its socket, so it waits one more tick first.

// pingState is the pinger's part of namesrvState; only that name server's
// ping loop touches suspectSince, lastAnswer is guarded by Server.mu.
type pingState struct {
	lastAnswer   time.Time      // the last answer to a probe or ping
	suspectSince time.Time      // first on-time tick that saw the silence; zero: none
	conn         *remoting.Conn // the open connection the last tick saw
}

// heard records an answer from st. Caller holds s.mu.
func (st *namesrvState) heardLocked(at time.Time) {
	if at.After(st.ping.lastAnswer) {
		st.ping.lastAnswer = at
	}
}

// pingLoop pings st every PingInterval until ctx ends.
func (s *Server) pingLoop(ctx context.Context, st *namesrvState) {
	every := s.opts.PingInterval
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-ticker.C:
			onTime := time.Since(last) < 2*every && time.Since(now) < every
			last = time.Now()
			s.pingTick(st, onTime)
		}
	}
}

// pingTick sends one ping on the open connection, if there is one, and
// judges the silence so far.
func (s *Server) pingTick(st *namesrvState, onTime bool) {
	cn, ok := s.client.ConnIfOpen(st.Addr)
	if !ok || cn != st.ping.conn {
		// The probe loop dials; the pinger never does, and it waits a tick
		// before using a new connection, so a peer that drops connections
		// is neither dialled nor asked more often than before.
		st.ping.conn = cn
		st.ping.suspectSince = time.Time{}
		return
	}
	cn.InvokeAsync(remoting.NewRequest(int32(probeCode), nil, nil), s.opts.SilentAfter, func(_ *remoting.Command, err error) {
		if err != nil {
			return
		}
		s.mu.Lock()
		st.heardLocked(time.Now())
		s.mu.Unlock()
	})

	s.mu.Lock()
	listed := st.probed && st.alive
	silence := time.Since(st.ping.lastAnswer)
	known := !st.ping.lastAnswer.IsZero()
	s.mu.Unlock()
	if !listed || !known || silence < s.opts.SilentAfter || !onTime {
		st.ping.suspectSince = time.Time{}
		return
	}
	if st.ping.suspectSince.IsZero() {
		// Seen on one on-time tick: the next one confirms, after every
		// answer already received has had a tick's time to be read.
		st.ping.suspectSince = time.Now()
		return
	}
	st.ping.suspectSince = time.Time{}
	// The connection is hung with our requests in it: drop it, so the
	// next probe dials afresh and tells a dead process from a revived one.
	s.client.CloseConn(st.Addr)
	s.markSilent(st, fmt.Errorf("%w: nothing answered for %v (pings every %v)",
		remoting.ErrTimeout, silence.Round(time.Millisecond), s.opts.PingInterval))
}

// markSilent takes a listed name server off the list at once, as DownAfter
// missed probes would. The next good probe lists it again.
func (s *Server) markSilent(st *namesrvState, why error) {
	s.mu.Lock()
	if !st.alive {
		s.mu.Unlock()
		return
	}
	st.failures = max(st.failures, s.opts.DownAfter-1)
	s.mu.Unlock()
	s.record(st, why)
}
