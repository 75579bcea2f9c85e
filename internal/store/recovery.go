package store

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
)

// minRecordSize is the smallest stored record (the v1 fixed part, IPv4 hosts,
// empty body, topic and properties).
const minRecordSize = 91

// recover brings the files into a consistent state before the store opens:
//
//  1. load the segments and consume queues as found on disk;
//  2. pick where to verify from: the checkpoint's flushed position, lowered
//     when a consume queue or key index lost durable entries;
//  3. read every record from there on (size, magic, body CRC, the record's own
//     offset), re-dispatching it to its consume queue and key index;
//  4. at the first bad record: if a valid record follows anywhere after it,
//     fail with ErrCorrupt (the operator decides); otherwise it is a torn
//     tail: truncate it and log exactly what was dropped;
//  5. drop consume-queue entries that point past the end of the log, move
//     min offsets up to the oldest segment, fsync, write a checkpoint.
//
// It runs before any goroutine starts, so the …Locked helpers are safe.
func (s *Store) recover(unclean bool) error {
	began := time.Now()
	cp, err := readCheckpoint(s.dir)
	if err != nil {
		s.log.Warn("checkpoint unreadable; verifying the whole commit log", "err", err)
		cp = nil
	}
	missingIndex, err := s.loadSegments()
	if err != nil {
		return err
	}
	if err := s.loadQueues(); err != nil {
		return err
	}
	segs := s.cl.snapshot()
	if len(segs) == 0 && cp != nil && cp.CommitLogFlushed > 0 {
		return fmt.Errorf("%w: %s holds no segment but the checkpoint records %d flushed bytes; restore the commit log or, to start empty, delete the data directory", ErrCorrupt, s.cl.dir, cp.CommitLogFlushed)
	}

	r := &recoveryScan{s: s, segs: segs}
	clMin := int64(0)
	if len(segs) > 0 {
		clMin = segs[0].start
	}
	start, err := r.chooseStart(cp, clMin, missingIndex)
	if err != nil {
		return err
	}
	if unclean && len(segs) > 0 {
		// After a crash the whole segment being written is verified, not
		// only what follows the checkpoint: damage to records written just
		// before it (a torn or garbled write the disk reported done) is
		// found here rather than by the first read. Bounded by one segment,
		// whatever the store's size.
		g := segs[len(segs)-1]
		if i := r.locate(start); i >= 0 {
			g = segs[i]
		}
		start = min(start, g.start)
	}
	if unclean {
		s.log.Warn("the previous run did not shut down cleanly (abort file present); verifying the commit log",
			"from", start, "checkpoint", r.cpPos)
	}
	// Key-index entries at or past start are re-added by the scan.
	for _, g := range segs {
		if g.end() > start {
			if _, err := g.index.truncateFrom(start); err != nil {
				return err
			}
			g.index.dirty.Store(true)
		}
	}
	end, err := r.scan(start)
	if err != nil {
		return err
	}
	if !unclean && cp != nil && end != cp.CommitLogFlushed {
		s.log.Warn("clean shutdown, but the checkpoint was not at the end of the commit log", "checkpoint", cp.CommitLogFlushed, "logEnd", end)
	}
	if err := r.dropEntriesPast(end); err != nil {
		return err
	}

	for _, g := range s.cl.snapshot() {
		if g.newestStoreTime.Load() == 0 {
			// Not scanned: the seal time (mtime) bounds its newest record.
			if st, err := g.file.Stat(); err == nil && st.Size() > 0 {
				g.newestStoreTime.Store(st.ModTime().UnixMilli())
			}
		}
	}
	if g := s.cl.active(); g != nil {
		s.cl.lastStoreTime = g.newestStoreTime.Load()
	}
	s.cl.writePos.Store(end)
	s.cl.flushedPos.Store(min(start, end))
	s.confirmed.Store(NoFence)
	if s.opts.Fenced {
		s.confirmed.Store(0)
		if cp != nil {
			s.confirmed.Store(min(max(cp.Confirmed, 0), end))
		}
	}
	if err := s.cl.flushCommitLog(); err != nil {
		return err
	}
	clMin = s.cl.minOffset()
	for _, q := range s.allQueues() {
		q.syncedOffset = 0
		if cp != nil {
			if v, ok := cp.ConsumeQueues[q.topic][q.queueID]; ok {
				q.syncedOffset = min(v, q.maxOffset.Load())
			}
		}
	}
	s.correctQueueMins(clMin)
	if err := s.checkpointLocked(true); err != nil {
		if !errors.Is(err, syscall.ENOSPC) {
			return err
		}
		// The old checkpoint stays valid (it only covers less), so a full
		// disk must not keep the store from starting and serving reads.
		s.log.Error("the disk is full: recovery could not write its checkpoint; starting anyway, later checkpoints retry",
			"dir", s.dir, "err", err)
	}
	s.log.Info("store recovered",
		"dir", s.dir, "unclean", unclean, "segments", len(s.cl.snapshot()), "commitLogMin", clMin, "commitLogEnd", end,
		"verifiedFrom", start, "records", r.records, "queueEntriesAdded", r.appended, "queues", len(s.allQueues()),
		"elapsed", time.Since(began).Round(time.Millisecond))
	return nil
}

