package store

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// commitLog is the sequence of segments holding every record. Physical
// offsets are global: segment start + position in the segment.
//
// Concurrency: appends (reserveLocked and the writes that follow) happen
// under Store.putMu, the one owner of the write position. segMu guards the
// segments slice against appends that roll and retention that removes from
// the front; readers take it shared only to pick a segment and then read with
// ReadAt, which is safe alongside the appender's WriteAt.
type commitLog struct {
	dir, indexDir string
	segmentSize   int64
	log           *slog.Logger
	observeFlush  func(time.Duration)  // Options.ObserveFlush; nil when unset
	onFlush       func(int64)          // Options.OnFlush; nil when unset
	syncFile      func(*os.File) error // Options.CommitLogSync; nil: datasync

	segMu    sync.RWMutex
	segments []*segment // ascending by start; the last one is written

	// writePos is the published end of the log: every byte below it is
	// written and its record dispatched to its consume queue and key index.
	writePos atomic.Int64
	// flushedPos is the end of the durable prefix (fsynced).
	flushedPos atomic.Int64
	// lastStoreTime keeps store timestamps non-decreasing along the log, so
	// OffsetByTimestamp's binary search is sound even if the clock steps
	// back. Caller holds Store.putMu.
	lastStoreTime int64

	flush flushState
}

func newCommitLog(dir, indexDir string, segmentSize int64, log *slog.Logger) *commitLog {
	cl := &commitLog{dir: dir, indexDir: indexDir, segmentSize: segmentSize, log: log}
	cl.flush.init()
	return cl
}

// snapshot returns the current segments (a copy of the slice).
func (cl *commitLog) snapshot() []*segment {
	cl.segMu.RLock()
	defer cl.segMu.RUnlock()
	return append([]*segment(nil), cl.segments...)
}

// minOffset is the start of the oldest segment: the smallest offset a record
// can still have.
func (cl *commitLog) minOffset() int64 {
	cl.segMu.RLock()
	defer cl.segMu.RUnlock()
	if len(cl.segments) == 0 {
		return cl.writePos.Load()
	}
	return cl.segments[0].start
}

// segmentFor returns the segment holding offset off, or nil.
func (cl *commitLog) segmentFor(off int64) *segment {
	cl.segMu.RLock()
	defer cl.segMu.RUnlock()
	segs := cl.segments
	i := sort.Search(len(segs), func(i int) bool { return segs[i].end() > off })
	if i < len(segs) && segs[i].start <= off {
		return segs[i]
	}
	return nil
}

// segmentsBetween returns the segments overlapping [from, to).
func (cl *commitLog) segmentsBetween(from, to int64) []*segment {
	cl.segMu.RLock()
	defer cl.segMu.RUnlock()
	var out []*segment
	for _, g := range cl.segments {
		if g.end() > from && g.start < to {
			out = append(out, g)
		}
	}
	return out
}

// active returns the segment being written (nil before the first one exists).
func (cl *commitLog) active() *segment {
	cl.segMu.RLock()
	defer cl.segMu.RUnlock()
	if len(cl.segments) == 0 {
		return nil
	}
	return cl.segments[len(cl.segments)-1]
}

// addSegmentLocked creates the segment starting at start and appends it.
// Caller holds Store.putMu (or runs recovery alone).
func (cl *commitLog) addSegmentLocked(start int64) (*segment, error) {
	g, err := openSegment(cl.dir, cl.indexDir, start, cl.segmentSize, true)
	if err != nil {
		return nil, err
	}
	// Make the new names durable before any record in them is acknowledged.
	if err := syncDir(cl.dir); err != nil {
		g.close()
		return nil, err
	}
	if err := syncDir(cl.indexDir); err != nil {
		g.close()
		return nil, err
	}
	cl.segMu.Lock()
	cl.segments = append(cl.segments, g)
	cl.segMu.Unlock()
	return g, nil
}

