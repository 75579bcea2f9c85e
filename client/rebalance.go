package client

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/zonemq/zonemq/internal/idc"
	"github.com/zonemq/zonemq/internal/protocol"
)

// rebalanceLoop rebalances every RebalanceInterval (a safety net) and at
// once when asked: a broker's NOTIFY_CONSUMER_IDS_CHANGED, a route change, a
// broker connection closing, a failed pull. One goroutine runs every
// rebalance, so hand-overs never interleave.
func (pc *PushConsumer) rebalanceLoop(ctx context.Context) {
	everyTick(ctx, pc.cfg.RebalanceInterval, pc.rebalanceCh, pc.rebalance)
}

// useLocks reports whether queues are locked on their broker before use.
// Every clustering consumer locks (not only orderly ones, as in RocketMQ):
// a queue changes hands strictly in the order old owner commits → unlocks →
// new owner locks → reads the committed offset, so no queue is consumed by
// two consumers at once and a clean hand-over replays nothing.
func (pc *PushConsumer) useLocks() bool { return pc.cfg.MessageModel == Clustering }

// lock asks a broker to lock mqs for this consumer. A broker that does not
// know LOCK_BATCH_MQ grants every queue (the consumer then relies on the
// allocation alone, as RocketMQ's concurrent consumers do).
func (pc *PushConsumer) lock(ctx context.Context, addr string, mqs []MessageQueue) (map[MessageQueue]bool, error) {
	locked, err := pc.c.lockBatch(ctx, addr, pc.cfg.Group, mqs, !pc.cfg.Orderly)
	var re *ResponseError
	if errors.As(err, &re) && re.Code == CodeRequestCodeNotSupported {
		locked = map[MessageQueue]bool{}
		for _, mq := range mqs {
			locked[mq] = true
		}
		return locked, nil
	}
	return locked, err
}

// brokerDown drops at once every queue of a broker whose connection
// closed: they cannot be pulled, and their next owner (another IDC's
// consumer, if the broker no longer sees this one) may take them in a
// moment. Their offsets are committed if the broker can still be reached;
// they are not unlocked — the broker frees the locks of a consumer whose
// connection closed, and keeps them ours if we come straight back.
func (pc *PushConsumer) brokerDown(addr string) {
	pc.mu.Lock()
	if pc.closing {
		pc.mu.Unlock()
		return
	}
	var lost []*processQueue
	for mq, pq := range pc.queues {
		if pq.broker.readAddr() == addr {
			lost = append(lost, pq)
			delete(pc.queues, mq)
		}
	}
	pc.mu.Unlock()
	if len(lost) == 0 {
		return
	}
	for _, pq := range lost {
		pq.drop()
		pc.c.logger.Info("queue released: broker connection closed", "queue", pq.mq, "brokerIDC", pq.broker.idc)
	}
	pc.c.goLoop(func(ctx context.Context) {
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		pc.releaseQueues(rctx, lost, false)
	})
}

// rebalanceSoon asks for another rebalance shortly: a broker did not list
// us yet, or refused a lock another consumer is about to release.
func (pc *PushConsumer) rebalanceSoon() {
	time.AfterFunc(300*time.Millisecond, func() {
		if pc.c.ctx.Err() == nil {
			pc.triggerRebalance()
		}
	})
}

// errBrokerFailing stands for the consumer list of a broker whose last
// heartbeat got no answer; rebalance does not ask it.
var errBrokerFailing = errors.New("zonemq client: broker failing its heartbeats")

// brokerFailing reports whether addr's last heartbeat got no answer.
// A broker that answered with an error is still asked.
func (pc *PushConsumer) brokerFailing(addr string) bool {
	cn, open := pc.c.rc.ConnIfOpen(addr)
	pc.mu.Lock()
	defer pc.mu.Unlock()
	since, closing := pc.closingConns[cn]
	return pc.silent[addr] || (open && closing && time.Since(since) < closingHold)
}

// brokerView is one broker's answer to GET_CONSUMER_LIST_BY_GROUP.
type brokerView struct {
	ids []string
	err error
}

