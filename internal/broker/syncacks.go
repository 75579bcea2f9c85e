package broker

import (
	"context"
	"runtime/debug"
	"sync"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/store"
)

// syncAcks answers the sends that must wait before SEND_OK: for the fsync
// covering them (--flush sync), for the in-sync replicas' acknowledgement
// (--replication sync), or both. The read goroutine of a connection appends
// the plain sends one socket read brought (store.AppendEach: one write, no
// wait) and hands their answers here as one ackGroup; the store's flusher
// fsyncs whatever was written while its previous fsync ran (group commit),
// and it and the replicas' acknowledgements wake one goroutine, which queues
// the answers of every group now covered to their connections and writes
// each connection once. Per fsync that is one wake-up and one write per
// connection, instead of a goroutine, a timer, a wake-up and a write per
// send; and the read goroutine never waits, so the next sends of a
// connection join the next fsync.
//
// The guarantees are those of a send waiting on its own goroutine: a group
// is answered SEND_OK only once store.FlushedOffset covers its last record
// (with --flush sync) and replicated says so (the in-sync replicas hold it,
// and the controller's lease is valid). If the fsync fails, or takes longer
// than store.DefaultSyncFlushTimeout, its sends are answered
// FLUSH_DISK_TIMEOUT (stored, not known durable); replicas that do not
// confirm within ReplicaAckTimeout get them FLUSH_SLAVE_TIMEOUT.
type syncAcks struct {
	s         *Server
	syncFlush bool          // --flush sync: wait for the fsync first
	wake      chan struct{} // cap 1: an fsync ended, replicas acknowledged, or a group arrived

	mu      sync.Mutex
	pending []*ackGroup // waiting, in no particular order
	spare   []*ackGroup // the answering goroutine's scratch, swapped with pending

	groups sync.Pool // *ackGroup, reused
}

// ackGroup is the answers to the plain sends one connection's read
// goroutine stored with one append. Until answered it holds one entry of the
// broker's shutdown gate (so Shutdown waits for it), one count in
// writesInFlight (so a switchover waits for it) and one token of its
// connection's pending budget per send.
type ackGroup struct {
	c      *remoting.Conn
	k      *inlineSends // the connection's; returns the tokens
	end    int64        // the commit-log offset that must be durable
	stored time.Time    // for the timeouts
	reqs   []*remoting.Command
	resps  []*remoting.Command
	start  []time.Time // when each request was read, for the send latency

	// The verdict, set when the group is taken to be answered.
	flushTimeout bool  // not known durable: FLUSH_DISK_TIMEOUT
	err          error // not acknowledged (replicas, lease): the refusal
}

// newSyncAcks returns the answerer of the sends that wait; run is its loop.
func newSyncAcks(s *Server) *syncAcks {
	return &syncAcks{s: s, syncFlush: s.opts.Flush == store.FlushSync, wake: make(chan struct{}, 1)}
}

// flushed is the store's OnFlush hook: it runs on the flusher goroutine, so
// it only wakes the answering goroutine, and the next fsync can start at
// once.
func (a *syncAcks) flushed(int64) { a.signal() }

// signal wakes the answering goroutine without blocking; the replicas'
// acknowledgements call it too (replication.signalAcks).
func (a *syncAcks) signal() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// group returns an empty group for c's sends stored up to end.
func (a *syncAcks) group(c *remoting.Conn, k *inlineSends, end int64) *ackGroup {
	g, _ := a.groups.Get().(*ackGroup)
	if g == nil {
		g = &ackGroup{}
	}
	g.c, g.k, g.end, g.stored = c, k, end, time.Now()
	return g
}

// add queues g. The caller has entered the shutdown gate and counted a
// write in flight for it; answering g undoes both.
func (a *syncAcks) add(g *ackGroup) {
	a.mu.Lock()
	a.pending = append(a.pending, g)
	a.mu.Unlock()
	// An fsync that ended before the append above may have woken the loop
	// before it could see g: look at the durable offset only now. (The
	// flusher moves it before it signals, and the loop reads it after it
	// took mu, so either the loop sees g or this sees the offset.) Without
	// sync flush the replicas may have acknowledged already: look at once.
	if !a.syncFlush || a.s.store.FlushedOffset() >= g.end || a.s.store.FlushFailure() != nil {
		a.signal()
	}
}

// run answers groups until ctx ends: after every fsync and acknowledgement,
// and on a tick that finds the groups whose wait is overdue (a hung disk or
// replica must not leave clients without an answer).
func (a *syncAcks) run(ctx context.Context) {
	every := store.DefaultSyncFlushTimeout
	if a.s.opts.Replication == ReplicationSync {
		every = min(every, a.s.opts.ReplicaAckTimeout)
	}
	tick := time.NewTicker(max(every/5, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.wake:
		case <-tick.C:
		}
		a.answer()
	}
}

