package client

import (
	"context"
	"errors"
	"sync"
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
// goroutine and its answer comes back through the connection (an
// asyncAttempt is its Waiter): no goroutine waits through the round trip,
// and neither a context nor a timer is made per send. Everything else — no
// cached route, an isolated broker, a connection still to dial, a failed
// first attempt — continues as SendSync would (deliverFrom) on a goroutine
// of its own. ctx is checked before the first attempt and bounds the
// retries; an attempt already written ends within SendAttemptTimeout (or
// ctx's deadline, if nearer) whatever happens to ctx. wg, when not nil, is
// released after done returns.
func (s *sender) sendAsync(ctx context.Context, out *outgoing, done func(*SendResult, error), wg *sync.WaitGroup) {
	if s.writeFirstAttempt(ctx, out, done, wg) {
		return
	}
	go func() {
		res, err := s.send(ctx, out, s.pickRoundRobin)
		finishAsync(done, wg, res, err)
	}()
}

// sendSync is SendSync: in the usual case (sendAsync's) the first attempt
// is written as an asynchronous send's and the caller waits for its
// outcome, so that no context, timer or failure record is made per send;
// otherwise it sends as deliver does. ctx ending while it waits returns at
// once; the attempt in flight ends on its own.
func (s *sender) sendSync(ctx context.Context, out *outgoing) (*SendResult, error) {
	outcome := make(chan syncOutcome, 1)
	if !s.writeFirstAttempt(ctx, out, func(res *SendResult, err error) { outcome <- syncOutcome{res, err} }, nil) {
		return s.send(ctx, out, s.pickRoundRobin)
	}
	select {
	case o := <-outcome:
		return o.res, o.err
	case <-ctx.Done():
		s.stats.failures.Add(1)
		return nil, s.stop(ctx, &SendError{Topic: out.topic})
	}
}

// syncOutcome is what sendSync waits for.
type syncOutcome struct {
	res *SendResult
	err error
}

// writeFirstAttempt writes out's first attempt in sendAsync's usual case
// and reports whether it did; done (and wg) then hear the outcome, retries
// included. It does nothing and reports false otherwise.
func (s *sender) writeFirstAttempt(ctx context.Context, out *outgoing, done func(*SendResult, error), wg *sync.WaitGroup) bool {
	q, cn, ok := s.fastQueue(out.topic)
	if !ok || ctx.Err() != nil || s.c.cfg.AccessKey != "" {
		return false
	}
	timeout := s.attemptTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	a := &asyncAttempt{s: s, ctx: ctx, out: out, q: q, addr: q.broker.master(), done: done, wg: wg}
	a.lat = s.latencyOf(a.addr)
	a.start = time.Now() // also the born time and the origin of the deadlines
	var slowAt time.Time
	if after := s.slowAfter(a.lat, timeout); after > 0 {
		slowAt = a.start.Add(after)
	}
	cn.Send(sendRequestAt(out, q, true, a.start), a.start.Add(timeout), slowAt, a)
	return true
}

// finishAsync tells done the outcome of an asynchronous send and releases
// wg.
func finishAsync(done func(*SendResult, error), wg *sync.WaitGroup, res *SendResult, err error) {
	if wg != nil {
		defer wg.Done()
	}
	done(res, err)
}

// slowAfter is when an attempt with no answer gets its broker checked
// (suspect.go), as invokeWatched decides: 0 when suspicion is off, the
// broker's usual answer time is not known yet, or the check would come
// after the attempt's own timeout.
func (s *sender) slowAfter(lat *brokerLatency, timeout time.Duration) time.Duration {
	if s.suspectAfter <= 0 || lat.load() == 0 {
		return 0
	}
	after := max(s.suspectAfter, 2*lat.load())
	if after >= timeout {
		return 0
	}
	return after
}

// asyncAttempt is the first attempt of an asynchronous send, the Waiter of
// its request: the connection tells it the answer, and asks it to check
// the broker when the answer is late (Slow, as invokeWatched's watch does
// for a synchronous send: a silent broker's connection is closed, which
// fails this attempt and the others in flight on it at once, so that they
// move on to another broker).
type asyncAttempt struct {
	s     *sender
	ctx   context.Context
	out   *outgoing
	q     writeQueue
	addr  string
	lat   *brokerLatency
	start time.Time
	done  func(*SendResult, error)
	wg    *sync.WaitGroup

	answered atomic.Bool
	cancel   atomic.Pointer[context.CancelFunc] // the running check, if any
}

// Answered takes the broker's answer. It runs on the goroutine that tells
// the connection's answers in turn: a failure is retried on a goroutine of
// its own.
func (a *asyncAttempt) Answered(resp *remoting.Command, err error) {
	a.answered.Store(true)
	if c := a.cancel.Load(); c != nil {
		(*c)()
	}
	s := a.s
	if err == nil {
		a.lat.observe(max(time.Since(a.start), time.Microsecond))
		var res *SendResult
		if res, err = sendResultOf(a.out, a.q, a.addr, resp); err == nil {
			s.recovered(a.q.broker.name)
			s.stats.stored(s.c.cfg.IDC, res.IDC, 1)
			finishAsync(a.done, a.wg, res, nil)
			return
		}
	} else {
		if errors.Is(err, remoting.ErrTimeout) {
			// As core.invoke: our own timeout says the peer may be hung.
			s.c.rc.CloseConn(a.addr)
		}
		err = transportError(a.out.code.String(), a.addr, err)
	}
	go a.retry(err)
}

// retry goes on after a failed first attempt as SendSync would.
func (a *asyncAttempt) retry(err error) {
	s, out, q := a.s, a.out, a.q
	fail := &SendError{Topic: out.topic}
	recordAttempt(fail, q, err)
	if !retryable(err) {
		s.stats.failures.Add(1)
		finishAsync(a.done, a.wg, nil, fail)
		return
	}
	var next *writeQueue
	redirected := map[string]bool{}
	if nq, ok := s.newMaster(a.ctx, out.topic, q, err, redirected); ok {
		// As deliverFrom: the group's new master, before any other group.
		s.c.logger.Info("send refused by a broker that is no longer master; retrying at the new master", "topic", out.topic,
			"broker", q.broker.name, "old", a.addr, "new", nq.broker.master())
		next = &nq
	} else {
		// The send goes on elsewhere: information, not a warning (the
		// application hears of it only if every broker fails).
		s.c.logger.Info("send moved to another broker", "topic", out.topic, "from", q.broker.name,
			"addr", a.addr, "brokerIDC", q.broker.idc, "why", err)
		s.stats.retries.Add(1)
		s.isolate(q.broker.name, a.addr)
		s.c.routes.triggerRefresh()
	}
	res, err := s.deliverFrom(a.ctx, out, s.pickRoundRobin, fail, map[string]bool{q.broker.name: true}, next, redirected)
	if err != nil {
		s.stats.failures.Add(1)
		finishAsync(a.done, a.wg, nil, err)
		return
	}
	s.stats.stored(s.c.cfg.IDC, res.IDC, 1)
	finishAsync(a.done, a.wg, res, nil)
}

// Slow checks a broker that has not answered the attempt in time: if it is
// silent too for another broker's check, its connection is closed.
func (a *asyncAttempt) Slow() {
	if a.answered.Load() {
		return
	}
	cctx, cancel := context.WithCancel(a.ctx)
	defer cancel()
	a.cancel.Store(&cancel)
	if a.answered.Load() {
		return
	}
	s := a.s
	if s.confirmSilent(cctx, a.out.topic, a.q.broker.name, a.addr, 3*a.lat.fastest()) && !a.answered.Load() {
		s.c.logger.Warn("broker silent; closing its connection so the sends in flight move on", "broker", a.q.broker.name, "addr", a.addr)
		s.c.rc.CloseConn(a.addr)
	}
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
