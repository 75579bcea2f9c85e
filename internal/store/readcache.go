package store

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// The read cache's geometry: readBlocks blocks of readBlockSize bytes (8 MiB).
const (
	readBlockSize = 64 << 10
	readBlocks    = 128
)

// readCache keeps recently read blocks of the commit log, so that the
// consumers of a topic whose queues were written in turn (a producer
// spreading its sends interleaves them) share one read of the bytes they
// all need: the pull of one queue reads the blocks its records lie in, the
// other queues' records in them included, and the pulls of the other
// queues copy theirs from memory instead of reading the same bytes again.
// A system call costs about as much as copying tens of KiB, so reading a
// whole block is cheap next to a read per record.
//
// It is direct-mapped (a block has one slot, consecutive blocks consecutive
// slots), so the last 8 MiB a reader went through stay while readers keep
// close together. Only records read close together go through it
// (readRecords): a lone record is read on its own, so readers far apart
// cost no more than without it.
//
// Bytes below the write position never change, except when TruncateLog
// takes the log back; it bumps gen, and blocks read under an older gen are
// never served.
type readCache struct {
	blockSize int64
	gen       atomic.Uint64
	slots     [readBlocks]readSlot
}

type readSlot struct {
	mu    sync.RWMutex
	start int64 // global offset of the block; -1 when empty
	gen   uint64
	data  []byte // the block's bytes read, from start (at most blockSize)
}

func newReadCache(segmentSize int64) *readCache {
	c := &readCache{blockSize: min(readBlockSize, segmentSize)}
	for i := range c.slots {
		c.slots[i].start = -1
	}
	return c
}

// invalidate forgets every block: the log's bytes from some offset on are
// about to change, or just did.
func (c *readCache) invalidate() { c.gen.Add(1) }

// readInto fills dst with the commit log's bytes from off, which must lie
// below the write position inside one segment, through the cache.
func (c *readCache) readInto(cl *commitLog, dst []byte, off int64) error {
	for len(dst) > 0 {
		g := cl.segmentFor(off)
		if g == nil {
			return fmt.Errorf("%w: commit-log offset %d is below the oldest segment (deleted)", ErrNotFound, off)
		}
		// Blocks are aligned within their segment and never cross its end.
		start := g.start + (off-g.start)/c.blockSize*c.blockSize
		n, err := c.copyFrom(cl, dst, off, start, min(start+c.blockSize, g.end()))
		if err != nil {
			return err
		}
		dst, off = dst[n:], off+int64(n)
	}
	return nil
}

// copyFrom copies to dst what of [off, off+len(dst)) lies in the block
// [start, end), reading the block first unless its slot holds enough of it.
func (c *readCache) copyFrom(cl *commitLog, dst []byte, off, start, end int64) (int, error) {
	want := min(off+int64(len(dst)), end)
	// gen is read before the bytes: a truncation bumping it after we read
	// makes what we store unservable.
	gen := c.gen.Load()
	s := &c.slots[uint64(start/c.blockSize)%readBlocks]
	s.mu.RLock()
	if s.start == start && s.gen == gen && start+int64(len(s.data)) >= want {
		n := copy(dst, s.data[off-start:want-start])
		s.mu.RUnlock()
		return n, nil
	}
	s.mu.RUnlock()

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.start != start || s.gen != gen || start+int64(len(s.data)) < want {
		// Read the whole block as far as it is written.
		upto := min(end, cl.writePos.Load())
		if upto < want {
			return 0, fmt.Errorf("%w: commit-log range [%d,%d) is outside the written log", ErrNotFound, off, want)
		}
		if int64(cap(s.data)) < c.blockSize {
			s.data = make([]byte, c.blockSize)
		}
		s.start = -1 // empty unless the read succeeds
		buf := s.data[:upto-start]
		if err := cl.readInto(buf, start); err != nil {
			s.data = s.data[:0]
			return 0, err
		}
		s.start, s.gen, s.data = start, gen, buf
	}
	return copy(dst, s.data[off-start:want-start]), nil
}