// rebalance computes the queues this consumer should hold and moves to
// that set. Clustering follows docs/architecture.md §2 flow 5: for each broker B
// with readable queues, B's queues are allocated over the consumers B
// reports that are eligible for B (idc.EligibleConsumers); a broker that
// cannot be asked contributes no queue, so its queues are released (another
// IDC's consumers, which can reach it, take them). Broadcasting takes every
// queue.
func (pc *PushConsumer) rebalance(ctx context.Context) {
	pc.rebalanceMu.Lock()
	defer pc.rebalanceMu.Unlock()
	pc.mu.Lock()
	closing := pc.closing
	pc.mu.Unlock()
	if closing {
		return
	}
	me := pc.c.id()
	want := map[MessageQueue]*brokerInfo{}
	keep := map[string]bool{} // topics with no route known: leave their queues alone
	routes := map[string]*route{}
	for _, topic := range pc.topics() {
		r := pc.c.routes.cached(topic)
		if r == nil {
			var err error
			if r, err = pc.c.routes.fetch(ctx, topic); err != nil {
				keep[topic] = true
				continue
			}
		}
		routes[topic] = r
	}

	views := map[string]*brokerView{}
	if pc.cfg.MessageModel == Clustering {
		for _, r := range routes {
			for _, rb := range r.readBrokers() {
				views[rb.broker.readAddr()] = nil
			}
		}
		addrs := make([]string, 0, len(views))
		for addr := range views {
			addrs = append(addrs, addr)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		for _, addr := range addrs {
			if pc.brokerFailing(addr) {
				// Its last heartbeat got no answer: asking would hold this
				// rebalance (and the hand-over a route change is waiting
				// for) for a request timeout behind a hung broker. Its
				// queues are left, as for any broker that cannot be asked;
				// its first answered heartbeat rebalances again.
				mu.Lock()
				views[addr] = &brokerView{err: errBrokerFailing}
				mu.Unlock()
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				ids, err := pc.c.consumerList(ctx, addr, pc.cfg.Group)
				mu.Lock()
				views[addr] = &brokerView{ids: ids, err: err}
				mu.Unlock()
			}()
		}
		wg.Wait()
	}
	if ctx.Err() != nil {
		return
	}

	notListed := false
	silent := pc.silentBrokers()
	for topic, r := range routes {
		for _, rb := range r.readBrokers() {
			first, last := 0, rb.queues
			if pc.cfg.MessageModel == Clustering {
				v := views[rb.broker.readAddr()]
				if v.err != nil {
					if isTransportError(v.err) || v.err == errBrokerFailing {
						pc.c.routes.hurry(suspectWindow)
					}
					pc.c.logger.Debug("broker unreachable; leaving its queues", "topic", topic, "broker", rb.broker.name, "err", v.err)
					continue
				}
				if !slices.Contains(v.ids, me) {
					notListed = true
				}
				eligible := idc.EligibleConsumers(rb.broker.idc, v.ids, idcAnswers(r, silent))
				first, last = idc.AllocateAveragely(rb.queues, eligible, me)
			}
			for q := first; q < last; q++ {
				want[MessageQueue{Topic: topic, BrokerName: rb.broker.name, QueueID: q}] = rb.broker
			}
		}
	}
	if notListed {
		// A broker that does not list us yet (it restarted, or our
		// heartbeat is in flight) allocates us nothing: announce ourselves
		// and look again shortly.
		pc.triggerHeartbeat()
		pc.rebalanceSoon()
	}
	pc.apply(ctx, want, keep)
}

// apply drops the queues no longer wanted (committing their offsets) and
// takes the new ones (locking them first in orderly mode).
func (pc *PushConsumer) apply(ctx context.Context, want map[MessageQueue]*brokerInfo, keep map[string]bool) {
	pc.mu.Lock()
	var drop []*processQueue
	for mq, pq := range pc.queues {
		if keep[mq.Topic] {
			continue
		}
		if b, ok := want[mq]; !ok || b.readAddr() != pq.broker.readAddr() {
			drop = append(drop, pq)
			delete(pc.queues, mq)
		}
	}
	var add []MessageQueue
	for mq := range want {
		if _, ok := pc.queues[mq]; !ok {
			add = append(add, mq)
		}
	}
	pc.mu.Unlock()

	// A silent broker's queues are let go at once and committed in the
	// background (if it answers again): waiting for it would hold the
	// queues this rebalance takes elsewhere for two request timeouts. They
	// are not unlocked, as in brokerDown: we may take them straight back
	// when the broker answers, and a late unlock would free our new lock.
	silent := pc.silentBrokers()
	var now []*processQueue
	var later []*processQueue
	for _, pq := range drop {
		if silent[pq.broker.readAddr()] {
			later = append(later, pq)
		} else {
			now = append(now, pq)
		}
	}
	if len(later) > 0 {
		for _, pq := range later {
			pq.drop()
			pc.c.logger.Info("queue released: broker silent", "queue", pq.mq, "brokerIDC", pq.broker.idc)
		}
		pc.c.goLoop(func(ctx context.Context) {
			rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			pc.releaseQueues(rctx, later, false)
		})
	}
	if len(now) > 0 {
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		pc.release(rctx, now)
		cancel()
		for _, pq := range now {
			pc.c.logger.Info("queue released", "queue", pq.mq, "brokerIDC", pq.broker.idc)
		}
	}
	if len(add) > 0 {
		pc.acquire(ctx, add, want)
	}
}

// release stops the queues, waits for their handlers (until ctx ends),
// commits their offsets and then unlocks them on the broker, so the next
// owner, whose lock succeeds only now, starts from the committed offset.
func (pc *PushConsumer) release(ctx context.Context, pqs []*processQueue) {
	pc.releaseQueues(ctx, pqs, pc.useLocks())
}

func (pc *PushConsumer) releaseQueues(ctx context.Context, pqs []*processQueue, unlock bool) {
	var wg sync.WaitGroup
	for _, pq := range pqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pq.drop()
			idle := make(chan struct{})
			go func() { pq.done.Wait(); close(idle) }()
			select {
			case <-idle:
			case <-ctx.Done():
				pc.c.logger.Warn("handlers still running at hand-over", "queue", pq.mq)
			}
			pc.commit(ctx, pq)
			if unlock {
				pc.unlockReleased(pq)
			}
		}()
	}
	wg.Wait()
}

