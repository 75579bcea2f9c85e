package broker

import (
	"context"
	"strings"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/store"
	"github.com/zonemq/zonemq/internal/wallclock"
)

// Idempotent retries. A send whose attempt went unanswered — the answer
// was lost, the master was paused, its replicas were slow to confirm — may
// have been stored anyway, and the client sends it again with the same
// UNIQ_KEY: the SDK with the header's Retry flag, the stock clients
// without a mark (repeatOf finds those). When the retry reaches the
// same group, the master looks the UNIQ_KEY up in its key index (every copy
// of the group has it, so a new master does too) and, if the topic holds a
// record with it from the last retryLookback, answers with that record —
// once it is as durable and replicated as a new one would be — instead of
// storing a second copy. The chaos campaign found the second copies
// (docs/disaster-recovery.md). A retry to another group cannot know and
// stores a copy there: at-least-once, with the same message id.

// retryLookback bounds how far back a retry's first copy is looked for:
// far beyond any send timeout, and it keeps the lookup to the newest
// segments' key indexes. The two newest segments are always looked
// through, whatever their store times (store.QueryRecentByKey): a wall
// clock stepped between the attempts does not hide the first copy.
const retryLookback = 5 * time.Minute

// repeatOf reports whether a single send may repeat a message this group
// stored already, or is storing now: the stock clients (rocketmq-client-go,
// the Java client) send a message again after an unanswered attempt with
// its UNIQ_KEY unchanged but no mark, and a RocketMQ 5 client's resend can
// reach the master beside its first attempt (both through access points;
// the chaos campaign saw two attempts stored within a millisecond). The
// store remembers the UNIQ_KEYs of its newest records (store.ClaimRecent;
// on a replica too, so a new master knows the old one's) and notes this
// one, so of two attempts at once exactly one is the first. Sends to retry
// and dead-letter topics are not repeats: a message consumed and sent back
// twice goes there twice, with one UNIQ_KEY. Nor are delayed, timer and
// transactional messages: they are stored under system topics, where the
// lookup by the send's topic would not find them.
func (s *Server) repeatOf(m *protocol.MessageExt) bool {
	if strings.HasPrefix(m.Topic, protocol.RetryGroupPrefix) || strings.HasPrefix(m.Topic, protocol.DLQGroupPrefix) ||
		m.SysFlag&protocol.SysFlagTransactionMask == protocol.SysFlagTransactionPrep ||
		delayLevel(m.Properties) > 0 || isTimer(m.Properties) {
		return false
	}
	uniq, _ := protocol.Property(m.Properties, protocol.PropertyUniqClientMessageID)
	return s.store.ClaimRecent(m.Topic, uniq)
}

// repeatWait bounds how long a repeat waits for its first attempt's copy
// to be stored (the first attempt claimed the key and is being stored
// beside it), looking every repeatPoll. A repeat whose first attempt was
// never stored (refused, cut) waits it out once and is stored.
const (
	repeatWait = time.Second
	repeatPoll = 10 * time.Millisecond
)

// storedRetry answers a retried single send with its stored copy, or
// returns nil when there is none (the send is stored as usual). When
// repeat (its UNIQ_KEY was claimed before: repeatOf), the copy may still be
// on its way in, and it looks again for up to repeatWait.
func (s *Server) storedRetry(ctx context.Context, req *remoting.Command, h *protocol.SendMessageRequestHeader, m *protocol.MessageExt, repeat bool) *remoting.Command {
	uniq, _ := protocol.Property(m.Properties, protocol.PropertyUniqClientMessageID)
	if uniq == "" {
		return nil
	}
	if err := s.repl.checkWritable(); err != nil {
		return s.putErrorResponse(req, h.Topic, err)
	}
	prev := s.storedCopy(h.Topic, uniq)
	for deadline := time.Now().Add(repeatWait); prev == nil && repeat && time.Now().Before(deadline); {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(repeatPoll):
		}
		prev = s.storedCopy(h.Topic, uniq)
	}
	if prev == nil {
		return nil
	}
	end := prev.CommitLogOffset + int64(prev.StoreSize)
	if !s.store.WaitFlushed(ctx, end, s.opts.ReplicaAckTimeout) {
		return errorf(req, protocol.SystemError, "broker %s holds this message from an earlier attempt but could not make it durable in time",
			s.opts.BrokerName)
	}
	if err := s.repl.waitReplicas(ctx, end); err != nil {
		return s.putErrorResponse(req, h.Topic, err)
	}
	s.retriesAnswered.Add(1)
	s.logger.Info("a retried send was stored by an earlier attempt: answered with that copy", "topic", h.Topic, "uniqKey", uniq,
		"queue", prev.QueueID, "queueOffset", prev.QueueOffset)
	res := store.PutResult{QueueOffset: prev.QueueOffset, CommitLogOffset: prev.CommitLogOffset, End: end,
		StoreTimestamp: prev.StoreTimestamp, Count: 1}
	host := prev.StoreHost
	if !host.IsValid() {
		host = s.storeHost
	}
	return s.sendResponse(req, res, protocol.OffsetMessageID(host, prev.CommitLogOffset), prev.QueueID, uniq)
}

// storedCopy is the newest record of topic with UNIQ_KEY uniq from the last
// retryLookback, or nil.
func (s *Server) storedCopy(topic, uniq string) *protocol.MessageExt {
	found, err := s.store.QueryRecentByKey(topic, uniq, 4, wallclock.Now().Add(-retryLookback).UnixMilli())
	if err != nil {
		return nil
	}
	var prev *protocol.MessageExt
	for _, f := range found {
		if k, _ := protocol.Property(f.Properties, protocol.PropertyUniqClientMessageID); k == uniq {
			prev = f
		}
	}
	return prev
}
