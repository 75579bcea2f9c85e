package client

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/zonemq/zonemq/internal/idc"
	"github.com/zonemq/zonemq/internal/remoting"
)

// ownQueues caches, per topic, the send queues of the route on own-IDC
// brokers: what an asynchronous send picks from without building a
// sendPlan. An entry is rebuilt when the topic's route changes.
type ownQueues struct {
	r      *route
	queues []writeQueue
}

// sendAsync sends out and calls done once with the outcome. In the usual
// case (the topic's route is cached, an own-IDC broker is healthy and
// already connected) the first attempt is written from the caller's
// goroutine and answered from the connection's response callback: no
// goroutine waits through the round trip, no context or timer besides the
// request's own timeout. Everything else — no cached route, an isolated
// broker, a connection still to dial, a failed first attempt — continues
// as SendSync would (deliverFrom) on a goroutine of its own. ctx is
// checked before the first attempt and bounds the retries; an attempt
// already written ends within SendAttemptTimeout (or ctx's deadline, if
// nearer) whatever happens to ctx.
func (s *sender) sendAsync(ctx context.Context, out *outgoing, done func(*SendResult, error)) {
	q, cn, ok := s.fastQueue(out.topic)
	if !ok || ctx.Err() != nil || s.c.cfg.AccessKey != "" {
		go func() { done(s.send(ctx, out, s.pickRoundRobin)) }()
		return
	}
	timeout := s.attemptTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	addr := q.broker.master()
	lat := s.latencyOf(addr)
	start := time.Now()
	w := s.watchSilence(ctx, out.topic, q, lat, timeout) // nil: no watch
	cn.InvokeAsync(sendRequest(out, q, true), timeout, func(resp *remoting.Command, err error) {
		w.answered()
		if err == nil {
			lat.observe(max(time.Since(start), time.Microsecond))
			var res *SendResult
			if res, err = sendResultOf(out, q, addr, resp); err == nil {
				s.recovered(q.broker.name)
				s.stats.stored(s.c.cfg.IDC, res.IDC, 1)
				done(res, nil)
				return
			}
		} else {
			if errors.Is(err, remoting.ErrTimeout) {
				// As core.invoke: our own timeout says the peer may be hung.
				s.c.rc.CloseConn(addr)
			}
			err = transportError(out.code.String(), addr, err)
		}
		// This callback runs on a goroutine of its own: retrying here
		// blocks no connection.
		fail := &SendError{Topic: out.topic}
		recordAttempt(fail, q, err)
		if !retryable(err) {
			s.stats.failures.Add(1)
			done(nil, fail)
			return
		}
		s.c.logger.Warn("send attempt failed; trying another broker", "topic", out.topic, "broker", q.broker.name,
			"addr", addr, "brokerIDC", q.broker.idc, "err", err)
		s.stats.retries.Add(1)
		s.isolate(q.broker.name, addr)
		s.c.routes.triggerRefresh()
		res, err := s.deliverFrom(ctx, out, s.pickRoundRobin, fail, map[string]bool{q.broker.name: true})
		if err != nil {
			s.stats.failures.Add(1)
			done(nil, err)
			return
		}
		s.stats.stored(s.c.cfg.IDC, res.IDC, 1)
		done(res, nil)
	})
}

// fastQueue picks the next own-IDC queue of topic round-robin, as
// pickRoundRobin would, with its open connection; ok is false when the
// general path must decide (no cached route, no own-IDC queue, an isolated
// broker, no connection yet, an auto-create queue).
func (s *sender) fastQueue(topic string) (writeQueue, *remoting.Conn, bool) {
	r := s.c.routes.cached(topic)
	if r == nil {
		return writeQueue{}, nil, false
	}
	var own *ownQueues
	if v, ok := s.own.Load(topic); ok && v.(*ownQueues).r == r {
		own = v.(*ownQueues)
	} else {
		own = &ownQueues{r: r}
		for _, q := range r.sendQueues() {
			if idc.Same(q.broker.idc, s.c.cfg.IDC) {
				own.queues = append(own.queues, q)
			}
		}
		s.own.Store(topic, own)
	}
	if len(own.queues) == 0 {
		return writeQueue{}, nil, false
	}
	q := own.queues[s.rr.Add(1)%uint64(len(own.queues))]
	if q.autoCreate || s.isIsolated(q.broker.name) {
		return writeQueue{}, nil, false
	}
	cn, ok := s.c.rc.ConnIfOpen(q.broker.master())
	return q, cn, ok
}

// silenceWatch is invokeWatched's check (suspect.go) for an asynchronous
// first attempt: if the broker has not answered after its suspicion delay,
// it is checked against another broker, and if it is silent its connection
// is closed, which fails the attempt at once (and the others in flight on
// it) so that they move on to another broker as a SendSync would.
type silenceWatch struct {
	timer  *time.Timer
	done   atomic.Bool
	cancel atomic.Pointer[context.CancelFunc] // the running check, if any
}

// watchSilence arms the watch, or returns nil when suspicion is off, the
// broker's usual answer time is not known yet, or it would come after the
// attempt's own timeout (as invokeWatched decides).
func (s *sender) watchSilence(ctx context.Context, topic string, q writeQueue, lat *brokerLatency, timeout time.Duration) *silenceWatch {
	if s.suspectAfter <= 0 || lat.load() == 0 {
		return nil
	}
	after := max(s.suspectAfter, 2*lat.load())
	if after >= timeout {
		return nil
	}
	w := &silenceWatch{}
	addr := q.broker.master()
	w.timer = time.AfterFunc(after, func() {
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		w.cancel.Store(&cancel)
		if w.done.Load() {
			return
		}
		if s.confirmSilent(cctx, topic, q.broker.name, addr, 3*lat.fastest()) && !w.done.Load() {
			s.c.logger.Warn("broker silent; closing its connection so the sends in flight move on", "broker", q.broker.name, "addr", addr)
			s.c.rc.CloseConn(addr)
		}
	})
	return w
}

// answered ends the watch: the attempt has its answer (or error).
func (w *silenceWatch) answered() {
	if w == nil {
		return
	}
	w.done.Store(true)
	w.timer.Stop()
	if c := w.cancel.Load(); c != nil {
		(*c)()
	}
}