// loadSegments opens the commit-log segments; it returns the starts of
// segments whose key-index sidecar was missing (it is created empty).
func (s *Store) loadSegments() ([]int64, error) {
	des, err := os.ReadDir(s.cl.dir)
	if err != nil {
		return nil, fmt.Errorf("store: read commit-log dir: %w", err)
	}
	var starts []int64
	for _, de := range des {
		name := de.Name()
		if de.IsDir() || strings.HasPrefix(name, ".") {
			continue
		}
		off, ok := parseOffsetName(name)
		if !ok {
			return nil, fmt.Errorf("%w: unexpected file %s in %s (segments are named by their 20-digit start offset)", ErrCorrupt, name, s.cl.dir)
		}
		if off%s.opts.SegmentSize != 0 {
			return nil, fmt.Errorf("%w: segment %s does not start at a multiple of SegmentSize %d", ErrCorrupt, name, s.opts.SegmentSize)
		}
		starts = append(starts, off)
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i] < starts[j] })
	var missing []int64
	for i, start := range starts {
		if i > 0 && start != starts[i-1]+s.opts.SegmentSize {
			return nil, fmt.Errorf("%w: commit-log segments are missing between %s and %s", ErrCorrupt, offsetName(starts[i-1]), offsetName(start))
		}
		if !fileExists(filepath.Join(s.cl.indexDir, offsetName(start))) {
			missing = append(missing, start)
		}
		g, err := openSegment(s.cl.dir, s.cl.indexDir, start, s.opts.SegmentSize, false)
		if err != nil {
			return nil, err
		}
		s.cl.segments = append(s.cl.segments, g)
		size, err := g.fileSize()
		if err != nil {
			return nil, err
		}
		if size > s.opts.SegmentSize {
			return nil, fmt.Errorf("%w: segment %s has %d bytes, more than SegmentSize %d", ErrCorrupt, g.path, size, s.opts.SegmentSize)
		}
	}
	// Sidecars without a segment belong to segments retention was deleting.
	if des, err := os.ReadDir(s.cl.indexDir); err == nil {
		for _, de := range des {
			if off, ok := parseOffsetName(de.Name()); ok && !containsInt64(starts, off) {
				os.Remove(filepath.Join(s.cl.indexDir, de.Name()))
			}
		}
	}
	return missing, nil
}

func containsInt64(list []int64, v int64) bool {
	i := sort.Search(len(list), func(i int) bool { return list[i] >= v })
	return i < len(list) && list[i] == v
}

// loadQueues opens every consume queue under Dir/consumequeue.
func (s *Store) loadQueues() error {
	topics, err := os.ReadDir(s.cqRoot)
	if err != nil {
		return fmt.Errorf("store: read consume-queue dir: %w", err)
	}
	for _, td := range topics {
		if !td.IsDir() || protocol.ValidateTopic(td.Name()) != nil {
			s.log.Warn("ignoring an entry that is not a topic directory", "path", filepath.Join(s.cqRoot, td.Name()))
			continue
		}
		queues, err := os.ReadDir(filepath.Join(s.cqRoot, td.Name()))
		if err != nil {
			return fmt.Errorf("store: read consume-queue dir: %w", err)
		}
		for _, qd := range queues {
			id, err := strconv.ParseInt(qd.Name(), 10, 32)
			if !qd.IsDir() || err != nil || id < 0 {
				s.log.Warn("ignoring an entry that is not a queue directory", "path", filepath.Join(s.cqRoot, td.Name(), qd.Name()))
				continue
			}
			q, err := loadConsumeQueue(s.cqRoot, td.Name(), int32(id), s.opts.ConsumeQueueEntries, s.handles, s.log.Warn)
			if err != nil {
				return err
			}
			s.addQueue(q)
		}
	}
	return nil
}

