package store

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// flushState is the commit log's flush machinery: one flusher goroutine
// fsyncs everything written so far and then wakes every waiter at once by
// closing a channel. Sync puts that arrive while an fsync runs are covered by
// the next one: group commit without a queue of waiters.
type flushState struct {
	syncMu sync.Mutex // serialises flushes so flushedPos only grows

	mu   sync.Mutex    // guards done
	done chan struct{} // closed (and replaced) after every flush attempt

	wake   chan struct{} // cap 1: a sync put asks for a flush
	fsyncs atomic.Int64  // fsync calls on segments, for tests and metrics
	err    atomic.Pointer[error]
}

func (f *flushState) init() {
	f.done = make(chan struct{})
	f.wake = make(chan struct{}, 1)
}

// doneChan returns the channel the next flush will close.
func (f *flushState) doneChan() chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.done
}

func (f *flushState) broadcast() {
	f.mu.Lock()
	close(f.done)
	f.done = make(chan struct{})
	f.mu.Unlock()
}

// failure returns the error of a failed fsync, after which the store
// refuses puts: the kernel may have dropped the dirty pages, so a retry
// could report success for lost data.
func (f *flushState) failure() error {
	if p := f.err.Load(); p != nil {
		return *p
	}
	return nil
}

// flushCommitLog makes every byte below the write position durable, then
// wakes waiters. Safe to call from any goroutine.
func (cl *commitLog) flushCommitLog() error {
	f := &cl.flush
	f.syncMu.Lock()
	defer f.syncMu.Unlock()
	if cl.onFlush != nil {
		// Runs after the broadcast below, once flushedPos has moved.
		defer func() { cl.onFlush(cl.flushedPos.Load()) }()
	}
	defer f.broadcast()
	if err := f.failure(); err != nil {
		return err
	}
	target := cl.writePos.Load()
	from := cl.flushedPos.Load()
	if target <= from {
		return nil
	}
	start := time.Now()
	syncFile := cl.syncFile
	if syncFile == nil {
		syncFile = datasync
	}
	for _, g := range cl.segmentsBetween(from, target) {
		if err := syncFile(g.file); err != nil {
			err = fmt.Errorf("store: fsync commit-log segment %s: %w", g.path, err)
			f.err.Store(&err)
			cl.log.Error("commit-log fsync failed; refusing further puts until restart", "err", err)
			return err
		}
		f.fsyncs.Add(1)
	}
	if cl.observeFlush != nil {
		cl.observeFlush(time.Since(start))
	}
	cl.flushedPos.Store(target)
	return nil
}

// FlushedOffset is the end of the commit log's durable prefix: every record
// below it was fsynced. It only grows.
func (s *Store) FlushedOffset() int64 { return s.cl.flushedPos.Load() }

// FlushFailure is the error of the commit-log fsync that failed, or nil.
// After one the store refuses puts and no later fsync is tried: records
// above FlushedOffset then never become durable in this run.
func (s *Store) FlushFailure() error { return s.cl.flush.failure() }

// WaitFlushed waits until the commit log is durable up to end (in sync
// flush mode; in async mode it returns at once), at most timeout. It
// reports whether it is: a record stored by an earlier put that is still
// waiting for its fsync is acknowledged only once this returns true.
func (s *Store) WaitFlushed(ctx context.Context, end int64, timeout time.Duration) bool {
	if s.opts.Flush != FlushSync {
		return true
	}
	return s.cl.waitFlushed(ctx, end, timeout)
}

// requestFlush wakes the flusher without blocking.
func (cl *commitLog) requestFlush() {
	select {
	case cl.flush.wake <- struct{}{}:
	default:
	}
}

// waitFlushed waits until flushedPos >= end. It returns false on timeout,
// when ctx ends, or after an fsync failure.
func (cl *commitLog) waitFlushed(ctx context.Context, end int64, timeout time.Duration) bool {
	if cl.flushedPos.Load() >= end {
		return true
	}
	cl.requestFlush()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		// Take the channel before checking, so a flush that completes in
		// between closes the channel we are about to wait on.
		ch := cl.flush.doneChan()
		if cl.flushedPos.Load() >= end {
			return true
		}
		if cl.flush.failure() != nil {
			return false
		}
		select {
		case <-ch:
		case <-timer.C:
			return cl.flushedPos.Load() >= end
		case <-ctx.Done():
			return cl.flushedPos.Load() >= end
		}
	}
}

// flushLoop is the flusher goroutine. In sync mode puts wake it; the ticker
// is a safety net. In async mode it runs on the ticker only. Close performs
// the last flush itself after the loop has stopped.
func (cl *commitLog) flushLoop(stop <-chan struct{}, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-cl.flush.wake:
		case <-t.C:
		}
		cl.flushCommitLog()
	}
}
