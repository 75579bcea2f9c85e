package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"

	"github.com/zonemq/zonemq/internal/protocol"
)

// Replication moves the commit log byte for byte: a master's ReadLog hands
// out whole records (and end-of-segment markers) exactly as they lie on its
// disk, and a replica's AppendReplicated writes them at the same offsets and
// derives its consume queues and key index from them, as recovery does. The
// two logs are then identical up to the replica's end, so a physical offset
// (and an offset message id) means the same record on every copy.

// ErrLogMismatch means a replicated chunk does not continue the local log:
// it starts elsewhere than the write position, or its records disagree with
// the local consume queues. The replica must renegotiate where to fetch from.
var ErrLogMismatch = errors.New("store: replicated data does not continue the local log")

// ReadLog returns whole records of the commit log starting at physical
// offset from, at most maxBytes of them (but always at least one record),
// never crossing a segment end, each verified (verifyRecord): a chunk ends
// before a corrupt record, and one that would start with it is an
// ErrCorruptRecord error. A chunk may end with a segment's 8-byte
// end-of-segment marker; the next record then starts at the next segment.
// It returns nil when from is the write position.
func (s *Store) ReadLog(from int64, maxBytes int) ([]byte, error) {
	wp := s.cl.writePos.Load()
	if from >= wp {
		if from > wp {
			return nil, fmt.Errorf("%w: offset %d is past the end of the log (%d)", ErrLogMismatch, from, wp)
		}
		return nil, nil
	}
	g := s.cl.segmentFor(from)
	if g == nil {
		return nil, fmt.Errorf("%w: commit-log offset %d is below the oldest segment (deleted by retention)", ErrNotFound, from)
	}
	end := min(wp, g.end())
	n := min(end-from, int64(max(maxBytes, minRecordSize)))
	buf := make([]byte, n)
	for {
		k, err := g.file.ReadAt(buf, from-g.start)
		if err != nil && !errors.Is(err, io.EOF) {
			if errors.Is(err, os.ErrClosed) {
				return nil, fmt.Errorf("%w: commit-log segment %s was deleted", ErrNotFound, g.path)
			}
			return nil, fmt.Errorf("store: read commit log at %d: %w", from, err)
		}
		buf = buf[:k]
		cut, need := wholeRecords(buf)
		if cut > 0 {
			return s.verifiedPrefix(buf[:cut], from)
		}
		if need <= int64(len(buf)) || from+need > end {
			return nil, fmt.Errorf("%w: no whole record at commit-log offset %d", ErrCorrupt, from)
		}
		// The first record is larger than maxBytes: read exactly it.
		buf = make([]byte, need)
	}
}

// verifiedPrefix returns the records of chunk (whole records read at
// commit-log offset from) before the first that fails verifyRecord, which
// is logged and counted as any corrupt read: a replica would refuse it, and
// it must not become the replica's copy. A chunk starting with a corrupt
// record is an ErrCorruptRecord error naming it.
func (s *Store) verifiedPrefix(chunk []byte, from int64) ([]byte, error) {
	pos := 0
	for pos+8 <= len(chunk) && binary.BigEndian.Uint32(chunk[pos+4:]) != protocol.BlankMagicCode {
		n := int(int32(binary.BigEndian.Uint32(chunk[pos:])))
		if err := verifyRecord(chunk[pos:pos+n], from+int64(pos)); err != nil {
			s.reportCorrupt("replication", "", -1, -1, from+int64(pos), err)
			if pos == 0 {
				return nil, err
			}
			return chunk[:pos], nil
		}
		pos += n
	}
	return chunk, nil
}

// wholeRecords returns the length of the longest prefix of b made of whole
// records, ending early after an end-of-segment marker; when that is 0,
// need is the size of the first record (0 if b is too short to tell).
func wholeRecords(b []byte) (cut, need int64) {
	pos := int64(0)
	for pos+8 <= int64(len(b)) {
		total := int64(int32(binary.BigEndian.Uint32(b[pos:])))
		if binary.BigEndian.Uint32(b[pos+4:]) == protocol.BlankMagicCode {
			return pos + blankMarkerLen, 0
		}
		if total < minRecordSize {
			return pos, 0
		}
		if pos+total > int64(len(b)) {
			if pos == 0 {
				return 0, total
			}
			return pos, 0
		}
		pos += total
	}
	return pos, 0
}