// recoveryScan is one run of steps 2–5 of recover.
type recoveryScan struct {
	s    *Store
	segs []*segment
	// cpPos is the checkpoint's flushed position (the log start without a
	// checkpoint); cpQueues its queue positions (nil without a checkpoint).
	cpPos    int64
	cpQueues map[string]map[int32]int64
	hasCP    bool

	records  int // records verified
	appended int // consume-queue entries re-dispatched
}

// logEnd returns the offset just past the last byte on disk.
func (r *recoveryScan) logEnd() int64 {
	if len(r.segs) == 0 {
		return 0
	}
	g := r.segs[len(r.segs)-1]
	size, _ := g.fileSize()
	return g.start + size
}

// locate returns the index of the segment holding pos, or -1.
func (r *recoveryScan) locate(pos int64) int {
	for i, g := range r.segs {
		if g.start <= pos && pos < g.end() {
			return i
		}
	}
	return -1
}

// chooseStart returns the offset to verify from (a record boundary).
func (r *recoveryScan) chooseStart(cp *checkpoint, clMin int64, missingIndex []int64) (int64, error) {
	s := r.s
	r.cpPos = clMin
	if cp != nil {
		r.hasCP = true
		r.cpPos = max(cp.CommitLogFlushed, clMin)
		r.cpQueues = cp.ConsumeQueues
	}
	if len(r.segs) == 0 {
		return 0, nil
	}
	start := r.cpPos
	last := r.segs[len(r.segs)-1]
	if i := r.locate(start); i >= 0 {
		g := r.segs[i]
		if size, err := g.fileSize(); err != nil {
			return 0, err
		} else if start-g.start > size {
			s.log.Error("commit-log segment is shorter than the flushed checkpoint: data reported durable is missing; re-verifying the segment",
				"segment", g.path, "fileSize", size, "checkpoint", start)
			s.lostDurable = true
			start = g.start
		}
	} else if start != last.end() {
		s.log.Error("the checkpoint lies beyond the commit log; re-verifying the last segment", "checkpoint", start, "lastSegment", last.path)
		start = last.start
	}
	// A queue that lost entries the checkpoint recorded as durable is
	// rebuilt from the record after its last surviving entry.
	for topic, queues := range r.cpQueues {
		for id, want := range queues {
			q := s.queue(topic, id)
			switch {
			case q == nil && want > 0:
				s.log.Warn("consume queue in the checkpoint is missing; rebuilding it from the commit log", "topic", topic, "queue", id)
				start = clMin
			case q != nil && q.maxOffset.Load() < want:
				from := max(q.lastPhysEnd, clMin)
				if q.maxOffset.Load() == q.minOffset.Load() || !r.isBoundary(from) {
					from = clMin
				}
				s.log.Warn("consume queue lost entries the checkpoint recorded; re-dispatching from its last entry",
					"topic", topic, "queue", id, "maxOffset", q.maxOffset.Load(), "checkpointMaxOffset", want, "from", from)
				start = min(start, from)
			}
		}
	}
	for _, segStart := range missingIndex {
		if segStart < start {
			s.log.Warn("key index of a segment is missing; rebuilding it", "segment", offsetName(segStart))
			start = segStart
		}
	}
	return max(start, clMin), nil
}

// isBoundary reports whether a record, an end-of-segment marker or the end
// of the log starts at pos.
func (r *recoveryScan) isBoundary(pos int64) bool {
	if pos == r.logEnd() {
		return true
	}
	i := r.locate(pos)
	if i < 0 {
		return false
	}
	g := r.segs[i]
	var hdr [8]byte
	if _, err := g.file.ReadAt(hdr[:], pos-g.start); err != nil {
		return false
	}
	if binary.BigEndian.Uint32(hdr[4:]) == protocol.BlankMagicCode {
		return int64(int32(binary.BigEndian.Uint32(hdr[:]))) == g.size-(pos-g.start)
	}
	size, _ := g.fileSize()
	_, ok := r.validRecordAt(g, pos-g.start, size)
	return ok
}

