package store

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/zonemq/zonemq/internal/protocol"
)

const (
	// defaultMaxTransferBytes bounds a GetMessages answer when the caller
	// gives no byte limit (one record is always returned, whatever its size).
	defaultMaxTransferBytes = 4 << 20
	// maxScanEntries bounds the consume-queue entries one GetMessages call
	// steps over, so a filter that rejects everything cannot pin a reader.
	maxScanEntries = 16_000
	// scanChunkEntries is how many entries are read per ReadAt.
	scanChunkEntries = 256
)

// GetMessages reads up to maxNums records (<=0 means 1) and about maxBytes
// bytes (<=0 means 4 MiB; the first record is always taken) of topic/queueID
// from queue offset `offset`. Entries whose tag hash the filter rejects
// (filter nil accepts all) are stepped over. At most 16 000 entries are
// scanned per call.
//
// Status follows RocketMQ's DefaultMessageStore.getMessage on a master:
// unknown or never-written queue → NoMessageInQueue, next 0; offset < min →
// OffsetTooSmall, next min; offset == max → OffsetOverflowOne, next offset;
// offset > max → OffsetOverflowBadly, next 0 if min is 0 else max; otherwise
// Found, or NoMatchedMessage / MessageWasRemoving when nothing was taken, with
// next just past the scanned entries.
func (s *Store) GetMessages(topic string, queueID int32, offset int64, maxNums, maxBytes int, filter func(tagsCode int64) bool) GetResult {
	return s.GetMessagesInto(nil, topic, queueID, offset, maxNums, maxBytes, filter)
}

// GetMessagesInto is GetMessages reading the records back to back into
// buf's storage when it is large enough (else into a new buffer), so a
// caller answering pulls can reuse its buffers: the result's Messages and
// Body alias buf until the caller is done with them.
func (s *Store) GetMessagesInto(buf []byte, topic string, queueID int32, offset int64, maxNums, maxBytes int, filter func(tagsCode int64) bool) GetResult {
	return s.getMessages(buf, topic, queueID, offset, maxNums, maxBytes, filter, NoFence)
}

// getMessages is GetMessagesInto stopping before the first entry whose
// record ends past fence (fence.go); it sets FencedAt when it stopped there.
func (s *Store) getMessages(buf []byte, topic string, queueID int32, offset int64, maxNums, maxBytes int, filter func(tagsCode int64) bool, fence int64) GetResult {
	if maxNums <= 0 {
		maxNums = 1
	}
	if maxBytes <= 0 {
		maxBytes = defaultMaxTransferBytes
	}
	q := s.queue(topic, queueID)
	if q == nil {
		return GetResult{Status: NoMessageInQueue, NextBeginOffset: 0}
	}
	minOff, maxOff := q.minOffset.Load(), q.maxOffset.Load()
	res := GetResult{MinOffset: minOff, MaxOffset: maxOff}
	switch {
	case maxOff == 0:
		res.Status, res.NextBeginOffset = NoMessageInQueue, 0
		return res
	case offset < minOff:
		res.Status, res.NextBeginOffset = OffsetTooSmall, minOff
		return res
	case offset == maxOff:
		res.Status, res.NextBeginOffset = OffsetOverflowOne, offset
		return res
	case offset > maxOff:
		res.Status = OffsetOverflowBadly
		if minOff == 0 {
			res.NextBeginOffset = 0
		} else {
			res.NextBeginOffset = maxOff
		}
		return res
	}

	res.Status = NoMatchedMessage
	clMin := s.cl.minOffset()
	picked := make([]cqEntry, 0, min(maxNums, scanChunkEntries)) // one allocation, not one per doubling
	limit := int64(max(maxScanEntries, maxNums))
	chunk := make([]byte, scanChunkEntries*cqEntrySize)
	pos, total := offset, 0
scan:
	for pos < maxOff && pos-offset < limit {
		want := min(int64(scanChunkEntries), limit-(pos-offset))
		n, err := q.readEntries(pos, chunk[:want*cqEntrySize])
		if err != nil || n == 0 {
			if pos == offset {
				// The file holding offset is gone (deleted under us).
				res.Status, res.NextBeginOffset = OffsetFoundNull, q.nextFileStart(offset)
				return res
			}
			break
		}
		for i := 0; i < n; i++ {
			e := getCQEntry(chunk[i*cqEntrySize:])
			if len(picked) > 0 && (len(picked) >= maxNums || total+int(e.size) > maxBytes) {
				break scan // batch full; this entry is not consumed
			}
			if end := e.phys + int64(e.size); end > fence && !e.blank() {
				// Not confirmed yet: neither read nor stepped over (a
				// filter must not skip it either: it may be cut and its
				// offset taken by a record the filter accepts).
				res.FencedAt = end
				break scan
			}
			pos++
			if filter != nil && !filter(e.tags) {
				if len(picked) == 0 {
					res.Status = NoMatchedMessage
				}
				continue
			}
			if e.blank() || e.phys < clMin {
				if len(picked) == 0 {
					res.Status = MessageWasRemoving
				}
				continue
			}
			picked = append(picked, e)
			total += int(e.size)
			res.Status = Found
		}
	}
	res.NextBeginOffset = pos
	if len(picked) > 0 {
		s.takeVerified(&res, q, offset, picked, buf[:0])
	}
	return res
}

