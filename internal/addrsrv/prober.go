package addrsrv

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// probeCode is the request a probe sends. GET_BROKER_CLUSTER_INFO is a real
// read of the name server's route registry — a process that accepts
// connections but whose registry is stuck fails it — and every RocketMQ name
// server (Java too) answers it; its reply is small (one entry per broker),
// unlike GET_ALL_TOPIC_LIST's. Any well-formed response counts as alive, even
// an error code: the process is reading and answering requests.
const probeCode = protocol.GetBrokerClusterInfo

// namesrvState is the prober's view of one name server. Namesrv and wake are
// fixed; the other fields are guarded by Server.mu, except watched, which only
// that name server's probe loop touches.
type namesrvState struct {
	Namesrv
	// wake makes the probe loop probe early: the connection to the name
	// server closed from its side, most likely because the process died
	// (waitNextProbe decides whether to act on it).
	wake chan struct{}

	probed    bool // a probe has completed; before that the state is unknown
	alive     bool
	failures  int // consecutive failed probes
	lastProbe time.Time
	lastErr   string
	since     time.Time // when alive last changed

	watched *remoting.Conn // the connection whose close wakes the loop

	ping pingState // pinger.go
}

// listableLocked reports whether the name server belongs in the list: alive,
// or not probed yet. Caller holds Server.mu.
func (st *namesrvState) listableLocked() bool {
	return !st.probed || st.alive
}

// probeLoop probes one name server every ProbeInterval, and at once when its
// connection closes from the far side, until ctx ends. Each name server has
// its own loop so a hung one delays nobody else.
func (s *Server) probeLoop(ctx context.Context, st *namesrvState) {
	ticker := time.NewTicker(s.opts.ProbeInterval)
	defer ticker.Stop()
	var lastEarly time.Time
	for {
		start := time.Now()
		err := s.probe(ctx, st)
		if ctx.Err() != nil {
			return
		}
		s.metrics.probed(st, time.Since(start), err)
		s.record(st, err)
		if err != nil && s.stillListedAfterMiss(st) {
			// A miss on a listed name server is confirmed (or refuted) at
			// once rather than a whole interval later: DownAfter misses
			// then take about DownAfter probe timeouts, so a hung name
			// server leaves the list within ~2 s of hanging, not 3.
			if !sleepCtx(ctx, s.opts.ProbeInterval/10) {
				return
			}
			ticker.Reset(s.opts.ProbeInterval)
			continue
		}
		early, ok := s.waitNextProbe(ctx, st, ticker, err == nil, lastEarly)
		if !ok {
			return
		}
		if early {
			lastEarly = time.Now()
		}
	}
}

// waitNextProbe waits for the next tick, or for the probe connection to be
// closed by the far side, and reports whether the wait ended early and
// whether to go on probing at all.
//
// A close wakes the loop only after a successful probe (then it is news: a
// name server that answered has likely died) and at most once per interval.
// Otherwise a peer that accepts connections and drops them at once, or drops
// them after every answer, would turn the loop into a busy one.
func (s *Server) waitNextProbe(ctx context.Context, st *namesrvState, ticker *time.Ticker, lastOK bool, lastEarly time.Time) (early, ok bool) {
	for {
		select {
		case <-ctx.Done():
			return false, false
		case <-ticker.C:
			return false, true
		case <-st.wake:
			if lastOK && time.Since(lastEarly) >= s.opts.ProbeInterval {
				// Keep at least one interval between this early probe and
				// the next, so DownAfter misses still span real time.
				ticker.Reset(s.opts.ProbeInterval)
				return true, true
			}
		}
	}
}

// probe sends one request to the name server and waits up to probeTimeout.
func (s *Server) probe(ctx context.Context, st *namesrvState) error {
	pctx, cancel := context.WithTimeout(ctx, s.probeTimeout)
	defer cancel()
	err := s.probeOnce(pctx, st)
	if errors.Is(err, errStaleConn) {
		// The pooled connection was already closed (it can close between
		// being dialled and being pooled); that says nothing about the
		// name server, so ask again on a fresh one within the same budget.
		err = s.probeOnce(pctx, st)
	}
	if errors.Is(err, remoting.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: no answer to %s within %v", remoting.ErrTimeout, probeCode, s.probeTimeout)
	}
	return err
}

// errStaleConn marks a probe that failed only because the pooled connection
// it reused had closed before the request was written.
var errStaleConn = errors.New("pooled connection already closed")

func (s *Server) probeOnce(ctx context.Context, st *namesrvState) error {
	_, reused := s.client.ConnIfOpen(st.Addr)
	cn, err := s.client.Conn(ctx, st.Addr)
	if err != nil {
		return err
	}
	s.watch(st, cn)
	select {
	case <-cn.Done():
		s.client.CloseConn(st.Addr)
		if reused {
			return fmt.Errorf("%w: %v", errStaleConn, cn.Err())
		}
		return fmt.Errorf("connection closed at once: %w", cn.Err())
	default:
	}
	_, err = cn.Invoke(ctx, remoting.NewRequest(int32(probeCode), nil, nil))
	if err == nil {
		return nil
	}
	// Whatever went wrong, do not reuse this connection: after a timeout the
	// peer may be hung with our request in its buffer, and the next probe
	// must dial afresh to tell a dead process from a slow one.
	s.client.CloseConn(st.Addr)
	return err
}

// watch arranges for the probe loop to wake when cn is closed by the peer or
// the network; the prober's own closes do not wake it.
func (s *Server) watch(st *namesrvState, cn *remoting.Conn) {
	if st.watched == cn {
		return
	}
	st.watched = cn
	cn.OnClose(func(c *remoting.Conn) {
		if errors.Is(c.Err(), remoting.ErrConnClosed) {
			return // closed on our side (CloseConn, Shutdown)
		}
		select {
		case st.wake <- struct{}{}:
		default:
		}
	})
}

// record applies one probe's outcome and logs a change of state. The first
// probe decides an unknown state at once; after that DownAfter consecutive
// failures mark a name server down and one success marks it up.
func (s *Server) record(st *namesrvState, probeErr error) {
	now := time.Now()
	s.mu.Lock()
	wasProbed, wasAlive := st.probed, st.alive
	st.probed = true
	st.lastProbe = now
	if probeErr == nil {
		st.heardLocked(now)
		st.failures = 0
		st.lastErr = ""
		st.alive = true
	} else {
		st.failures++
		st.lastErr = probeErr.Error()
		if !wasProbed || st.failures >= s.opts.DownAfter {
			st.alive = false
		}
	}
	alive, failures, lastSince := st.alive, st.failures, st.since
	changed := !wasProbed || wasAlive != alive
	if changed {
		st.since = now
	}
	s.mu.Unlock()

	if !changed {
		return
	}
	log := s.logger.With("namesrv", st.Addr, "namesrvIDC", st.IDC)
	switch {
	case !wasProbed && alive:
		log.Info("name server up: first probe answered")
	case !wasProbed:
		log.Warn("name server down: first probe failed", "err", probeErr)
	case alive:
		log.Info("name server up again: probe answered", "downFor", now.Sub(lastSince).Round(time.Millisecond))
	default:
		log.Warn("name server down", "failedProbes", failures, "err", probeErr,
			"upFor", now.Sub(lastSince).Round(time.Millisecond))
	}
}

// stillListedAfterMiss reports whether st failed its last probe but is still
// listed (alive with fewer than DownAfter misses).
func (s *Server) stillListedAfterMiss(st *namesrvState) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return st.probed && st.alive && st.failures > 0
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
