package store

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
)

// maxEachGroupBytes bounds the records PutEach writes with one commit-log
// write, so one call never holds the append lock for long or builds a huge
// buffer; a longer list is written in several groups.
const maxEachGroupBytes = 1 << 20

// eachRecord is one record of a PutEach group: its position in the group's
// buffer and the message it came from.
type eachRecord struct {
	pendingRecord
	i  int           // index into the caller's messages
	cq *consumeQueue // set under putMu
	q  int64         // queue offset, set under putMu
}

// PutEach stores independent messages, each as PutMessage would (any topics
// and queues, each its own result), but the messages that fit in one
// commit-log segment share one acquisition of the append lock and one write.
// A caller holding many small sends at once (the sends one socket read
// brought) thus pays one pwrite for all of them instead of one each. The
// records are appended in slice order: messages of one queue get ascending
// queue offsets in that order. res[i] and errs[i] are set for every i; an
// error means ms[i] was not stored. res and errs must be as long as ms.
func (s *Store) PutEach(ctx context.Context, ms []*protocol.MessageExt, res []PutResult, errs []error) {
	if len(res) < len(ms) || len(errs) < len(ms) {
		panic("store: PutEach needs a result and an error slot per message")
	}
	start := time.Now()
	flushTo := s.appendEach(ms, res, errs)
	if flushTo > 0 && s.opts.Flush == FlushSync && !s.cl.waitFlushed(ctx, flushTo, s.opts.SyncFlushTimeout) {
		for i := range ms {
			if errs[i] == nil {
				res[i].Status = PutFlushDiskTimeout
			}
		}
	}
	s.observeEach(start, errs[:len(ms)])
}

// AppendEach is PutEach without the flush wait: it returns once the records
// are written (to the page cache), with the commit-log offset their fsync
// must reach before any of them counts as durable (0 when none was stored).
// In FlushSync mode it asks the flusher for an fsync, whose completion the
// caller learns from Options.OnFlush and FlushedOffset; this is how a broker
// acknowledges many sends after one fsync with one wake-up, instead of a
// goroutine waiting per send. The results say PutOK: the caller must not
// report them before FlushedOffset covers the returned offset.
func (s *Store) AppendEach(ms []*protocol.MessageExt, res []PutResult, errs []error) int64 {
	if len(res) < len(ms) || len(errs) < len(ms) {
		panic("store: AppendEach needs a result and an error slot per message")
	}
	start := time.Now()
	flushTo := s.appendEach(ms, res, errs)
	if flushTo > 0 && s.opts.Flush == FlushSync {
		s.cl.requestFlush()
	}
	s.observeEach(start, errs[:len(ms)])
	return flushTo
}

// observeEach reports the time since start to Options.ObservePut once per
// stored message.
func (s *Store) observeEach(start time.Time, errs []error) {
	if s.opts.ObservePut == nil {
		return
	}
	d := time.Since(start)
	for _, err := range errs {
		if err == nil {
			s.opts.ObservePut(d)
		}
	}
}