// takeVerified reads the picked records (scanned from queue offset from)
// back to back into buf (grown if too small), verifying each. A corrupt
// record ends the batch before it, so the consumer's next pull starts at it
// again; when it is the first, res says MessageCorrupt.
//
// The records handed out are in the v1 format clients decode: each one's
// CRC32C trailer is cut off once verified (protocol.StripRecordCRC) and the
// records are moved down to stay back to back in the buffer, so the buffer
// is still the pull body as it is (one memmove of the batch).
func (s *Store) takeVerified(res *GetResult, q *consumeQueue, from int64, picked []cqEntry, buf []byte) {
	block, recs := s.readRecords(buf, picked)
	n := 0       // verified records, compacted in place: no second slice
	r, w := 0, 0 // where the record was read in block, where it goes
	for i, rec := range recs {
		at := r
		r += int(picked[i].size) // readRecords leaves the room of a record it could not read
		if rec == nil {
			continue // deleted under us
		}
		if err := verifyRecord(rec, picked[i].phys); err != nil {
			qoff := q.offsetOf(from, res.NextBeginOffset, picked[i].phys)
			s.reportCorrupt("pull", q.topic, q.queueID, qoff, picked[i].phys, err)
			res.NextBeginOffset = qoff
			if n == 0 {
				res.Status, res.CorruptOffset = MessageCorrupt, picked[i].phys
			}
			break
		}
		rec = protocol.StripRecordCRC(rec)
		if at != w {
			copy(block[w:], rec)
		}
		recs[n] = block[w : w+len(rec) : w+len(rec)]
		w += len(rec)
		n++
	}
	res.block = block[:w]
	if n > 0 {
		res.Messages = recs[:n]
	} else if res.Status != MessageCorrupt {
		res.Status = MessageWasRemoving // deleted while we scanned
	}
}

// coalesceGap is the most bytes of other records between two records that
// readRecords still reads as one run: a run of adjacent records with one
// ReadAt, a run with gaps through the read cache (readcache.go), whose
// blocks the other queues' pulls then copy their records from. Records
// farther apart are read one by one.
const coalesceGap = 16 << 10

// readRecords reads the records of entries back to back into buf (a new
// buffer if buf's capacity is too small) and returns the filled buffer and
// each entry's record in it, its capacity cut at its end so it is safe to
// keep or append to; nil when it cannot be read (deleted under us).
func (s *Store) readRecords(buf []byte, entries []cqEntry) ([]byte, [][]byte) {
	total := 0
	for _, e := range entries {
		total += int(e.size)
	}
	if cap(buf) < total {
		buf = make([]byte, 0, total)
	}
	buf = buf[:total] // no append below: the slices handed out stay valid
	out := make([][]byte, len(entries))
	pos := 0 // where entries[i]'s record goes in buf
	for i := 0; i < len(entries); {
		first := entries[i]
		end := first.phys + int64(first.size)
		adjacent := true
		j := i + 1
		if g := s.cl.segmentFor(first.phys); g != nil {
			for j < len(entries) {
				e := entries[j]
				if e.phys < end || e.phys-end > coalesceGap || e.phys+int64(e.size) > g.end() {
					break
				}
				adjacent = adjacent && e.phys == end
				end = e.phys + int64(e.size)
				j++
			}
		}
		var err error
		if adjacent {
			err = s.cl.readInto(buf[pos:pos+int(end-first.phys)], first.phys)
		}
		for k := i; k < j; k++ {
			e := entries[k]
			rec := buf[pos : pos+int(e.size) : pos+int(e.size)]
			var ok bool
			if adjacent {
				ok = err == nil
			} else {
				ok = s.reads.readInto(s.cl, rec, e.phys) == nil
			}
			if !ok {
				// The run could not be read (a segment deleted under us):
				// what is left of it, record by record.
				ok = s.cl.readInto(rec, e.phys) == nil
			}
			if ok {
				out[k] = rec
			}
			pos += int(e.size)
		}
		i = j
	}
	return buf, out
}

