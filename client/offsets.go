package client

import (
	"context"
	"sync"
)

// commitLoop commits every held queue's offset every OffsetCommitInterval.
// In clustering mode offsets live on the broker that owns the queue; in
// broadcasting mode in this consumer's memory (RocketMQ keeps them in a
// local file; zonemq keeps none, so a restarted broadcasting consumer starts
// again at ConsumeFromWhere).
func (pc *PushConsumer) commitLoop(ctx context.Context) {
	everyTick(ctx, pc.cfg.OffsetCommitInterval, nil, pc.commitAll)
}

// commitAll commits every held queue's offset, in parallel.
func (pc *PushConsumer) commitAll(ctx context.Context) {
	pc.mu.Lock()
	pqs := make([]*processQueue, 0, len(pc.queues))
	for _, pq := range pc.queues {
		pqs = append(pqs, pq)
	}
	pc.mu.Unlock()
	var wg sync.WaitGroup
	for _, pq := range pqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pc.commit(ctx, pq)
		}()
	}
	wg.Wait()
}

// commit stores pq's committable offset if it moved since the last commit.
func (pc *PushConsumer) commit(ctx context.Context, pq *processQueue) {
	off := pq.commitOffset()
	pq.mu.Lock()
	same := off < 0 || off == pq.committed
	pq.mu.Unlock()
	if same {
		return
	}
	if pc.cfg.MessageModel == Broadcasting {
		pc.mu.Lock()
		pc.local[pq.mq] = off
		pc.mu.Unlock()
	} else if err := pc.c.updateOffset(ctx, pq.broker.readAddr(), pc.cfg.Group, pq.mq, off); err != nil {
		if ctx.Err() == nil {
			pc.c.logger.Debug("offset commit failed", "queue", pq.mq, "offset", off, "err", err)
		}
		return
	}
	pq.mu.Lock()
	pq.committed = off
	pq.mu.Unlock()
}
