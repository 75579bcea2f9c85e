package store

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
)

// storeTimestampOffset is the position of STORETIMESTAMP in a record: after
// BORNHOST, whose length depends on the IPv6 born-host flag.
func storeTimestampOffset(sysFlag int32) int {
	if sysFlag&protocol.SysFlagBornHostV6 != 0 {
		return protocol.StoredOffsetBornTimestamp + 8 + 20
	}
	return protocol.StoredOffsetBornTimestamp + 8 + 8
}

// pendingRecord is one encoded record of a put, before its offsets are known.
type pendingRecord struct {
	off, size int // position and length inside the put's buffer
	tsOff     int // STORETIMESTAMP position inside the record
	tags      int64
	keyHashes []uint64
}

// PutMessage appends m. It assigns m.QueueOffset (the next offset of
// m.Topic/m.QueueID), m.CommitLogOffset, m.StoreTimestamp (now, ms; never
// below the previous record's) and m.StoreHost, and encodes m with
// protocol.AppendStoredRecord (the v1 layout plus a CRC32C of the whole
// record). In FlushSync mode it returns after the bytes
// are fsynced, or with PutFlushDiskTimeout when that took longer than
// Options.SyncFlushTimeout or ctx ended first (the message is stored either
// way); ctx bounds only that wait. An error means nothing was stored.
func (s *Store) PutMessage(ctx context.Context, m *protocol.MessageExt) (PutResult, error) {
	ms := [1]*protocol.MessageExt{m}
	return s.timedPut(ctx, ms[:])
}

// PutMessages appends a batch for one topic/queue atomically: consecutive
// queue offsets, adjacent records in one segment, one write and one flush
// wait. The result describes the first record; MsgID lists every record's id,
// comma-separated.
func (s *Store) PutMessages(ctx context.Context, ms []*protocol.MessageExt) (PutResult, error) {
	return s.timedPut(ctx, ms)
}

// timedPut is put, reported to Options.ObservePut when set.
func (s *Store) timedPut(ctx context.Context, ms []*protocol.MessageExt) (PutResult, error) {
	if s.opts.ObservePut == nil {
		return s.put(ctx, ms)
	}
	start := time.Now()
	res, err := s.put(ctx, ms)
	s.opts.ObservePut(time.Since(start))
	return res, err
}

// checkWritable refuses puts on a closed, failed or full store.
func (s *Store) checkWritable() error {
	if s.closed.Load() {
		return ErrClosed
	}
	if err := s.cl.flush.failure(); err != nil {
		return fmt.Errorf("store: refusing puts after an fsync failure (restart the broker): %w", err)
	}
	return s.checkDisk()
}

// validate checks one message of a put.
func (s *Store) validate(m *protocol.MessageExt, topic string, queueID int32) error {
	if m == nil {
		return fmt.Errorf("%w: nil message", ErrIllegalMessage)
	}
	if m.Topic != topic || m.QueueID != queueID {
		return fmt.Errorf("%w: a batch must target one queue; got %s/%d after %s/%d", ErrIllegalMessage, m.Topic, m.QueueID, topic, queueID)
	}
	if err := protocol.ValidateTopic(m.Topic); err != nil {
		return fmt.Errorf("%w: %v", ErrIllegalMessage, err)
	}
	if m.QueueID < 0 {
		return fmt.Errorf("%w: queue id %d is negative", ErrIllegalMessage, m.QueueID)
	}
	if err := m.Validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrIllegalMessage, err)
	}
	if len(m.Body) > s.opts.MaxMessageSize {
		return fmt.Errorf("%w: body of %d bytes exceeds the limit of %d", ErrMessageTooLarge, len(m.Body), s.opts.MaxMessageSize)
	}
	return nil
}

