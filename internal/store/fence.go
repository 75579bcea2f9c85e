package store

import (
	"math"
	"sort"
)

// NoFence is the confirmed offset of a store whose readers see every record
// (Options.Fenced unset).
const NoFence = math.MaxInt64

// The read fence. A replicated master may hold records its replicas do not
// have yet; if it fails, the group goes on from a replica's log and those
// records are cut, and the next ones stored take their queue offsets. A
// consumer that had read one of them would then have moved past the
// acknowledged message stored at its offset, and never receive it (the chaos
// campaign found this: docs/disaster-recovery.md). So consumers read only
// what is confirmed, as Kafka's consumers read up to the high watermark and
// RocketMQ 5's up to the confirm offset: records the broker calls safe to
// acknowledge, which every copy that counts holds (SetConfirmed), and, with
// FlushSync, this broker has fsynced.
//
// The broker's own services (timers, transactions, replication) read the
// whole log with GetMessages and ReadLog; consumer-facing reads use
// GetVisible and VisibleMaxOffset.

// SetConfirmed sets the commit-log offset up to which records are confirmed
// (NoFence: all). The caller keeps it from going back, except where the log
// itself is cut (TruncateLog lowers it). With Options.Fenced the mark is kept
// in the checkpoint, so a restart does not show what it had not confirmed.
func (s *Store) SetConfirmed(off int64) { s.confirmed.Store(off) }

// Confirmed returns the mark SetConfirmed set.
func (s *Store) Confirmed() int64 { return s.confirmed.Load() }

// Visible returns the commit-log offset consumers read up to: records that
// end at or below it are visible.
func (s *Store) Visible() int64 {
	v := s.confirmed.Load()
	if s.opts.Flush == FlushSync {
		v = min(v, s.cl.flushedPos.Load())
	}
	return v
}

// GetVisible is GetMessagesInto for consumers: it stops before the first
// record that ends past Visible. When that record is the one at offset, the
// status is OffsetOverflowOne (nothing to read yet) and the result's
// FencedAt says where Visible must reach for it; MaxOffset is the queue's
// visible end either way.
func (s *Store) GetVisible(buf []byte, topic string, queueID int32, offset int64, maxNums, maxBytes int, filter func(tagsCode int64) bool) GetResult {
	fence := s.Visible()
	res := s.getMessages(buf, topic, queueID, offset, maxNums, maxBytes, filter, fence)
	if fence == NoFence {
		return res
	}
	switch {
	case res.FencedAt > 0:
		// The scan stopped at the first hidden entry: NextBeginOffset.
		res.MaxOffset = res.NextBeginOffset
		if res.Status != Found && res.NextBeginOffset == offset {
			res.Status = OffsetOverflowOne
		}
	case res.Status == Found || res.Status == NoMatchedMessage || res.Status == MessageWasRemoving:
		if q := s.queue(topic, queueID); q != nil {
			res.MaxOffset = q.visibleMax(res.NextBeginOffset, fence)
		}
	}
	return res
}

// VisibleMaxOffset is MaxOffset as consumers see it: the offset of the
// queue's first entry whose record ends past Visible.
func (s *Store) VisibleMaxOffset(topic string, queueID int32) int64 {
	q := s.queue(topic, queueID)
	if q == nil {
		return 0
	}
	fence := s.Visible()
	if fence == NoFence {
		return q.maxOffset.Load()
	}
	return q.visibleMax(q.minOffset.Load(), fence)
}

// visibleMax returns the first offset in [from, maxOffset) whose entry's
// record ends past fence, or maxOffset. Entries of a queue point at records
// in log order, so it is a binary search; the newest entry is tried first,
// because it is usually visible.
func (q *consumeQueue) visibleMax(from, fence int64) int64 {
	maxOff := q.maxOffset.Load()
	if from >= maxOff {
		return maxOff
	}
	if e, err := q.entryAt(maxOff - 1); err != nil || e.phys+int64(e.size) <= fence {
		return maxOff
	}
	from = max(from, q.minOffset.Load())
	n := int(maxOff - 1 - from)
	i := sort.Search(n, func(i int) bool {
		e, err := q.entryAt(from + int64(i))
		return err != nil || e.phys+int64(e.size) > fence
	})
	return from + int64(i)
}
