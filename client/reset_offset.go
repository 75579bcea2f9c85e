package client

import (
	"context"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// resetWait bounds how long a reset waits for the handlers of a queue's
// messages pulled before the reset; it happens on its own goroutine.
const resetWait = 5 * time.Second

// handleResetConsumerClientOffset serves a broker's
// RESET_CONSUMER_CLIENT_OFFSET (`zonemq admin offset reset`, `mqadmin
// resetOffsetByTime`): the broker set the group's offsets of its queues of a
// topic, and every queue of them this consumer holds restarts there.
func (pc *PushConsumer) handleResetConsumerClientOffset(_ context.Context, cn *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.ResetOffsetRequestHeader
	if err := h.SetExt(req.ExtFields); err != nil {
		pc.c.logger.Warn("bad reset-offset notice", "broker", cn.RemoteAddr(), "err", err)
		return nil
	}
	if h.Group != pc.cfg.Group {
		return nil
	}
	body, err := protocol.DecodeResetOffsetBody(req.Body)
	if err != nil {
		pc.c.logger.Warn("bad reset-offset notice", "broker", cn.RemoteAddr(), "err", err)
		return nil
	}
	pc.c.logger.Info("offsets reset by the broker", "broker", cn.RemoteAddr(), "topic", h.Topic, "timestamp", h.Timestamp,
		"queues", len(body.OffsetTable))
	pc.resetOffsets(pc.c.ctx, h.Topic, body.OffsetTable)
	return nil
}

// resetOffsets restarts the held queues of topic that are in table from
// their new offsets. Each such queue is dropped (its pulled messages not yet
// handled are discarded and its handlers waited for, up to resetWait),
// without committing the offset it held, which would undo the reset; then
// the new offset is committed again, in case a commit of the old one raced
// with the broker's reset, and the queue starts anew on the same broker,
// keeping its lock. Queues held by other consumers are theirs to reset.
func (pc *PushConsumer) resetOffsets(ctx context.Context, topic string, table map[protocol.MessageQueue]int64) {
	// Under rebalanceMu, so that no hand-over runs halfway through.
	pc.rebalanceMu.Lock()
	defer pc.rebalanceMu.Unlock()
	pc.mu.Lock()
	if pc.closing {
		pc.mu.Unlock()
		return
	}
	var held []*processQueue
	for mq, pq := range pc.queues {
		if _, ok := table[mq.internal()]; ok && mq.Topic == topic {
			held = append(held, pq)
			delete(pc.queues, mq)
		}
	}
	if pc.cfg.MessageModel == Broadcasting {
		for q, off := range table {
			if q.Topic == topic {
				pc.local[MessageQueue{Topic: q.Topic, BrokerName: q.BrokerName, QueueID: q.QueueID}] = off
			}
		}
	}
	pc.mu.Unlock()
	for _, pq := range held {
		pq.drop()
	}
	wctx, cancel := context.WithTimeout(ctx, resetWait)
	defer cancel()
	for _, pq := range held {
		idle := make(chan struct{})
		go func() { pq.done.Wait(); close(idle) }()
		select {
		case <-idle:
		case <-wctx.Done():
			pc.c.logger.Warn("handlers still running at offset reset", "queue", pq.mq)
		}
	}
	for _, pq := range held {
		off := table[pq.mq.internal()]
		if pc.cfg.MessageModel == Clustering {
			if err := pc.c.updateOffset(wctx, pq.broker.readAddr(), pc.cfg.Group, pq.mq, off); err != nil {
				pc.c.logger.Debug("re-committing the reset offset failed", "queue", pq.mq, "err", err)
			}
		}
		pc.startQueue(pq.mq, pq.broker, off)
		pc.c.logger.Info("queue restarted at the reset offset", "queue", pq.mq, "offset", off)
	}
}

// handleResetConsumerClientOffset serves RESET_CONSUMER_CLIENT_OFFSET for a
// PullConsumer: the application holds the offsets, so it is told through
// PullConsumerConfig.OnOffsetReset (nothing happens without one).
func (pc *PullConsumer) handleResetConsumerClientOffset(_ context.Context, cn *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.ResetOffsetRequestHeader
	if err := h.SetExt(req.ExtFields); err != nil || h.Group != pc.cfg.Group || pc.cfg.OnOffsetReset == nil {
		return nil
	}
	body, err := protocol.DecodeResetOffsetBody(req.Body)
	if err != nil {
		pc.c.logger.Warn("bad reset-offset notice", "broker", cn.RemoteAddr(), "err", err)
		return nil
	}
	offsets := make(map[MessageQueue]int64, len(body.OffsetTable))
	for q, off := range body.OffsetTable {
		if q.Topic == h.Topic {
			offsets[MessageQueue{Topic: q.Topic, BrokerName: q.BrokerName, QueueID: q.QueueID}] = off
		}
	}
	pc.c.logger.Info("offsets reset by the broker", "broker", cn.RemoteAddr(), "topic", h.Topic, "queues", len(offsets))
	pc.cfg.OnOffsetReset(h.Topic, offsets)
	return nil
}
