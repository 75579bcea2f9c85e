package broker

import (
	"context"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/store"
	"github.com/zonemq/zonemq/internal/wallclock"
)

// checkLoop runs a check pass every interval until ctx ends, then waits for
// the check requests still being written.
func (t *transactionService) checkLoop(ctx context.Context) {
	defer t.sends.Wait()
	tick := time.NewTicker(t.interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			t.checkPass(ctx, wallclock.Now())
			t.flush(false)
		}
	}
}

// checkPass walks the half queue from the check position: resolved
// messages are stepped over, messages younger than the timeout (or their
// CHECK_IMMUNITY_TIME_IN_SECONDS) wait, the others are checked once per
// pass, and a message checked checkMax times is discarded.
func (t *transactionService) checkPass(ctx context.Context, now time.Time) {
	if !t.s.isMaster() {
		return // the master checks; a replica only keeps the records
	}
	t.advance()
	t.mu.Lock()
	off := t.halfOffset
	t.mu.Unlock()
	for ctx.Err() == nil {
		res := t.s.store.GetMessages(transHalfTopic, 0, off, 64, 0, nil)
		switch res.Status {
		case store.Found:
		case store.OffsetTooSmall:
			t.s.logger.Error("transaction half messages were removed before they were resolved (retention)",
				"from", off, "to", res.NextBeginOffset)
			t.skipTo(res.NextBeginOffset)
			off = res.NextBeginOffset
			continue
		default:
			if res.NextBeginOffset > off && res.Status != store.OffsetOverflowBadly {
				off = res.NextBeginOffset
				continue
			}
			t.advance()
			return
		}
		for _, rec := range res.Messages {
			m, _, err := protocol.DecodeStoredMessage(rec, true, false)
			if err != nil {
				continue
			}
			if t.isResolved(m.QueueOffset) {
				continue
			}
			age := now.Sub(time.UnixMilli(m.StoreTimestamp))
			if age < t.timeout {
				// Store times never decrease along the queue: the rest is
				// younger still.
				t.advance()
				return
			}
			if v, ok := protocol.Property(m.Properties, propertyCheckImmunity); ok {
				if secs, err := strconv.Atoi(v); err == nil && age < time.Duration(secs)*time.Second {
					continue
				}
			}
			if t.countCheck(m.QueueOffset) > t.checkMax {
				if t.claim(m.QueueOffset) {
					t.s.logger.Warn("discarding a transaction half message its producer never resolved",
						"producerGroup", groupOf(m), "msgId", uniqKeyOf(m), "checks", t.checkMax)
					t.resolve(ctx, m.QueueOffset, "discard")
				}
				continue
			}
			t.sendCheck(m)
		}
		off = res.NextBeginOffset
	}
}

func groupOf(m *protocol.MessageExt) string {
	g, _ := protocol.Property(m.Properties, protocol.PropertyProducerGroup)
	return g
}

func uniqKeyOf(m *protocol.MessageExt) string {
	k, _ := protocol.Property(m.Properties, protocol.PropertyUniqClientMessageID)
	return k
}

func (t *transactionService) isResolved(halfOffset int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.resolved[halfOffset]
	return ok || halfOffset < t.halfOffset
}

// countCheck counts one more check of a pending half message.
func (t *transactionService) countCheck(halfOffset int64) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.checks[halfOffset]++
	return t.checks[halfOffset]
}

// advance moves the check position over the resolved messages at its head.
func (t *transactionService) advance() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for {
		r, ok := t.resolved[t.halfOffset]
		if !ok || r.pending {
			return
		}
		delete(t.resolved, t.halfOffset)
		delete(t.checks, t.halfOffset)
		delete(t.origins, t.halfOffset)
		t.halfOffset++
		t.dirty = true
	}
}

// skipTo moves the check position to off, forgetting what lies below.
func (t *transactionService) skipTo(off int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for h := range t.resolved {
		if h < off && !t.resolved[h].pending {
			delete(t.resolved, h)
		}
	}
	for h := range t.checks {
		if h < off {
			delete(t.checks, h)
		}
	}
	for h := range t.origins {
		if h < off {
			delete(t.origins, h)
		}
	}
	if off > t.halfOffset {
		t.halfOffset = off
		t.dirty = true
	}
}