// validRecordAt decodes and fully checks the record at position rel of g.
func (r *recoveryScan) validRecordAt(g *segment, rel, fileSize int64) (*protocol.MessageExt, bool) {
	var hdr [8]byte
	if _, err := g.file.ReadAt(hdr[:], rel); err != nil {
		return nil, false
	}
	total := int64(int32(binary.BigEndian.Uint32(hdr[:])))
	magic := binary.BigEndian.Uint32(hdr[4:])
	if !protocol.IsStoredMagic(magic) || total < minRecordSize || rel+total > fileSize {
		return nil, false
	}
	buf := make([]byte, total)
	if _, err := g.file.ReadAt(buf, rel); err != nil {
		return nil, false
	}
	m, _, err := protocol.DecodeStoredMessage(buf, false, true)
	if err != nil || m.CommitLogOffset != g.start+rel || checkRecordFields(m) != nil {
		return nil, false
	}
	return m, true
}

// checkRecordFields checks what an old record's body CRC does not cover
// but dispatch relies on: a valid topic name and queue id.
func checkRecordFields(m *protocol.MessageExt) error {
	if err := protocol.ValidateTopic(m.Topic); err != nil {
		return fmt.Errorf("record has an invalid topic: %v", err)
	}
	if m.QueueID < 0 || m.QueueOffset < 0 {
		return fmt.Errorf("record has queue id %d and queue offset %d", m.QueueID, m.QueueOffset)
	}
	return nil
}

// scan verifies and re-dispatches records from start and returns the end of
// the valid log (having truncated a torn tail), or ErrCorrupt.
func (r *recoveryScan) scan(start int64) (int64, error) {
	if len(r.segs) == 0 {
		return 0, nil
	}
	i := r.locate(start)
	if i < 0 {
		// start is the end of the last segment: it ended with its marker
		// and the next one was never created. Nothing to verify.
		return start, nil
	}
	var buf []byte
	for ; i < len(r.segs); i++ {
		g := r.segs[i]
		size, err := g.fileSize()
		if err != nil {
			return 0, err
		}
		rel := max(start-g.start, 0)
		if rel > size {
			rel = size
		}
		br := bufio.NewReaderSize(io.NewSectionReader(g.file, rel, size-rel), 1<<20)
		for {
			if rel == size {
				if i == len(r.segs)-1 {
					return g.start + rel, nil
				}
				return r.bad(i, rel, "the segment ends without an end-of-segment marker although later segments exist")
			}
			if size-rel < 8 {
				return r.bad(i, rel, fmt.Sprintf("the last %d bytes of the file are too short for a record header", size-rel))
			}
			hdr, err := br.Peek(8)
			if err != nil {
				return 0, fmt.Errorf("store: read %s: %w", g.path, err)
			}
			total := int64(int32(binary.BigEndian.Uint32(hdr)))
			magic := binary.BigEndian.Uint32(hdr[4:])
			if magic == protocol.BlankMagicCode {
				if total != g.size-rel {
					return r.bad(i, rel, fmt.Sprintf("end-of-segment marker declares %d bytes but %d remain in the segment", total, g.size-rel))
				}
				if i == len(r.segs)-1 {
					return g.end(), nil
				}
				break // on to the next segment
			}
			if !protocol.IsStoredMagic(magic) {
				return r.bad(i, rel, fmt.Sprintf("bad magic code %#08x", magic))
			}
			if total < minRecordSize || rel+total+blankMarkerLen > g.size {
				return r.bad(i, rel, fmt.Sprintf("record declares an impossible size of %d bytes", total))
			}
			if rel+total > size {
				return r.bad(i, rel, fmt.Sprintf("record of %d bytes is cut off by the end of the file after %d bytes", total, size-rel))
			}
			if int64(cap(buf)) < total {
				buf = make([]byte, total)
			}
			rec := buf[:total]
			if _, err := io.ReadFull(br, rec); err != nil {
				return 0, fmt.Errorf("store: read %s: %w", g.path, err)
			}
			m, _, err := protocol.DecodeStoredMessage(rec, false, true)
			if errors.Is(err, protocol.ErrBodyCRC) || errors.Is(err, protocol.ErrRecordCRC) {
				return r.badCRC(i, rel, rec, err)
			}
			if err != nil {
				return r.bad(i, rel, err.Error())
			}
			if m.CommitLogOffset != g.start+rel {
				return r.bad(i, rel, fmt.Sprintf("record claims commit-log offset %d", m.CommitLogOffset))
			}
			// An old record's CRC covers only its body; a damaged topic
			// must not become a directory name.
			if err := checkRecordFields(m); err != nil {
				return r.bad(i, rel, err.Error())
			}
			if err := r.dispatch(g, m, g.start+rel, int32(total)); err != nil {
				return 0, err
			}
			r.records++
			rel += total
		}
	}
	return r.segs[len(r.segs)-1].end(), nil
}

