package store

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/zonemq/zonemq/internal/protocol"
)

// ErrCorruptRecord means a record a read needed fails its checks (its
// CRC32C or an old record's body CRC, framing, or its own commit-log offset): its bytes were damaged on disk. It
// is never served; the store logs it at Error and counts it (CorruptRecords).
var ErrCorruptRecord = errors.New("store: corrupt record")

// verifyRecord checks a record read for commit-log offset phys: one record,
// the right offset, bytes that match its CRC32C (an old record: a body that
// matches its body CRC).
func verifyRecord(rec []byte, phys int64) error {
	if err := protocol.VerifyStoredRecord(rec); err != nil {
		return fmt.Errorf("%w: commit-log offset %d: %w", ErrCorruptRecord, phys, err)
	}
	// An old record's CRC covers only its body; a damaged offset field
	// would make clients commit and look up the wrong place.
	if got := int64(binary.BigEndian.Uint64(rec[protocol.StoredOffsetCommitLogOffset:])); got != phys {
		return fmt.Errorf("%w: the record at commit-log offset %d claims offset %d", ErrCorruptRecord, phys, got)
	}
	return nil
}

// reportCorrupt logs a corrupt record found by a read and counts it. where
// names the read path (pull, query, view, …).
func (s *Store) reportCorrupt(where, topic string, queueID int32, queueOffset, phys int64, err error) {
	n := s.corruptReads.Add(1)
	s.log.Error("corrupt record not served: its bytes on disk were damaged; restore the segment from a copy or move the consumer past it",
		"read", where, "topic", topic, "queue", queueID, "queueOffset", queueOffset, "commitLogOffset", phys,
		"segment", offsetName(phys-phys%s.opts.SegmentSize), "err", err, "corruptReadsTotal", n)
}

// LostDurableRecords reports whether Open found the commit log ending below
// its flushed checkpoint: records it had reported fsynced are gone (a disk
// that lost or damaged written data). A replicated broker must not lead
// its group until it has copied them back.
func (s *Store) LostDurableRecords() bool { return s.lostDurable }

// CorruptRecords returns how many times a read found a corrupt record since
// Open (a record read twice counts twice). The broker exports it as a metric.
func (s *Store) CorruptRecords() int64 { return s.corruptReads.Load() }

// offsetOf returns the queue offset in [lo, hi) whose entry points at
// commit-log offset phys, by binary search (entries point ever further into
// the log); lo if none does. Used only on the rare corrupt-record path, so
// the read path need not remember each entry's offset.
func (q *consumeQueue) offsetOf(lo, hi, phys int64) int64 {
	first := lo
	for lo < hi {
		mid := lo + (hi-lo)/2
		e, err := q.entryAt(mid)
		if err != nil {
			return first
		}
		switch {
		case e.phys == phys:
			return mid
		case e.phys < phys:
			lo = mid + 1
		default:
			hi = mid
		}
	}
	return first
}