// StartLogAt makes an empty store's log begin at off, a segment boundary:
// a new replica of a master whose oldest segments retention already
// deleted starts where the master's log starts.
func (s *Store) StartLogAt(off int64) error {
	s.putMu.Lock()
	defer s.putMu.Unlock()
	if len(s.cl.snapshot()) > 0 || s.cl.writePos.Load() != 0 {
		return fmt.Errorf("%w: the log is not empty", ErrLogMismatch)
	}
	if off < 0 || off%s.opts.SegmentSize != 0 {
		return fmt.Errorf("%w: %d is not a segment boundary (segment size %d)", ErrLogMismatch, off, s.opts.SegmentSize)
	}
	if _, err := s.cl.addSegmentLocked(off); err != nil {
		return err
	}
	s.cl.writePos.Store(off)
	s.cl.flushedPos.Store(off)
	return nil
}

// SegmentSize returns the commit-log segment size; replicas of one group
// must use the same one, since their logs are identical byte for byte.
func (s *Store) SegmentSize() int64 { return s.opts.SegmentSize }

// CommitLogFlushedOffset returns the end of the durable (fsynced) prefix.
func (s *Store) CommitLogFlushedOffset() int64 { return s.cl.flushedPos.Load() }

// AppendReplicated writes data, a chunk from the master's ReadLog that
// starts at physical offset from, at the same offsets, after checking every
// record (size, magic, CRC32C or an old record's body CRC, its own offset and
// queue offset). It updates
// the consume queues and key index, wakes parked pulls and, in FlushSync
// mode, fsyncs before returning. It returns the new end of the log. On error
// nothing of the chunk is published.
func (s *Store) AppendReplicated(ctx context.Context, from int64, data []byte) (int64, error) {
	if err := s.checkWritable(); err != nil {
		return 0, err
	}
	s.putMu.Lock()
	end, touched, err := s.appendReplicatedLocked(from, data)
	s.putMu.Unlock()
	if err != nil {
		return 0, err
	}
	if s.opts.OnArrive != nil {
		for q := range touched {
			s.opts.OnArrive(q.topic, q.queueID, q.maxOffset.Load())
		}
	}
	if s.opts.Flush == FlushSync && !s.cl.waitFlushed(ctx, end, s.opts.SyncFlushTimeout) {
		return end, fmt.Errorf("store: replicated data at %d not flushed within %s", end, s.opts.SyncFlushTimeout)
	}
	return end, nil
}