func (s *Store) put(ctx context.Context, ms []*protocol.MessageExt) (PutResult, error) {
	if len(ms) == 0 || ms[0] == nil {
		return PutResult{}, fmt.Errorf("%w: empty batch", ErrIllegalMessage)
	}
	if err := s.checkWritable(); err != nil {
		return PutResult{}, err
	}
	topic, queueID := ms[0].Topic, ms[0].QueueID
	total := 0
	for _, m := range ms {
		if err := s.validate(m, topic, queueID); err != nil {
			return PutResult{}, err
		}
		m.StoreHost = s.opts.StoreHost
		total += m.RecordSize()
	}
	if !s.cl.fits(total) {
		return PutResult{}, fmt.Errorf("%w: %d bytes of records do not fit in a commit-log segment of %d bytes", ErrMessageTooLarge, total, s.opts.SegmentSize)
	}

	// Encode outside the lock; the offsets and the store time are patched in
	// under it, and the record's CRC32C completed over them (SealStoredRecord).
	bp := getPutBuffer(total)
	defer putPutBuffer(bp)
	buf := (*bp)[:0]
	var one [1]pendingRecord
	recs := one[:0]
	if len(ms) > 1 {
		recs = make([]pendingRecord, 0, len(ms))
	}
	for _, m := range ms {
		m.QueueOffset, m.CommitLogOffset, m.StoreTimestamp = 0, 0, 0
		start := len(buf)
		buf = protocol.AppendStoredRecord(buf, m)
		tags, _ := protocol.Property(m.Properties, protocol.PropertyTags)
		r := pendingRecord{off: start, size: len(buf) - start, tsOff: storeTimestampOffset(m.SysFlag), tags: protocol.TagsHashCode(tags)}
		keys, uniq := messageKeys(m.Properties)
		for _, k := range keys {
			r.keyHashes = append(r.keyHashes, keyHash(topic, k))
			if k == uniq {
				s.recent.add(r.keyHashes[len(r.keyHashes)-1])
			}
		}
		recs = append(recs, r)
	}

	s.putMu.Lock()
	base, q0, ts, err := s.appendLocked(topic, queueID, buf, recs)
	s.putMu.Unlock()
	if err != nil {
		return PutResult{}, err
	}
	end := base + int64(len(buf))

	res := PutResult{Status: PutOK, QueueOffset: q0, CommitLogOffset: base, End: end, StoreTimestamp: ts, Count: len(ms)}
	var ids strings.Builder
	for i, m := range ms {
		m.QueueOffset = q0 + int64(i)
		m.CommitLogOffset = base + int64(recs[i].off)
		m.StoreTimestamp = ts
		if i > 0 {
			ids.WriteByte(',')
		}
		ids.WriteString(protocol.OffsetMessageID(s.opts.StoreHost, m.CommitLogOffset))
	}
	res.MsgID = ids.String()
	if s.opts.OnArrive != nil {
		s.opts.OnArrive(topic, queueID, q0+int64(len(ms)))
	}
	if s.opts.Flush == FlushSync && !s.cl.waitFlushed(ctx, end, s.opts.SyncFlushTimeout) {
		res.Status = PutFlushDiskTimeout
	}
	return res, nil
}

// appendLocked writes the encoded records to the commit log, adds their
// entries to the consume queue and key index, and then publishes them: the
// write position first, the queue's max offset second, so a reader that sees
// an entry can read its record. If the commit-log write fails nothing is
// published and the next append overwrites whatever was written. Caller holds
// putMu.
func (s *Store) appendLocked(topic string, queueID int32, buf []byte, recs []pendingRecord) (base, q0, ts int64, err error) {
	if s.closed.Load() {
		return 0, 0, 0, ErrClosed
	}
	cq := s.queueForPutLocked(topic, queueID)
	g, base, err := s.cl.reserveLocked(len(buf))
	if err != nil {
		return 0, 0, 0, err
	}
	ts = s.cl.nextStoreTimeLocked(s.now().UnixMilli())
	q0 = cq.maxOffset.Load()

	var oneEntry [cqEntrySize]byte
	entries := oneEntry[:]
	if len(recs) > 1 {
		entries = make([]byte, len(recs)*cqEntrySize)
	}
	var keys []byte
	for i, r := range recs {
		rec := buf[r.off : r.off+r.size]
		phys := base + int64(r.off)
		binary.BigEndian.PutUint64(rec[protocol.StoredOffsetQueueOffset:], uint64(q0+int64(i)))
		binary.BigEndian.PutUint64(rec[protocol.StoredOffsetCommitLogOffset:], uint64(phys))
		binary.BigEndian.PutUint64(rec[r.tsOff:], uint64(ts))
		protocol.SealStoredRecord(rec)
		putCQEntry(entries[i*cqEntrySize:], cqEntry{phys: phys, size: int32(r.size), tags: r.tags})
		keys = appendKeyEntries(keys, r.keyHashes, phys)
	}
	if _, err := g.file.WriteAt(buf, base-g.start); err != nil {
		// Cut off a partial write (ENOSPC), so that whole records of a
		// failed batch cannot look like valid records after a crash.
		g.file.Truncate(base - g.start)
		return 0, 0, 0, fmt.Errorf("store: write commit log %s: %w", g.path, err)
	}
	// From here the put succeeds: the entries are kept in memory even if
	// writing them to their files fails, and the checkpoint retries.
	s.noteDerivedWrite(cq.appendLocked(q0, entries))
	s.noteDerivedWrite(g.index.appendLocked(keys))
	end := base + int64(len(buf))
	g.noteStoreTime(ts)
	s.cl.writePos.Store(end)
	cq.publishLocked(q0+int64(len(recs)), end)
	return base, q0, ts, nil
}

// noteDerivedWrite logs the first failure to write consume-queue or
// key-index files (they are retried; the data is in the commit log).
func (s *Store) noteDerivedWrite(err error) {
	if err != nil && !s.derivedFailing.Swap(true) {
		s.log.Error("writing consume-queue or key-index files failed; entries stay in memory and are retried", "err", err)
	}
}

// putBuffers recycles encode buffers: a put's buffer is dead once written.
var putBuffers sync.Pool

func getPutBuffer(n int) *[]byte {
	if bp, ok := putBuffers.Get().(*[]byte); ok && cap(*bp) >= n {
		return bp
	}
	b := make([]byte, 0, max(n, 4<<10))
	return &b
}

func putPutBuffer(bp *[]byte) {
	if cap(*bp) <= 1<<20 {
		putBuffers.Put(bp)
	}
}