// bad handles the first bad record, at position rel of segment i.
func (r *recoveryScan) bad(i int, rel int64, reason string) (int64, error) {
	s := r.s
	g := r.segs[i]
	at := g.start + rel
	if next, ok, err := r.findValidAfter(i, rel); err != nil {
		return 0, err
	} else if ok {
		return 0, fmt.Errorf("%w: the commit-log record at offset %d (file %s, position %d) is corrupt (%s), "+
			"but valid records follow from offset %d, so this is not a torn tail. zonemq does not drop records from the "+
			"middle of the log: restore the file from a copy, or accept the loss by truncating %s to %d bytes and "+
			"removing the later segments, then start again",
			ErrCorrupt, at, g.path, rel, reason, next, g.path, rel)
	}
	oldEnd := r.logEnd()
	size, err := g.fileSize()
	if err != nil {
		return 0, err
	}
	dropped := size - rel
	if err := g.file.Truncate(rel); err != nil {
		return 0, fmt.Errorf("store: truncate torn tail of %s: %w", g.path, err)
	}
	later := r.segs[i+1:]
	for _, lg := range later {
		if sz, err := lg.fileSize(); err == nil {
			dropped += sz
		}
	}
	if len(later) > 0 {
		s.cl.segMu.Lock()
		s.cl.segments = s.cl.segments[:len(s.cl.segments)-len(later)]
		s.cl.segMu.Unlock()
		for _, lg := range later {
			if err := lg.remove(); err != nil {
				return 0, fmt.Errorf("store: remove segment after a torn tail: %w", err)
			}
		}
		syncDir(s.cl.dir)
		syncDir(s.cl.indexDir)
	}
	r.segs = r.segs[:i+1]
	s.log.Warn("commit log: truncated a torn tail",
		"from", at, "to", oldEnd, "bytes", dropped, "reason", reason, "segment", g.path, "segmentsRemoved", len(later))
	if at < r.cpPos && r.hasCP {
		s.log.Error("the torn tail starts below the flushed checkpoint: records reported durable were lost",
			"checkpoint", r.cpPos, "logEnd", at)
		s.lostDurable = true
	}
	return at, nil
}

var (
	magicV1  = binary.BigEndian.AppendUint32(nil, protocol.MessageMagicV1)
	magicV2  = binary.BigEndian.AppendUint32(nil, protocol.MessageMagicV2)
	magicCRC = binary.BigEndian.AppendUint32(nil, protocol.MessageMagicCRC)
)

// nextMagic returns the index in data of the first stored magic code at or
// after k, -1 if there is none.
func nextMagic(data []byte, k int) int {
	found := -1
	for j := k; j+4 <= len(data); j++ {
		idx := bytes.Index(data[j:], magicV1[:3]) // shared by v1 and v2
		if idx < 0 || j+idx+4 > len(data) {
			break
		}
		j += idx
		if c := data[j+3]; c == magicV1[3] || c == magicV2[3] {
			found = j
			break
		}
	}
	if idx := bytes.Index(data[k:], magicCRC); idx >= 0 && (found < 0 || k+idx < found) {
		found = k + idx
	}
	return found
}

// findValidAfter searches every byte after position rel of segment i, and
// all later segments, for a fully valid record (magic, size, CRC and its own
// offset). Its existence means the bad record is not a torn tail.
func (r *recoveryScan) findValidAfter(i int, rel int64) (int64, bool, error) {
	chunk := make([]byte, 1<<20)
	for j := i; j < len(r.segs); j++ {
		g := r.segs[j]
		size, err := g.fileSize()
		if err != nil {
			return 0, false, err
		}
		from := int64(0)
		if j == i {
			from = rel + 1
		}
		// Magic codes sit at record start + 4; chunks overlap by 3 bytes so a
		// code across a chunk boundary is seen exactly once.
		for base := from + 4; base < size; {
			n, err := g.file.ReadAt(chunk, base)
			if err != nil && !errors.Is(err, io.EOF) {
				return 0, false, fmt.Errorf("store: read %s: %w", g.path, err)
			}
			data := chunk[:n]
			for k := 0; ; k++ {
				if k = nextMagic(data, k); k < 0 {
					break
				}
				p := base + int64(k) - 4
				if _, ok := r.validRecordAt(g, p, size); ok {
					return g.start + p, true, nil
				}
			}
			if n <= 3 {
				break
			}
			base += int64(n) - 3
		}
	}
	return 0, false, nil
}

