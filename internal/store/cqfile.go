package store

import (
	"container/list"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
)

// DefaultMaxOpenQueueFiles is Options.MaxOpenQueueFiles' default.
const DefaultMaxOpenQueueFiles = 2048

// cqFile is one consume-queue file, named by its start byte offset
// (start queue offset × 20), as RocketMQ names them. Its descriptor is
// opened on demand and closed by the handle cache when it has been unused
// longest, so a broker with 100 000 queues holds a fixed number of
// descriptors, not one per queue file.
type cqFile struct {
	start   int64 // queue offset of the file's first entry
	path    string
	handles *handleCache

	// Guarded by handles.mu.
	file    *os.File      // nil while closed
	refs    int           // callers using file now; never closed while > 0
	elem    *list.Element // in handles.idle while open and unused
	removed bool          // forgotten: never reopened
}

// handleCache bounds the open consume-queue descriptors of a store. A
// file's descriptor is acquired for one read, write or fsync and released
// right after; released descriptors stay open in LRU order until the
// budget is exceeded. Descriptors in use are never closed, so the budget
// can be exceeded by at most the number of concurrent users.
type handleCache struct {
	mu     sync.Mutex
	budget int
	open   int
	idle   list.List // of *cqFile, most recently released at the front

	opens  atomic.Int64 // descriptors opened (for metrics and tests)
	closes atomic.Int64 // descriptors closed by eviction
}

func newHandleCache(budget int) *handleCache {
	if budget <= 0 {
		budget = DefaultMaxOpenQueueFiles
	}
	return &handleCache{budget: budget}
}

// acquire returns f's descriptor, opening it if needed. Pair with release.
func (c *handleCache) acquire(f *cqFile) (*os.File, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f.removed {
		return nil, fmt.Errorf("store: consume-queue file %s: %w", f.path, os.ErrClosed)
	}
	if f.file == nil {
		// Opening under mu serialises opens; one open costs microseconds,
		// and it keeps two readers from opening the same file twice.
		file, err := os.OpenFile(f.path, os.O_RDWR, 0)
		if err != nil {
			return nil, fmt.Errorf("store: open consume-queue file: %w", err)
		}
		f.file = file
		c.open++
		c.opens.Add(1)
		c.evictLocked()
	}
	if f.elem != nil {
		c.idle.Remove(f.elem)
		f.elem = nil
	}
	f.refs++
	return f.file, nil
}

// release ends one use of f's descriptor.
func (c *handleCache) release(f *cqFile) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f.refs--
	if f.refs > 0 || f.file == nil {
		return
	}
	if f.removed {
		c.closeLocked(f)
		return
	}
	f.elem = c.idle.PushFront(f)
	c.evictLocked()
}

// adopt registers a descriptor the caller opened (a new file) as in use;
// pair with release.
func (c *handleCache) adopt(f *cqFile, file *os.File) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f.file, f.refs = file, 1
	c.open++
	c.opens.Add(1)
	c.evictLocked()
}

// forget closes f's descriptor (or has its last user close it) and keeps
// it from being reopened: the file is being removed or the queue closed.
func (c *handleCache) forget(f *cqFile) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f.removed = true
	if f.refs == 0 && f.file != nil {
		c.closeLocked(f)
	}
}

// evictLocked closes idle descriptors, least recently used first, while
// more than the budget are open. Caller holds mu.
func (c *handleCache) evictLocked() {
	for c.open > c.budget {
		back := c.idle.Back()
		if back == nil {
			return // every open descriptor is in use
		}
		c.closeLocked(back.Value.(*cqFile))
		c.closes.Add(1)
	}
}

// closeLocked closes f's descriptor. Caller holds mu; f.refs is 0.
func (c *handleCache) closeLocked(f *cqFile) {
	if f.elem != nil {
		c.idle.Remove(f.elem)
		f.elem = nil
	}
	// Data written through it is in the page cache; an fsync through a
	// later descriptor of the same file makes it durable.
	f.file.Close()
	f.file = nil
	c.open--
}

// openCount returns the consume-queue descriptors open now.
func (c *handleCache) openCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.open
}

// readAt reads len(b) bytes at off.
func (f *cqFile) readAt(b []byte, off int64) error {
	file, err := f.handles.acquire(f)
	if err != nil {
		return err
	}
	defer f.handles.release(f)
	_, err = file.ReadAt(b, off)
	return err
}

// writeAt writes b at off.
func (f *cqFile) writeAt(b []byte, off int64) error {
	file, err := f.handles.acquire(f)
	if err != nil {
		return err
	}
	defer f.handles.release(f)
	_, err = file.WriteAt(b, off)
	return err
}

// datasync makes the file's data durable.
func (f *cqFile) datasync() error {
	file, err := f.handles.acquire(f)
	if err != nil {
		return err
	}
	defer f.handles.release(f)
	return datasync(file)
}

// size returns the file's length.
func (f *cqFile) size() (int64, error) {
	st, err := os.Stat(f.path)
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// truncate cuts the file to n bytes (by path: no descriptor needed).
func (f *cqFile) truncate(n int64) error { return os.Truncate(f.path, n) }

// close releases the file's descriptor for good.
func (f *cqFile) close() { f.handles.forget(f) }

// OpenQueueFiles returns how many consume-queue descriptors are open now;
// Options.MaxOpenQueueFiles bounds it (plus those in use at this instant).
func (s *Store) OpenQueueFiles() int { return s.handles.openCount() }