// appendReplicatedLocked does AppendReplicated's work. Caller holds putMu.
func (s *Store) appendReplicatedLocked(from int64, data []byte) (int64, map[*consumeQueue]bool, error) {
	if s.closed.Load() {
		return 0, nil, ErrClosed
	}
	wp := s.cl.writePos.Load()
	if from != wp {
		return 0, nil, fmt.Errorf("%w: chunk starts at %d, the log ends at %d", ErrLogMismatch, from, wp)
	}
	type pendingQueue struct {
		q            *consumeQueue
		max, physEnd int64
	}
	touched := map[*consumeQueue]bool{}
	var pend []pendingQueue
	pos := int64(0)
	for pos < int64(len(data)) {
		at := from + pos
		g := s.cl.active()
		if g == nil || at >= g.end() {
			var err error
			if g, err = s.cl.addSegmentLocked(at); err != nil {
				return 0, nil, err
			}
		}
		rel := at - g.start
		if int64(len(data))-pos < 8 {
			return 0, nil, fmt.Errorf("%w: %d trailing bytes at %d", ErrLogMismatch, int64(len(data))-pos, at)
		}
		total := int64(int32(binary.BigEndian.Uint32(data[pos:])))
		if binary.BigEndian.Uint32(data[pos+4:]) == protocol.BlankMagicCode {
			if total != g.size-rel {
				return 0, nil, fmt.Errorf("%w: end-of-segment marker at %d declares %d bytes, the local segment has %d left (segment sizes differ?)",
					ErrLogMismatch, at, total, g.size-rel)
			}
			if err := g.writeBlankMarker(rel); err != nil {
				return 0, nil, fmt.Errorf("store: write end-of-segment marker in %s: %w", g.path, err)
			}
			g.sealTime()
			g.index.flush()
			s.cl.writePos.Store(g.end())
			pos += blankMarkerLen
			continue
		}
		if total < minRecordSize || pos+total > int64(len(data)) || rel+total+blankMarkerLen > g.size {
			return 0, nil, fmt.Errorf("%w: record at %d declares %d bytes", ErrLogMismatch, at, total)
		}
		// Records up to the segment's end go in one write.
		run := pos
		var keys []byte
		for run < int64(len(data)) {
			if run+8 > int64(len(data)) || binary.BigEndian.Uint32(data[run+4:]) == protocol.BlankMagicCode {
				break
			}
			t := int64(int32(binary.BigEndian.Uint32(data[run:])))
			if t < minRecordSize || run+t > int64(len(data)) || (from+run-g.start)+t+blankMarkerLen > g.size {
				return 0, nil, fmt.Errorf("%w: record at %d declares %d bytes", ErrLogMismatch, from+run, t)
			}
			rec := data[run : run+t]
			m, _, err := protocol.DecodeStoredMessage(rec, false, true)
			if err != nil {
				return 0, nil, fmt.Errorf("%w: record at %d: %v", ErrCorrupt, from+run, err)
			}
			if m.CommitLogOffset != from+run {
				return 0, nil, fmt.Errorf("%w: record at %d claims offset %d", ErrLogMismatch, from+run, m.CommitLogOffset)
			}
			if err := checkRecordFields(m); err != nil {
				return 0, nil, fmt.Errorf("%w: record at %d: %v", ErrCorrupt, from+run, err)
			}
			q := s.queueForPutLocked(m.Topic, m.QueueID)
			next := q.maxOffset.Load()
			for i := range pend {
				if pend[i].q == q {
					next = pend[i].max
				}
			}
			if m.QueueOffset == 0 && next > 0 && !touched[q] {
				// The master's queue starts over: the topic was deleted
				// and created again there. Follow it.
				s.log.Warn("replicated queue restarts at offset 0 (the topic was deleted and created again on the master); dropping the local queue",
					"topic", m.Topic, "queue", m.QueueID, "previousMax", next)
				if err := q.resetTo(0); err != nil {
					return 0, nil, err
				}
				next = 0
			}
			if m.QueueOffset != next {
				if next != q.minOffset.Load() || q.maxOffset.Load() != q.minOffset.Load() || touched[q] {
					return 0, nil, fmt.Errorf("%w: record at %d has queue offset %d in %s/%d, the local queue is at %d",
						ErrLogMismatch, from+run, m.QueueOffset, m.Topic, m.QueueID, next)
				}
				// An empty queue (the log started past its first records).
				if err := q.resetTo(m.QueueOffset); err != nil {
					return 0, nil, err
				}
			}
			tags, _ := protocol.Property(m.Properties, protocol.PropertyTags)
			var e [cqEntrySize]byte
			putCQEntry(e[:], cqEntry{phys: from + run, size: int32(t), tags: protocol.TagsHashCode(tags)})
			s.noteDerivedWrite(q.appendLocked(m.QueueOffset, e[:]))
			touched[q] = true
			found := false
			for i := range pend {
				if pend[i].q == q {
					pend[i].max, pend[i].physEnd, found = m.QueueOffset+1, from+run+t, true
				}
			}
			if !found {
				pend = append(pend, pendingQueue{q: q, max: m.QueueOffset + 1, physEnd: from + run + t})
			}
			mkeys, uniq := messageKeys(m.Properties)
			for _, k := range mkeys {
				h := keyHash(m.Topic, k)
				keys = appendKeyEntries(keys, []uint64{h}, from+run)
				if k == uniq {
					s.recent.add(h)
				}
			}
			g.noteStoreTime(m.StoreTimestamp)
			if m.StoreTimestamp > s.cl.lastStoreTime {
				s.cl.lastStoreTime = m.StoreTimestamp
			}
			run += t
		}
		if _, err := g.file.WriteAt(data[pos:run], rel); err != nil {
			g.file.Truncate(rel)
			return 0, nil, fmt.Errorf("store: write commit log %s: %w", g.path, err)
		}
		s.noteDerivedWrite(g.index.appendLocked(keys))
		s.cl.writePos.Store(from + run)
		pos = run
	}
	for _, p := range pend {
		p.q.publishLocked(p.max, p.physEnd)
	}
	return s.cl.writePos.Load(), touched, nil
}