// sendCheck asks the producer group of a half message whether to commit
// it (CHECK_TRANSACTION_STATE, one way: the producer answers with
// END_TRANSACTION). It prefers the connection the half message came on —
// rocketmq-client-go heartbeats a producer only every 30 s, so that
// connection may be the only one known — and falls back to any connection
// of the group. With none, the check is still counted, as in RocketMQ.
func (t *transactionService) sendCheck(m *protocol.MessageExt) {
	group := groupOf(m)
	conn := t.producerConn(group, m.QueueOffset)
	if conn == nil {
		t.s.logger.Debug("no connection of the producer group to check a half message", "producerGroup", group, "msgId", uniqKeyOf(m))
		return
	}
	uniq := uniqKeyOf(m)
	topic, _ := protocol.Property(m.Properties, protocol.PropertyRealTopic)
	qid, _ := protocol.Property(m.Properties, protocol.PropertyRealQueueID)
	queueID, _ := strconv.ParseInt(qid, 10, 32)
	ext := protocol.ExtWriter{}
	ext.Int("tranStateTableOffset", m.QueueOffset).Int("commitLogOffset", m.CommitLogOffset).
		Str("msgId", uniq).Str("transactionId", uniq).
		Str("offsetMsgId", protocol.OffsetMessageID(m.StoreHost, m.CommitLogOffset)).
		Str("topic", topic).Str("bname", t.s.opts.BrokerName)
	// The producer sees the message as sent: its real topic and queue.
	view := *m
	view.Topic = topic
	view.QueueID = int32(queueID)
	if view.Topic == "" {
		view.Topic = m.Topic
	}
	body := protocol.AppendStoredMessage(nil, &view)
	req := remoting.NewRequest(int32(protocol.CheckTransactionState), ext, body)
	t.sends.Add(1)
	go func() {
		defer t.sends.Done()
		if err := conn.InvokeOneway(req); err != nil {
			t.s.logger.Debug("sending a transaction check failed", "producerGroup", group, "peer", conn.RemoteAddr(), "err", err)
		}
	}()
}

// producerConn returns an open connection to a member of the producer
// group: the one the half message at halfOffset came on while it is open,
// else a random member. Origins are known only for half messages stored
// since the broker started.
func (t *transactionService) producerConn(group string, halfOffset int64) *remoting.Conn {
	t.mu.Lock()
	origin := t.origins[halfOffset]
	t.mu.Unlock()
	if origin != nil {
		select {
		case <-origin.Done():
			t.mu.Lock()
			delete(t.origins, halfOffset)
			t.mu.Unlock()
		default:
			return origin
		}
	}
	conns := t.s.registry.producerConns(group)
	if len(conns) == 0 {
		return nil
	}
	return conns[rand.IntN(len(conns))]
}

// producerConns returns the connections of a producer group's members.
func (r *clientRegistry) producerConns(group string) []*remoting.Conn {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*remoting.Conn, 0, len(r.producers[group]))
	for c := range r.producers[group] {
		out = append(out, c)
	}
	return out
}

// flush persists the check position if it changed (or always, at close).
func (t *transactionService) flush(always bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.dirty && !always {
		return
	}
	// Op records of the resolutions above the check position must be read
	// again after a restart: start at the oldest of them.
	st := transactionState{HalfOffset: t.halfOffset, OpOffset: t.s.store.MaxOffset(transOpHalfTopic, 0)}
	for _, r := range t.resolved {
		st.OpOffset = min(st.OpOffset, r.op)
	}
	if err := t.s.store.SaveMetadata(transactionStateMetadata, st); err != nil {
		t.s.logger.Error("persisting the transaction check position", "err", err)
		return
	}
	t.dirty = false
}

// close persists the check position at Shutdown.
func (t *transactionService) close() { t.flush(true) }