// answer answers every group whose wait is over, writing each connection
// once, and moves what consumers may read with it (replication_confirm.go).
func (a *syncAcks) answer() {
	a.s.repl.advanceConfirmed()
	a.s.noteVisible()
	flushed := a.s.store.FlushedOffset()
	failed := a.s.store.FlushFailure() != nil
	now := time.Now()
	a.mu.Lock()
	ready, keep := a.spare[:0], a.pending[:0]
	for _, g := range a.pending {
		if a.decide(g, flushed, failed, now) {
			ready = append(ready, g)
		} else {
			keep = append(keep, g)
		}
	}
	clear(a.pending[len(keep):])
	a.pending = keep
	a.mu.Unlock()
	for i, g := range ready {
		a.answerGroup(g, now)
		// Write a connection once, after its last group of this round.
		last := true
		for _, h := range ready[i+1:] {
			if h.c == g.c {
				last = false
				break
			}
		}
		if last {
			if err := g.c.FlushQueued(); err != nil {
				a.s.logger.Debug("writing send responses failed", "peer", g.c.RemoteAddr(), "err", err)
			}
		}
	}
	for _, g := range ready {
		a.release(g)
	}
	clear(ready)
	a.spare = ready[:0]
}

// decide reports whether g can be answered now, and sets its verdict.
func (a *syncAcks) decide(g *ackGroup, flushed int64, failed bool, now time.Time) bool {
	if a.syncFlush && g.end > flushed {
		if failed || now.Sub(g.stored) >= store.DefaultSyncFlushTimeout {
			g.flushTimeout = true
			return true
		}
		return false
	}
	done, err := a.s.repl.replicated(g.end)
	if !done && now.Sub(g.stored) >= a.s.opts.ReplicaAckTimeout {
		done, err = true, a.s.repl.replicaTimeout(g.end)
	}
	g.err = err
	return done
}

// answerGroup queues g's answers: as built, or FLUSH_DISK_TIMEOUT, or the
// refusal of its verdict.
func (a *syncAcks) answerGroup(g *ackGroup, now time.Time) {
	for i, req := range g.reqs {
		resp := g.resps[i]
		switch {
		case g.flushTimeout:
			resp.Code = int32(protocol.FlushDiskTimeout)
		case g.err != nil:
			resp = a.s.putErrorResponse(req, "", g.err)
		}
		a.s.metrics.sendDone(g.c, req, resp, now.Sub(g.start[i]))
		if err := g.c.QueueResponse(req, resp); err != nil {
			a.s.logger.Debug("queueing a send response failed", "peer", g.c.RemoteAddr(), "err", err)
		}
	}
}

// release returns g's tokens, gate entry and write in flight, and g to the
// pool.
func (a *syncAcks) release(g *ackGroup) {
	g.k.returnTokens(len(g.reqs))
	a.s.writesInFlight.Add(-1)
	a.s.gate.leave()
	clear(g.reqs)
	clear(g.resps)
	g.c, g.k, g.flushTimeout, g.err = nil, nil, false, nil
	g.reqs, g.resps, g.start = g.reqs[:0], g.resps[:0], g.start[:0]
	a.groups.Put(g)
}

// serveAside serves a send that must wait for its fsync on the read
// goroutine otherwise (a batch, a transaction half, a timer, delay or retry
// message: their stores wait in their own services) on a goroutine of its
// own, so the connection's other sends keep joining group commits, and
// answers it from there. It returns nil: the read goroutine answers nothing.
func (s *Server) serveAside(c *remoting.Conn, req *remoting.Command, k *inlineSends, serve func(context.Context) *remoting.Command) *remoting.Command {
	if !s.gate.enter() {
		return errorf(req, protocol.ServiceNotAvailable, "broker %s is shutting down", s.opts.BrokerName)
	}
	s.takeToken(c, k)
	start := time.Now()
	go func() {
		defer s.gate.leave()
		defer k.returnTokens(1)
		resp := s.serveRecovered(c, req, serve)
		if resp == nil {
			return
		}
		s.metrics.sendDone(c, req, resp, time.Since(start))
		if err := c.QueueResponse(req, resp); err != nil {
			s.logger.Debug("queueing a send response failed", "peer", c.RemoteAddr(), "err", err)
			return
		}
		if err := c.FlushQueued(); err != nil {
			s.logger.Debug("writing a send response failed", "peer", c.RemoteAddr(), "err", err)
		}
	}()
	return nil
}

// serveRecovered runs serve; a panic costs the request a SYSTEM_ERROR, as
// in remoting's dispatch, never the broker.
func (s *Server) serveRecovered(c *remoting.Conn, req *remoting.Command, serve func(context.Context) *remoting.Command) (resp *remoting.Command) {
	defer func() {
		if r := recover(); r != nil {
			s.logger.Error("send handler panicked", "code", req.Code, "peer", c.RemoteAddr(), "panic", r, "stack", string(debug.Stack()))
			resp = errorf(req, protocol.SystemError, "internal error serving request code %d", req.Code)
		}
	}()
	return serve(s.remoting.Context())
}