// TruncateLog cuts the commit log back to physical offset to (a record
// boundary), with the consume-queue and key-index entries of what it drops.
// A replica uses it to drop a tail its group never acknowledged before it
// follows a new master. It logs what it dropped.
func (s *Store) TruncateLog(to int64) error {
	s.maintMu.Lock()
	defer s.maintMu.Unlock()
	s.putMu.Lock()
	defer s.putMu.Unlock()
	if s.closed.Load() {
		return ErrClosed
	}
	wp := s.cl.writePos.Load()
	if to >= wp {
		return nil
	}
	if to < s.cl.minOffset() {
		return fmt.Errorf("%w: cannot truncate to %d, below the oldest segment", ErrLogMismatch, to)
	}
	// Cached blocks may hold bytes past to, which new records will replace:
	// forget them now, and again once the write position is back (a block
	// read meanwhile may still have seen the old bytes).
	s.reads.invalidate()
	defer s.reads.invalidate()
	segs := s.cl.snapshot()
	keep := 0
	for i, g := range segs {
		if g.start <= to {
			keep = i + 1
		}
	}
	var later []*segment
	if keep < len(segs) {
		later = segs[keep:]
	}
	if keep > 0 {
		g := segs[keep-1]
		rel := to - g.start
		if rel < g.size {
			if err := g.file.Truncate(rel); err != nil {
				return fmt.Errorf("store: truncate %s: %w", g.path, err)
			}
			if err := datasync(g.file); err != nil {
				return fmt.Errorf("store: fsync %s: %w", g.path, err)
			}
			if _, err := g.index.truncateFrom(to); err != nil {
				return err
			}
			g.newestStoreTime.Store(0)
		}
	}
	if len(later) > 0 {
		s.cl.segMu.Lock()
		s.cl.segments = s.cl.segments[:len(s.cl.segments)-len(later)]
		s.cl.segMu.Unlock()
		for _, g := range later {
			if err := g.remove(); err != nil {
				return fmt.Errorf("store: remove segment %s: %w", g.path, err)
			}
		}
		syncDir(s.cl.dir)
		syncDir(s.cl.indexDir)
	}
	if err := s.dropQueueEntriesPast(to); err != nil {
		return err
	}
	s.cl.writePos.Store(to)
	if s.cl.flushedPos.Load() > to {
		s.cl.flushedPos.Store(to)
	}
	if s.confirmed.Load() > to && s.confirmed.Load() != NoFence {
		s.confirmed.Store(to)
	}
	s.log.Warn("commit log truncated to follow the group's log", "from", to, "to", wp, "bytes", wp-to, "segmentsRemoved", len(later))
	return s.checkpointLocked(true)
}

// AllOffsets returns a copy of every consumer offset, by group, topic and
// queue (a master hands them to its replicas).
func (s *Store) AllOffsets() map[string]map[string]map[int32]int64 {
	t := s.offsets
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]map[string]map[int32]int64, len(t.table))
	for g, topics := range t.table {
		gt := make(map[string]map[int32]int64, len(topics))
		for topic, queues := range topics {
			gt[topic] = maps.Clone(queues)
		}
		out[g] = gt
	}
	return out
}