// unlockRetryFor bounds how long a released queue's failed unlock is
// retried in the background.
const unlockRetryFor = 10 * time.Second

// unlockReleased frees the lock of a queue this consumer let go. Its next
// owner cannot lock it before (a broker keeps a live member's lock for its
// whole lease, a minute), so the unlock does not share the hand-over's
// deadline, which waiting for the handlers may have used up: it has a
// request timeout of its own, and one that fails is retried in the
// background for a while, unless this consumer takes the queue back. The
// retries hold rebalanceMu (tried, never waited for: Close holds it while
// it waits for the background work), so no rebalance can lock the queue
// again between the check and a late unlock that would free the new lock.
func (pc *PushConsumer) unlockReleased(pq *processQueue) {
	addr := pq.broker.readAddr()
	try := func(ctx context.Context) error {
		uctx, cancel := context.WithTimeout(ctx, pc.c.cfg.RequestTimeout)
		defer cancel()
		err := pc.c.unlockBatch(uctx, addr, pc.cfg.Group, []MessageQueue{pq.mq})
		if err != nil {
			pc.c.logger.Debug("unlock failed", "queue", pq.mq, "broker", addr, "err", err)
		}
		return err
	}
	if try(pc.c.ctx) == nil {
		return
	}
	pc.c.goLoop(func(ctx context.Context) {
		deadline := time.Now().Add(unlockRetryFor)
		for time.Now().Before(deadline) && sleepCtx(ctx, 200*time.Millisecond) {
			if !pc.rebalanceMu.TryLock() {
				continue // a rebalance (or Close) runs: look again after it
			}
			pc.mu.Lock()
			_, retaken := pc.queues[pq.mq]
			closing := pc.closing
			pc.mu.Unlock()
			done := retaken || closing || try(ctx) == nil
			pc.rebalanceMu.Unlock()
			if done {
				return
			}
		}
	})
}