// fits reports whether n bytes of records can ever be placed in one segment.
func (cl *commitLog) fits(n int) bool {
	return int64(n)+blankMarkerLen <= cl.segmentSize
}

// reserveLocked returns the segment and global offset where n bytes of
// records go: the write position, or the start of a new segment when they do
// not fit in the current one (the current one then gets its blank marker).
// Nothing is published; the caller writes and then advances writePos.
// Caller holds Store.putMu and has checked fits(n).
func (cl *commitLog) reserveLocked(n int) (*segment, int64, error) {
	wp := cl.writePos.Load()
	g := cl.active()
	if g == nil || wp >= g.end() {
		// No segment yet, or the previous one ended exactly with its marker.
		ng, err := cl.addSegmentLocked(wp)
		if err != nil {
			return nil, 0, err
		}
		return ng, wp, nil
	}
	rel := wp - g.start
	if rel+int64(n)+blankMarkerLen <= g.size {
		return g, wp, nil
	}
	// Create the next file first: if that fails, nothing has changed.
	ng, err := cl.addSegmentLocked(g.end())
	if err != nil {
		return nil, 0, err
	}
	if err := g.writeBlankMarker(rel); err != nil {
		return nil, 0, fmt.Errorf("store: write end-of-segment marker in %s: %w", g.path, err)
	}
	g.sealTime()
	// A sealed segment's key index is complete; write it now rather than at
	// the next checkpoint (a failure is retried there).
	g.index.flush()
	// The marker is part of the log: publishing the roll lets the flusher
	// cover the old segment's tail.
	cl.writePos.Store(ng.start)
	return ng, ng.start, nil
}

// nextStoreTimeLocked returns the store timestamp for the next append: now,
// but never below the previous one. Caller holds Store.putMu.
func (cl *commitLog) nextStoreTimeLocked(nowMS int64) int64 {
	if nowMS < cl.lastStoreTime {
		nowMS = cl.lastStoreTime
	}
	cl.lastStoreTime = nowMS
	return nowMS
}

// read returns a copy of the size bytes at global offset off, which must lie
// below the write position inside one segment.
func (cl *commitLog) read(off int64, size int) ([]byte, error) {
	buf := make([]byte, size)
	if err := cl.readInto(buf, off); err != nil {
		return nil, err
	}
	return buf, nil
}

// readInto fills buf from global offset off.
func (cl *commitLog) readInto(buf []byte, off int64) error {
	if off < 0 || len(buf) == 0 || off+int64(len(buf)) > cl.writePos.Load() {
		return fmt.Errorf("%w: commit-log range [%d,%d) is outside the written log", ErrNotFound, off, off+int64(len(buf)))
	}
	g := cl.segmentFor(off)
	if g == nil {
		return fmt.Errorf("%w: commit-log offset %d is below the oldest segment (deleted)", ErrNotFound, off)
	}
	if off+int64(len(buf)) > g.end() {
		return fmt.Errorf("%w: commit-log range [%d,%d) crosses the end of segment %s", ErrNotFound, off, off+int64(len(buf)), g.path)
	}
	if _, err := g.file.ReadAt(buf, off-g.start); err != nil {
		if errors.Is(err, os.ErrClosed) {
			return fmt.Errorf("%w: commit-log segment %s was deleted", ErrNotFound, g.path)
		}
		return fmt.Errorf("store: read commit log at %d: %w", off, err)
	}
	return nil
}

// removeFront drops the n oldest segments from the list and returns them;
// the caller deletes their files.
func (cl *commitLog) removeFront(n int) []*segment {
	cl.segMu.Lock()
	defer cl.segMu.Unlock()
	out := append([]*segment(nil), cl.segments[:n]...)
	cl.segments = append([]*segment(nil), cl.segments[n:]...)
	return out
}

// closeAll closes every segment file.
func (cl *commitLog) closeAll() error {
	cl.segMu.Lock()
	defer cl.segMu.Unlock()
	var first error
	for _, g := range cl.segments {
		if err := g.close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
