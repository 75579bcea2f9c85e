package store

import (
	"fmt"

	"github.com/zonemq/zonemq/internal/protocol"
)

// badCRC handles a record at position rel of segment i that is complete and
// well framed but fails its CRC: its whole-record CRC32C, or for an old
// record its body CRC. Unlike a torn tail such a record
// was written whole — it may have been acknowledged, even fsynced — so
// recovery drops it only when the operator said so
// (Options.RecoverDropCorrupt); otherwise Open fails with ErrCorrupt and
// changes nothing. Valid records after it make it middle-of-log damage,
// which bad refuses in any case.
func (r *recoveryScan) badCRC(i int, rel int64, rec []byte, crcErr error) (int64, error) {
	s := r.s
	g := r.segs[i]
	at := g.start + rel
	m, _, err := protocol.DecodeStoredMessage(rec, false, false)
	if err != nil || m.CommitLogOffset != at {
		return r.bad(i, rel, crcErr.Error())
	}
	if _, ok, err := r.findValidAfter(i, rel); err != nil {
		return 0, err
	} else if ok {
		return r.bad(i, rel, crcErr.Error())
	}
	durable := "past the flushed checkpoint"
	if r.hasCP && at < r.cpPos {
		durable = "below the flushed checkpoint, so it was fsynced and acknowledged"
	}
	what := fmt.Sprintf("the last commit-log record (offset %d, %d bytes, topic %q, queue %d, queue offset %d, file %s, position %d, %s) "+
		"is complete but fails its CRC check: its bytes were damaged after they were written",
		at, len(rec), m.Topic, m.QueueID, m.QueueOffset, g.path, rel, durable)
	if !s.opts.RecoverDropCorrupt {
		return 0, fmt.Errorf("%w: %s. zonemq does not drop a whole record by itself: restore the file from a copy, "+
			"or start once with --recover-drop-corrupt (store Options.RecoverDropCorrupt) to drop this record", ErrCorrupt, what)
	}
	s.log.Error("recovery drops a corrupt record because RecoverDropCorrupt (--recover-drop-corrupt) is set",
		"commitLogOffset", at, "bytes", len(rec), "topic", m.Topic, "queue", m.QueueID, "queueOffset", m.QueueOffset,
		"storeTimestamp", m.StoreTimestamp, "segment", g.path, "position", rel, "durability", durable, "err", crcErr)
	return r.bad(i, rel, crcErr.Error())
}