// acquire takes the queues in add: per broker, in parallel, it locks them
// (orderly clustering), finds each one's start offset and starts it.
func (pc *PushConsumer) acquire(ctx context.Context, add []MessageQueue, want map[MessageQueue]*brokerInfo) {
	byBroker := map[string][]MessageQueue{}
	for _, mq := range add {
		addr := want[mq].readAddr()
		byBroker[addr] = append(byBroker[addr], mq)
	}
	var wg sync.WaitGroup
	for addr, mqs := range byBroker {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if pc.useLocks() {
				locked, err := pc.lock(ctx, addr, mqs)
				if err != nil {
					pc.c.logger.Debug("lock failed", "broker", addr, "err", err)
					pc.rebalanceSoon()
					return
				}
				var got []MessageQueue
				for _, mq := range mqs {
					if locked[mq] {
						got = append(got, mq)
					}
				}
				if len(got) < len(mqs) {
					// Another consumer holds them until it releases them.
					pc.rebalanceSoon()
				}
				mqs = got
			}
			for _, mq := range mqs {
				b := want[mq]
				start, err := pc.startOffset(ctx, b, mq)
				if err != nil {
					pc.c.logger.Warn("cannot start queue", "queue", mq, "err", err)
					pc.rebalanceSoon()
					continue
				}
				pc.startQueue(mq, b, start)
			}
		}()
	}
	wg.Wait()
}

// startQueue registers a new process queue and starts its goroutines.
func (pc *PushConsumer) startQueue(mq MessageQueue, b *brokerInfo, start int64) {
	sub := pc.subscription(mq.Topic)
	if sub == nil {
		return
	}
	pq := newProcessQueue(pc.c.ctx, mq, b, sub, start)
	if pc.useLocks() {
		pq.setLocked(true)
	}
	pc.mu.Lock()
	if pc.closing || pc.c.ctx.Err() != nil {
		pc.mu.Unlock()
		return
	}
	if _, dup := pc.queues[mq]; dup {
		pc.mu.Unlock()
		return
	}
	pc.queues[mq] = pq
	pq.done.Add(1)
	pc.mu.Unlock()
	pc.c.logger.Info("queue taken", "queue", mq, "brokerIDC", b.idc, "offset", start)
	go pc.pullLoop(pq)
	if pc.cfg.Orderly {
		pq.done.Add(1)
		go pc.orderlyLoop(pq)
	}
}

// startOffset is where a newly taken queue starts: the committed offset on
// its broker (in memory for broadcasting) or, for a group that has none,
// ConsumeFromWhere; retry queues always start at 0.
func (pc *PushConsumer) startOffset(ctx context.Context, b *brokerInfo, mq MessageQueue) (int64, error) {
	addr := b.readAddr()
	if pc.cfg.MessageModel == Clustering {
		off, err := pc.c.queryOffset(ctx, addr, pc.cfg.Group, mq)
		if err == nil && off >= 0 {
			return off, nil
		}
		if err != nil && !errors.Is(err, ErrNoOffset) {
			return 0, err
		}
	} else {
		pc.mu.Lock()
		off, ok := pc.local[mq]
		pc.mu.Unlock()
		if ok {
			return off, nil
		}
	}
	if len(mq.Topic) > len(protocol.RetryGroupPrefix) && mq.Topic[:len(protocol.RetryGroupPrefix)] == protocol.RetryGroupPrefix {
		return 0, nil
	}
	switch pc.cfg.ConsumeFromWhere {
	case ConsumeFromFirstOffset:
		return 0, nil
	case ConsumeFromTimestamp:
		ts := pc.cfg.ConsumeTimestamp
		if ts.IsZero() {
			ts = pc.startTime.Add(-30 * time.Minute)
		}
		return pc.c.searchOffset(ctx, addr, mq, ts)
	default:
		return pc.c.queueOffset(ctx, protocol.GetMaxOffset, addr, mq)
	}
}
