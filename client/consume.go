package client

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
)

// consumeRequest is a batch of one queue's messages for a handler.
type consumeRequest struct {
	pq   *processQueue
	msgs []*MessageExt
}

// pullLoop pulls one queue with long polling until the queue is dropped.
// Errors back off briefly (PullBackoff doubling to 1 s) and ask for a route
// refresh and a rebalance: a broker that stopped answering should lose its
// queues to rebalance quickly, not keep this loop spinning.
func (pc *PushConsumer) pullLoop(pq *processQueue) {
	defer pq.done.Done()
	backoff := pc.cfg.PullBackoff
	needLock := pc.useLocks()
	for pq.ctx.Err() == nil {
		if pq.cached() >= pc.cfg.MaxCachedMessages {
			sleepCtx(pq.ctx, 20*time.Millisecond) // flow control: the handlers are behind
			continue
		}
		if needLock && !pq.lockValid(pc.lockMaxAge()) {
			sleepCtx(pq.ctx, 100*time.Millisecond)
			continue
		}
		commit := int64(-1)
		if pc.cfg.MessageModel == Clustering {
			if off := pq.commitOffset(); off > 0 {
				commit = off
			}
		}
		res, err := pc.c.pull(pq.ctx, pq.broker, pullRequest{
			group:        pc.cfg.Group,
			mq:           pq.mq,
			offset:       pq.next(),
			maxNums:      pc.cfg.PullBatchSize,
			commitOffset: commit,
			suspend:      pc.cfg.LongPollTimeout,
			sub:          pq.sub,
		}, pc.cfg.LongPollTimeout+5*time.Second)
		if err != nil {
			if pq.ctx.Err() != nil {
				return
			}
			pc.pullFailed(pq, err)
			sleepCtx(pq.ctx, backoff)
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = pc.cfg.PullBackoff
		switch res.Status {
		case PullFound:
			for _, m := range res.Messages {
				restoreRetryTopic(m)
			}
			if !pq.put(res.Messages, res.NextBeginOffset) {
				return
			}
			if !pc.cfg.Orderly {
				pc.dispatch(pq, res.Messages)
			}
		case PullOffsetIllegal:
			pc.c.logger.Warn("pull offset outside the queue; moving on", "queue", pq.mq, "offset", pq.next(), "next", res.NextBeginOffset)
			pq.setNext(res.NextBeginOffset)
		default:
			pq.setNext(res.NextBeginOffset)
		}
	}
}

func (pc *PushConsumer) pullFailed(pq *processQueue, err error) {
	var re *ResponseError
	switch {
	case errors.As(err, &re) && (re.Code == CodeSubscriptionNotExist || re.Code == CodeSubscriptionNotLatest):
		pc.triggerHeartbeat()
	case errors.Is(err, ErrTimeout) || errors.Is(err, ErrUnreachable):
		pc.c.routes.triggerRefresh()
		pc.triggerRebalance()
	}
	pc.c.logger.Debug("pull failed", "queue", pq.mq, "broker", pq.broker.readAddr(), "err", err)
}

// restoreRetryTopic gives a redelivered message its original topic back.
func restoreRetryTopic(m *MessageExt) {
	if !strings.HasPrefix(m.Topic, protocol.RetryGroupPrefix) {
		return
	}
	if t := m.Properties[protocol.PropertyRetryTopic]; t != "" {
		m.Topic = t
	}
}

// dispatch hands a pull's messages to the consume goroutines in batches of
// ConsumeBatchSize. It blocks while they are all busy, which slows the pull
// loop down to the handlers' pace.
func (pc *PushConsumer) dispatch(pq *processQueue, msgs []*MessageExt) {
	for len(msgs) > 0 {
		n := min(len(msgs), pc.cfg.ConsumeBatchSize)
		if !pc.submit(&consumeRequest{pq: pq, msgs: msgs[:n]}) {
			return
		}
		msgs = msgs[n:]
	}
}

func (pc *PushConsumer) submit(req *consumeRequest) bool {
	req.pq.done.Add(1)
	select {
	case pc.consumeCh <- req:
		return true
	case <-req.pq.ctx.Done():
		req.pq.done.Done()
		return false
	}
}

// consumeLoop is one of ConsumeGoroutines workers of concurrent mode.
func (pc *PushConsumer) consumeLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case req := <-pc.consumeCh:
			pc.consumeConcurrently(ctx, req)
		}
	}
}

func (pc *PushConsumer) consumeConcurrently(ctx context.Context, req *consumeRequest) {
	defer req.pq.done.Done()
	pq := req.pq
	// A queue dropped since this batch was handed over still consumes it:
	// its hand-over waits for the batches in flight, and commits after
	// them. Skipping one would leave a hole below messages that other
	// batches did consume, and the next owner, reading from the hole,
	// would deliver those again.
	for _, run := range pc.byHandler(req.msgs) {
		if pc.callHandler(ctx, run.h, run.msgs) == ConsumeSuccess {
			pq.markDone(run.msgs)
			continue
		}
		if pc.cfg.MessageModel == Broadcasting {
			// RocketMQ has no redelivery in broadcasting mode.
			pc.c.logger.Warn("handler asked to retry; broadcasting does not redeliver", "queue", pq.mq, "count", len(run.msgs))
			pq.markDone(run.msgs)
			continue
		}
		var failed []*MessageExt
		for _, m := range run.msgs {
			if err := pc.sendBack(ctx, pq, m, pc.cfg.RetryDelayLevel); err != nil {
				pc.c.logger.Warn("cannot send a message back for retry; retrying here", "msgId", m.MsgID, "err", err)
				failed = append(failed, m)
				continue
			}
			pq.markDone([]*MessageExt{m})
		}
		if len(failed) > 0 && !pq.isDropped() {
			// Keep them in the queue (so the offset stays below them) and
			// try them again here shortly.
			retry := &consumeRequest{pq: pq, msgs: failed}
			pq.done.Add(1)
			time.AfterFunc(time.Second, func() {
				defer pq.done.Done()
				for _, m := range failed {
					m.ReconsumeTimes++
				}
				pc.submit(retry)
			})
		}
	}
}