// mayCreate reports whether a record at pos may create a consume queue
// that does not exist: only past the checkpoint, or for queues the
// checkpoint knew — so a deleted topic is not brought back.
func (r *recoveryScan) mayCreate(topic string, queueID int32, pos int64) bool {
	if !r.hasCP || pos >= r.cpPos {
		return true
	}
	_, ok := r.cpQueues[topic][queueID]
	return ok
}

// dispatch re-applies a verified record to its consume queue and key index.
func (r *recoveryScan) dispatch(g *segment, m *protocol.MessageExt, pos int64, size int32) error {
	s := r.s
	g.noteStoreTime(m.StoreTimestamp)
	if s.cl.lastStoreTime < m.StoreTimestamp {
		s.cl.lastStoreTime = m.StoreTimestamp
	}
	var keys []byte
	mkeys, uniq := messageKeys(m.Properties)
	for _, k := range mkeys {
		h := keyHash(m.Topic, k)
		keys = appendKeyEntries(keys, []uint64{h}, pos)
		if k == uniq {
			s.recent.add(h)
		}
	}
	if err := g.index.appendLocked(keys); err != nil {
		return err
	}

	q := s.queue(m.Topic, m.QueueID)
	if q == nil {
		if !r.mayCreate(m.Topic, m.QueueID, pos) {
			return nil
		}
		q = s.queueForPutLocked(m.Topic, m.QueueID)
	}
	off := m.QueueOffset
	minOff, maxOff := q.minOffset.Load(), q.maxOffset.Load()
	switch {
	case off < minOff:
		return nil // below the readable range already
	case off < maxOff:
		e, err := q.entryAt(off)
		if err == nil && e.phys == pos && e.size == size {
			return nil
		}
		s.log.Warn("consume queue disagrees with the commit log; rewriting it from this entry",
			"topic", m.Topic, "queue", m.QueueID, "queueOffset", off, "entryPointsAt", e.phys, "recordAt", pos, "entriesDropped", maxOff-off)
		if err := q.truncateTo(off); err != nil {
			return err
		}
	case off > maxOff:
		if maxOff != minOff {
			return fmt.Errorf("%w: consume queue %s/%d ends at offset %d but the commit-log record at %d has queue offset %d: "+
				"entries [%d,%d) are missing and not in the verified part of the log. Delete %s to re-dispatch the whole "+
				"commit log, or delete %s to rebuild this queue from offset %d on",
				ErrCorrupt, m.Topic, m.QueueID, maxOff, pos, off, maxOff, off, checkpointPath(s.dir), q.dir, off)
		}
		// No readable entry left: the queue restarts at this record.
		s.log.Warn("consume queue rebuilt from a later offset; earlier offsets have no record in the verified log",
			"topic", m.Topic, "queue", m.QueueID, "from", off, "previousMax", maxOff)
		if err := q.resetTo(off); err != nil {
			return err
		}
	}
	tags, _ := protocol.Property(m.Properties, protocol.PropertyTags)
	var e [cqEntrySize]byte
	putCQEntry(e[:], cqEntry{phys: pos, size: size, tags: protocol.TagsHashCode(tags)})
	if err := q.appendLocked(off, e[:]); err != nil {
		return err
	}
	q.publishLocked(off+1, pos+int64(size))
	r.appended++
	return nil
}

// dropEntriesPast truncates every consume queue before its first entry whose
// record ends past the end of the log, logging what it dropped.
func (r *recoveryScan) dropEntriesPast(end int64) error { return r.s.dropQueueEntriesPast(end) }

// dropQueueEntriesPast truncates every consume queue before its first entry
// whose record ends past end, logging what it dropped. Caller holds putMu
// or runs recovery.
func (s *Store) dropQueueEntriesPast(end int64) error {
	for _, q := range s.allQueues() {
		if q.lastPhysEnd <= end {
			continue
		}
		lo, hi := q.minOffset.Load(), q.maxOffset.Load()
		maxOff := hi
		for lo < hi {
			mid := lo + (hi-lo)/2
			e, err := q.entryAt(mid)
			if err != nil {
				return err
			}
			if e.phys+int64(e.size) > end {
				hi = mid
			} else {
				lo = mid + 1
			}
		}
		if err := q.truncateTo(lo); err != nil {
			return err
		}
		s.log.Warn("consume queue: dropped entries pointing past the end of the commit log",
			"topic", q.topic, "queue", q.queueID, "fromOffset", lo, "toOffset", maxOff, "entries", maxOff-lo, "commitLogEnd", end)
	}
	return nil
}