// storeTimeOf reads the STORETIMESTAMP of the record at phys.
func (s *Store) storeTimeOf(phys int64) (int64, error) {
	// Enough for an IPv6 born host; every record is longer (91+ bytes).
	var hdr [protocol.StoredOffsetBornTimestamp + 8 + 20 + 8]byte
	if err := s.cl.readInto(hdr[:], phys); err != nil {
		return 0, err
	}
	off := storeTimestampOffset(int32(binary.BigEndian.Uint32(hdr[protocol.StoredOffsetSysFlag:])))
	return int64(binary.BigEndian.Uint64(hdr[off:])), nil
}

// StoreTimeAt returns the store timestamp (ms) of topic/queueID's message
// at queue offset offset; ErrNotFound when it is outside [min, max) or its
// record is gone.
func (s *Store) StoreTimeAt(topic string, queueID int32, offset int64) (int64, error) {
	q := s.queue(topic, queueID)
	if q == nil {
		return 0, fmt.Errorf("%w: no consume queue %s/%d", ErrNotFound, topic, queueID)
	}
	if offset < q.minOffset.Load() || offset >= q.maxOffset.Load() {
		return 0, fmt.Errorf("%w: offset %d is outside [%d,%d) of %s/%d", ErrNotFound, offset, q.minOffset.Load(), q.maxOffset.Load(), topic, queueID)
	}
	e, err := q.entryAt(offset)
	if err != nil {
		return 0, err
	}
	return s.storeTimeOf(e.phys)
}

// OffsetByTimestamp returns the first queue offset of topic/queueID whose
// message was stored at or after ts (ms), by binary search (store times do
// not decrease along the log); the max offset if there is none.
func (s *Store) OffsetByTimestamp(topic string, queueID int32, ts int64) int64 {
	q := s.queue(topic, queueID)
	if q == nil {
		return 0
	}
	lo, hi := q.minOffset.Load(), q.maxOffset.Load()
	for lo < hi {
		mid := lo + (hi-lo)/2
		t, err := s.StoreTimeAt(topic, queueID, mid)
		if err != nil {
			t = math.MinInt64 // deleted under us: older than anything left
		}
		if t >= ts {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// MessageAt decodes the record starting at commitLogOffset (a copy; its
// CRC32C, or an old record's body CRC, is verified). It fails with ErrNotFound if no record starts there.
func (s *Store) MessageAt(commitLogOffset int64) (*protocol.MessageExt, error) {
	var hdr [8]byte
	if err := s.cl.readInto(hdr[:], commitLogOffset); err != nil {
		return nil, err
	}
	size := int32(binary.BigEndian.Uint32(hdr[:]))
	magic := binary.BigEndian.Uint32(hdr[4:])
	if !protocol.IsStoredMagic(magic) || size <= 8 {
		return nil, fmt.Errorf("%w: no record starts at commit-log offset %d", ErrNotFound, commitLogOffset)
	}
	rec, err := s.cl.read(commitLogOffset, int(size))
	if err != nil {
		return nil, err
	}
	m, _, err := protocol.DecodeStoredMessage(rec, false, true)
	if err != nil {
		// The magic and size were plausible, so a record starts here and
		// its bytes are damaged.
		err = fmt.Errorf("%w: commit-log offset %d: %w", ErrCorruptRecord, commitLogOffset, err)
		s.reportCorrupt("message", "", -1, -1, commitLogOffset, err)
		return nil, err
	}
	if m.CommitLogOffset != commitLogOffset {
		return nil, fmt.Errorf("%w: no record starts at commit-log offset %d (the bytes there claim offset %d)", ErrNotFound, commitLogOffset, m.CommitLogOffset)
	}
	return m, nil // rec is ours alone, so the body may alias it
}