type handlerRun struct {
	h    Handler
	msgs []*MessageExt
}

// byHandler splits msgs into runs that go to one handler: a retry queue
// mixes messages of several original topics.
func (pc *PushConsumer) byHandler(msgs []*MessageExt) []handlerRun {
	var runs []handlerRun
	var last *subscription
	for _, m := range msgs {
		s := pc.handlerFor(m.Topic)
		if len(runs) > 0 && s == last {
			runs[len(runs)-1].msgs = append(runs[len(runs)-1].msgs, m)
			continue
		}
		last = s
		var h Handler
		if s != nil {
			h = s.handler
		}
		runs = append(runs, handlerRun{h: h, msgs: []*MessageExt{m}})
	}
	return runs
}

// handlerFor is the subscription whose handler gets a message of topic: the
// topic's own, or (for a redelivered message whose topic is no longer
// subscribed) the first by topic name.
func (pc *PushConsumer) handlerFor(topic string) *subscription {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if s := pc.subs[topic]; s != nil && s.handler != nil {
		return s
	}
	var first *subscription
	for _, s := range pc.subs {
		if s.handler != nil && (first == nil || s.topic < first.topic) {
			first = s
		}
	}
	return first
}

// callHandler runs h; a panic counts as ConsumeRetryLater.
func (pc *PushConsumer) callHandler(ctx context.Context, h Handler, msgs []*MessageExt) (res ConsumeResult) {
	if h == nil {
		return ConsumeSuccess
	}
	defer func() {
		if r := recover(); r != nil {
			pc.c.logger.Error("handler panicked; the messages will be retried", "panic", r)
			res = ConsumeRetryLater
		}
	}()
	return h(ctx, msgs)
}

// orderlyLoop consumes one queue strictly in order: one handler call at a
// time, only while the broker lock is held (clustering). A batch the handler
// asks to retry is retried in place after OrderlySuspendTime; after
// MaxReconsumeTimes it goes to the dead-letter queue.
func (pc *PushConsumer) orderlyLoop(pq *processQueue) {
	defer pq.done.Done()
	needLock := pc.useLocks()
	for pq.ctx.Err() == nil {
		batch := pq.head(pc.cfg.ConsumeBatchSize)
		if len(batch) == 0 {
			select {
			case <-pq.ctx.Done():
				return
			case <-pq.arrived:
			}
			continue
		}
		if needLock && !pq.lockValid(pc.lockMaxAge()) {
			sleepCtx(pq.ctx, 100*time.Millisecond)
			continue
		}
		res := ConsumeSuccess
		for _, run := range pc.byHandler(batch) {
			if res = pc.callHandler(pc.c.ctx, run.h, run.msgs); res != ConsumeSuccess {
				break
			}
		}
		if res == ConsumeSuccess {
			pq.markDone(batch)
			continue
		}
		var dead []*MessageExt
		for _, m := range batch {
			m.ReconsumeTimes++
			if m.ReconsumeTimes >= pc.cfg.MaxReconsumeTimes {
				dead = append(dead, m)
			}
		}
		for _, m := range dead {
			if err := pc.sendBack(pc.c.ctx, pq, m, -1); err != nil {
				pc.c.logger.Warn("cannot move a message to the dead-letter queue; retrying it", "msgId", m.MsgID, "err", err)
				continue
			}
			pq.markDone([]*MessageExt{m})
		}
		sleepCtx(pq.ctx, pc.cfg.OrderlySuspendTime)
	}
}

// lockMaxAge is how long a lock counts as held without renewal.
func (pc *PushConsumer) lockMaxAge() time.Duration { return 3 * pc.cfg.LockRenewInterval }

// lockLoop renews the locks of every held queue, 1 s after start and every
// LockRenewInterval.
func (pc *PushConsumer) lockLoop(ctx context.Context) {
	if !sleepCtx(ctx, time.Second) {
		return
	}
	t := time.NewTicker(pc.cfg.LockRenewInterval)
	defer t.Stop()
	for {
		pc.renewLocks(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (pc *PushConsumer) renewLocks(ctx context.Context) {
	byBroker := map[string][]*processQueue{}
	pc.mu.Lock()
	for _, pq := range pc.queues {
		byBroker[pq.broker.readAddr()] = append(byBroker[pq.broker.readAddr()], pq)
	}
	pc.mu.Unlock()
	var wg sync.WaitGroup
	for addr, pqs := range byBroker {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mqs := make([]MessageQueue, len(pqs))
			for i, pq := range pqs {
				mqs[i] = pq.mq
			}
			locked, err := pc.lock(ctx, addr, mqs)
			if err != nil {
				pc.c.logger.Debug("lock renewal failed", "broker", addr, "err", err)
				return
			}
			lost := false
			for _, pq := range pqs {
				if !locked[pq.mq] && pq.lockValid(pc.lockMaxAge()) {
					pc.c.logger.Warn("queue lock lost", "queue", pq.mq)
					lost = true
				}
				pq.setLocked(locked[pq.mq])
			}
			if lost {
				pc.rebalanceSoon()
			}
		}()
	}
	wg.Wait()
}