// appendEach writes the records of PutEach and AppendEach and returns the
// end of the last one stored (0: none).
func (s *Store) appendEach(ms []*protocol.MessageExt, res []PutResult, errs []error) int64 {
	clear(res[:len(ms)])
	clear(errs[:len(ms)])
	if err := s.checkWritable(); err != nil {
		for i := range ms {
			errs[i] = err
		}
		return 0
	}
	limit := min(int64(maxEachGroupBytes), s.opts.SegmentSize-blankMarkerLen)
	bp := getPutBuffer(0)
	defer func() { putPutBuffer(bp) }()
	var recs []eachRecord
	var flushTo int64
	for from := 0; from < len(ms); {
		buf := (*bp)[:0]
		recs = recs[:0]
		next := from
		for ; next < len(ms); next++ {
			m := ms[next]
			if m == nil {
				errs[next] = fmt.Errorf("%w: nil message", ErrIllegalMessage)
				continue
			}
			if err := s.validate(m, m.Topic, m.QueueID); err != nil {
				errs[next] = err
				continue
			}
			size := m.RecordSize()
			if !s.cl.fits(size) {
				errs[next] = fmt.Errorf("%w: a record of %d bytes does not fit in a commit-log segment of %d bytes", ErrMessageTooLarge, size, s.opts.SegmentSize)
				continue
			}
			if len(recs) > 0 && int64(len(buf)+size) > limit {
				break
			}
			m.StoreHost = s.opts.StoreHost
			m.QueueOffset, m.CommitLogOffset, m.StoreTimestamp = 0, 0, 0
			off := len(buf)
			buf = protocol.AppendStoredRecord(buf, m)
			tags, _ := protocol.Property(m.Properties, protocol.PropertyTags)
			r := eachRecord{i: next, pendingRecord: pendingRecord{off: off, size: len(buf) - off, tsOff: storeTimestampOffset(m.SysFlag), tags: protocol.TagsHashCode(tags)}}
			keys, uniq := messageKeys(m.Properties)
			for _, k := range keys {
				r.keyHashes = append(r.keyHashes, keyHash(m.Topic, k))
				if k == uniq {
					s.recent.add(r.keyHashes[len(r.keyHashes)-1])
				}
			}
			recs = append(recs, r)
		}
		*bp = buf
		from = next
		if len(recs) == 0 {
			continue
		}
		s.putMu.Lock()
		base, ts, err := s.appendEachLocked(ms, buf, recs)
		s.putMu.Unlock()
		for _, r := range recs {
			if err != nil {
				errs[r.i] = err
				continue
			}
			m := ms[r.i]
			m.QueueOffset, m.CommitLogOffset, m.StoreTimestamp = r.q, base+int64(r.off), ts
			end := m.CommitLogOffset + int64(r.size)
			res[r.i] = PutResult{Status: PutOK, QueueOffset: r.q, CommitLogOffset: m.CommitLogOffset, End: end,
				StoreTimestamp: ts, Count: 1, MsgID: protocol.OffsetMessageID(s.opts.StoreHost, m.CommitLogOffset)}
			flushTo = end
			if s.opts.OnArrive != nil {
				s.opts.OnArrive(m.Topic, m.QueueID, r.q+1)
			}
		}
	}
	return flushTo
}

// appendEachLocked is appendLocked for records of any queues: one reserve,
// one commit-log write, then each record's consume-queue entry, and the same
// publication order (write position first, queues second). It sets each
// record's queue and queue offset. Caller holds putMu.
func (s *Store) appendEachLocked(ms []*protocol.MessageExt, buf []byte, recs []eachRecord) (base, ts int64, err error) {
	if s.closed.Load() {
		return 0, 0, ErrClosed
	}
	g, base, err := s.cl.reserveLocked(len(buf))
	if err != nil {
		return 0, 0, err
	}
	ts = s.cl.nextStoreTimeLocked(s.now().UnixMilli())
	var keys []byte
	for k := range recs {
		r := &recs[k]
		m := ms[r.i]
		r.cq, r.q = s.queueForPutLocked(m.Topic, m.QueueID), -1
		// The next offset of this queue: after an earlier record of the
		// group in the same queue, else the queue's published max.
		for j := k - 1; j >= 0; j-- {
			if recs[j].cq == r.cq {
				r.q = recs[j].q + 1
				break
			}
		}
		if r.q < 0 {
			r.q = r.cq.maxOffset.Load()
		}
		rec := buf[r.off : r.off+r.size]
		phys := base + int64(r.off)
		binary.BigEndian.PutUint64(rec[protocol.StoredOffsetQueueOffset:], uint64(r.q))
		binary.BigEndian.PutUint64(rec[protocol.StoredOffsetCommitLogOffset:], uint64(phys))
		binary.BigEndian.PutUint64(rec[r.tsOff:], uint64(ts))
		protocol.SealStoredRecord(rec)
		keys = appendKeyEntries(keys, r.keyHashes, phys)
	}
	if _, err := g.file.WriteAt(buf, base-g.start); err != nil {
		g.file.Truncate(base - g.start)
		return 0, 0, fmt.Errorf("store: write commit log %s: %w", g.path, err)
	}
	for _, r := range recs {
		var entry [cqEntrySize]byte
		phys := base + int64(r.off)
		putCQEntry(entry[:], cqEntry{phys: phys, size: int32(r.size), tags: r.tags})
		s.noteDerivedWrite(r.cq.appendLocked(r.q, entry[:]))
	}
	s.noteDerivedWrite(g.index.appendLocked(keys))
	end := base + int64(len(buf))
	g.noteStoreTime(ts)
	s.cl.writePos.Store(end)
	for _, r := range recs {
		r.cq.publishLocked(r.q+1, base+int64(r.off+r.size))
	}
	return base, ts, nil
}
