package store

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Store is the message store of one broker. Open it with Open; all methods
// are safe for concurrent use.
//
// Lock order (a goroutine holding a lock takes only locks to its right):
// maintMu → putMu → queuesMu / consumeQueue.tailMu → consumeQueue.mu /
// keyIndex.mu / commitLog.segMu, and maintMu → flushState.syncMu →
// commitLog.segMu. flushState.mu, the offsetTable locks and metaMu are
// leaves. docs/storage.md has the full picture.
type Store struct {
	opts      Options
	log       *slog.Logger
	dir       string
	configDir string
	cqRoot    string
	lock      *dirLock

	cl *commitLog
	// recent remembers the newest records' UNIQ_KEYs (ClaimRecent).
	recent recentKeys
	// reads caches the commit-log blocks that pulls read runs of records
	// from (readcache.go).
	reads *readCache

	// putMu is the one owner of the write position: appends to the commit
	// log, consume queues and key indexes happen under it.
	putMu  sync.Mutex
	closed atomic.Bool // set under putMu

	queuesMu sync.RWMutex
	queues   map[string]map[int32]*consumeQueue
	// handles bounds the open consume-queue descriptors (cqfile.go).
	handles *handleCache

	// maintMu serialises checkpoints, retention, DeleteTopic and Close.
	maintMu sync.Mutex
	// lastCheckpoint summarises the last checkpoint written, so an idle
	// store does not rewrite it every second. Guarded by maintMu.
	lastCheckpoint [4]int64

	// derivedFailing is set while consume-queue or key-index writes fail
	// (logged once); a successful checkpoint clears it.
	derivedFailing atomic.Bool
	// corruptReads counts records a read found damaged (CorruptRecords).
	corruptReads atomic.Int64
	// lostDurable: recovery found the commit log shorter than the flushed
	// checkpoint (LostDurableRecords). Set during Open only.
	lostDurable bool
	// confirmed is the read fence's mark (fence.go): NoFence unless
	// Options.Fenced.
	confirmed atomic.Int64

	offsets *offsetTable
	metaMu  sync.Mutex // serialises metadata file writes and reads

	disk    diskGuard
	reserve diskReserve // Dir/reserve: space held back for metadata (reserve.go)

	stop      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// Open locks opts.Dir, recovers its contents (see docs/storage.md) and starts
// the flusher and maintenance goroutines. A second Open of the same
// directory fails with ErrLocked until the first Store is closed.
func Open(opts Options) (*Store, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	logger = logger.With("component", "store")
	s := &Store{
		opts:      opts,
		log:       logger,
		dir:       opts.Dir,
		configDir: filepath.Join(opts.Dir, "config"),
		cqRoot:    filepath.Join(opts.Dir, "consumequeue"),
		queues:    map[string]map[int32]*consumeQueue{},
		handles:   newHandleCache(opts.MaxOpenQueueFiles),
		stop:      make(chan struct{}),
	}
	logDir, indexDir := filepath.Join(opts.Dir, "commitlog"), filepath.Join(opts.Dir, "index")
	for _, d := range []string{opts.Dir, logDir, indexDir, s.cqRoot, s.configDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("store: create %s: %w", d, err)
		}
	}
	if s.lock, err = lockDir(opts.Dir); err != nil {
		return nil, err
	}
	fail := func(err error) (*Store, error) {
		s.closeFiles()
		s.lock.unlock()
		return nil, err
	}
	if err := checkLayout(opts.Dir, opts); err != nil {
		return fail(err)
	}
	s.cl = newCommitLog(logDir, indexDir, opts.SegmentSize, logger)
	s.reads = newReadCache(opts.SegmentSize)
	s.cl.observeFlush = opts.ObserveFlush
	s.cl.onFlush = opts.OnFlush
	s.cl.syncFile = opts.CommitLogSync
	// The abort file marks a run in progress, recovery included; only a
	// complete Close removes it.
	abortPath := filepath.Join(opts.Dir, "abort")
	unclean := fileExists(abortPath)
	if err := os.WriteFile(abortPath, nil, 0o644); err != nil {
		return fail(fmt.Errorf("store: create abort file: %w", err))
	}
	if err := syncDir(opts.Dir); err != nil {
		return fail(err)
	}
	s.reserve.path = filepath.Join(opts.Dir, "reserve")
	if err := s.recover(unclean); err != nil {
		return fail(err)
	}
	if err := s.primeRecentKeys(); err != nil {
		return fail(err)
	}
	if s.offsets, err = loadOffsetTable(s.configDir); err != nil {
		return fail(err)
	}
	s.disk.init(opts.DiskMaxUsedRatio)
	s.refreshDisk()
	if !s.disk.full.Load() {
		s.reserve.ensure()
	}
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		s.cl.flushLoop(s.stop, opts.FlushInterval)
	}()
	go func() {
		defer s.wg.Done()
		s.maintenanceLoop()
	}()
	return s, nil
}

// Close stops the goroutines, flushes and fsyncs everything, writes an exact
// checkpoint and the consumer offsets, removes the abort file and unlocks
// the directory. It is idempotent; puts after Close fail with ErrClosed.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.putMu.Lock()
		s.closed.Store(true)
		s.putMu.Unlock()
		close(s.stop)
		s.wg.Wait()

		s.maintMu.Lock()
		defer s.maintMu.Unlock()
		var errs []error
		if err := s.cl.flushCommitLog(); err != nil {
			errs = append(errs, err)
		}
		if err := s.checkpointLocked(true); err != nil {
			errs = append(errs, err)
		}
		if err := s.offsets.persist(true); err != nil {
			errs = append(errs, err)
		}
		if len(errs) == 0 {
			// Only a complete shutdown may claim to be clean.
			if err := os.Remove(filepath.Join(s.dir, "abort")); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			} else if err := syncDir(s.dir); err != nil {
				errs = append(errs, err)
			}
		}
		if err := s.closeFiles(); err != nil {
			errs = append(errs, err)
		}
		if err := s.lock.unlock(); err != nil {
			errs = append(errs, err)
		}
		s.closeErr = errors.Join(errs...)
		if s.closeErr != nil {
			s.log.Error("store closed with errors", "err", s.closeErr)
		}
	})
	return s.closeErr
}

// abandon stops the store the way a killed process would: no flush, no
// checkpoint, the abort file stays. Written data stays in the page cache, as
// after SIGKILL. For tests.
func (s *Store) abandon() {
	s.closeOnce.Do(func() {
		s.putMu.Lock()
		s.closed.Store(true)
		s.putMu.Unlock()
		close(s.stop)
		s.wg.Wait()
		s.closeFiles()
		s.lock.unlock()
		s.closeErr = ErrClosed
	})
}

// closeFiles closes every segment and consume-queue file.
func (s *Store) closeFiles() error {
	var err error
	if s.cl != nil {
		err = s.cl.closeAll()
	}
	s.queuesMu.Lock()
	for _, qs := range s.queues {
		for _, q := range qs {
			q.close()
		}
	}
	s.queuesMu.Unlock()
	return err
}

// maintenanceLoop runs checkpoints, consumer-offset persistence and the
// retention / disk check, each on its own period.
func (s *Store) maintenanceLoop() {
	cp := time.NewTicker(s.opts.checkpointInterval)
	defer cp.Stop()
	off := time.NewTicker(offsetPersistInterval)
	defer off.Stop()
	clean := time.NewTicker(s.opts.CleanInterval)
	defer clean.Stop()
	runs := 0
	for {
		select {
		case <-s.stop:
			return
		case <-cp.C:
			runs++
			s.maintMu.Lock()
			if err := s.checkpointLocked(runs%fullCheckpointEvery == 0); err != nil {
				s.log.Error("checkpoint failed", "err", err)
			}
			s.maintMu.Unlock()
		case <-off.C:
			if err := s.offsets.persist(false); err != nil {
				s.log.Error("persisting consumer offsets failed", "err", err)
			}
		case <-clean.C:
			s.refreshDisk()
			s.runRetention()
		}
	}
}

// fullCheckpointEvery: every n-th periodic checkpoint syncs every queue, not
// only the busy ones.
const fullCheckpointEvery = 10

// checkpointLocked makes consume-queue and key-index entries durable and
// records how far the commit log is covered (see checkpoint). A full
// checkpoint syncs every queue with new entries; a light one only queues
// with at least cqTailFlushEntries new entries — one fsync per busy queue
// per second instead of one per active queue — and holds the recorded
// position back to the first record whose entry is not yet durable. Caller
// holds maintMu.
func (s *Store) checkpointLocked(full bool) error {
	// Every record below flushed was dispatched before writePos passed it,
	// so its entries are in the tails and buffers synced below.
	flushed := s.cl.flushedPos.Load()
	covered := flushed
	cp := &checkpoint{WrittenAt: time.Now().UnixMilli(), ConsumeQueues: map[string]map[int32]int64{}}
	if c := s.confirmed.Load(); c != NoFence {
		cp.Confirmed = c
	}
	var queues, sum int64
	all := s.allQueues()
	var toSync []*consumeQueue
	synced := map[*consumeQueue]bool{}
	for _, q := range all {
		if maxOff := q.maxOffset.Load(); maxOff > q.syncedOffset && (full || maxOff-q.syncedOffset >= cqTailFlushEntries) {
			toSync = append(toSync, q)
			synced[q] = true
		}
	}
	if err := s.syncQueues(toSync); err != nil {
		return err
	}
	for _, q := range all {
		maxOff := q.maxOffset.Load()
		// A synced queue's newer entries belong to records at or past
		// flushed; an unsynced one holds covered back.
		if maxOff > q.syncedOffset && !synced[q] {
			if from := max(q.syncedOffset, q.minOffset.Load()); from < maxOff {
				if e, err := q.entryAt(from); err == nil && e.phys < covered {
					covered = e.phys
				}
			}
		}
		m := cp.ConsumeQueues[q.topic]
		if m == nil {
			m = map[int32]int64{}
			cp.ConsumeQueues[q.topic] = m
		}
		m[q.queueID] = q.syncedOffset
		queues++
		sum += q.syncedOffset
	}
	for _, g := range s.cl.snapshot() {
		if err := g.index.sync(); err != nil && !errors.Is(err, os.ErrClosed) {
			return err
		}
	}
	cp.CommitLogFlushed = covered
	summary := [4]int64{covered, queues, sum, cp.Confirmed}
	if summary == s.lastCheckpoint && fileExists(checkpointPath(s.dir)) {
		return nil
	}
	if err := writeCheckpoint(s.dir, cp); err != nil {
		return err
	}
	s.lastCheckpoint = summary
	if s.derivedFailing.Swap(false) {
		s.log.Info("consume-queue and key-index files are written again")
	}
	return nil
}

// queue returns the consume queue of topic/queueID, or nil.
func (s *Store) queue(topic string, queueID int32) *consumeQueue {
	s.queuesMu.RLock()
	defer s.queuesMu.RUnlock()
	return s.queues[topic][queueID]
}

// queueForPutLocked returns the consume queue, creating it (in memory; its
// files appear with the first entry). Caller holds putMu or runs recovery.
func (s *Store) queueForPutLocked(topic string, queueID int32) *consumeQueue {
	if q := s.queue(topic, queueID); q != nil {
		return q
	}
	q := newConsumeQueue(s.cqRoot, topic, queueID, s.opts.ConsumeQueueEntries, s.handles)
	s.addQueue(q)
	return q
}

func (s *Store) addQueue(q *consumeQueue) {
	s.queuesMu.Lock()
	defer s.queuesMu.Unlock()
	m := s.queues[q.topic]
	if m == nil {
		m = map[int32]*consumeQueue{}
		s.queues[q.topic] = m
	}
	m[q.queueID] = q
}

// allQueues returns every consume queue.
func (s *Store) allQueues() []*consumeQueue {
	s.queuesMu.RLock()
	defer s.queuesMu.RUnlock()
	var out []*consumeQueue
	for _, qs := range s.queues {
		for _, q := range qs {
			out = append(out, q)
		}
	}
	return out
}

// Queues returns the ids of topic's consume queues, ascending.
func (s *Store) Queues(topic string) []int32 {
	s.queuesMu.RLock()
	defer s.queuesMu.RUnlock()
	ids := make([]int32, 0, len(s.queues[topic]))
	for id := range s.queues[topic] {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// MinOffset returns the first readable queue offset of topic/queueID (0 for
// an unknown queue). Older messages were deleted by retention.
func (s *Store) MinOffset(topic string, queueID int32) int64 {
	if q := s.queue(topic, queueID); q != nil {
		return q.minOffset.Load()
	}
	return 0
}

// MaxOffset returns the next queue offset to be written (0 for an unknown queue).
func (s *Store) MaxOffset(topic string, queueID int32) int64 {
	if q := s.queue(topic, queueID); q != nil {
		return q.maxOffset.Load()
	}
	return 0
}

// CommitLogMinOffset returns the physical offset of the oldest retained segment.
func (s *Store) CommitLogMinOffset() int64 { return s.cl.minOffset() }

// CommitLogMaxOffset returns the physical write position.
func (s *Store) CommitLogMaxOffset() int64 { return s.cl.writePos.Load() }

// DeleteTopic removes topic's consume queues (files included) and every
// group's offsets for it. Its records stay in the commit log until retention
// deletes their segments; a checkpoint written here keeps recovery from
// re-creating the queues.
func (s *Store) DeleteTopic(topic string) error {
	s.maintMu.Lock()
	defer s.maintMu.Unlock()
	if s.closed.Load() {
		return ErrClosed
	}
	var errs []error
	// Hold putMu while the files go, so that a put re-creating the topic
	// cannot have its new files removed.
	s.putMu.Lock()
	s.queuesMu.Lock()
	qs := s.queues[topic]
	delete(s.queues, topic)
	s.queuesMu.Unlock()
	for _, q := range qs {
		q.close()
	}
	if err := os.RemoveAll(filepath.Join(s.cqRoot, topic)); err != nil {
		errs = append(errs, fmt.Errorf("store: delete consume queues of %s: %w", topic, err))
	}
	s.putMu.Unlock()
	s.offsets.deleteTopic(topic)
	errs = append(errs, syncDir(s.cqRoot))
	// Recovery re-dispatches only records past the checkpoint: move it past
	// every record of the topic.
	errs = append(errs, s.cl.flushCommitLog(), s.checkpointLocked(true))
	if len(qs) > 0 {
		s.log.Info("topic deleted", "topic", topic, "queues", len(qs))
	}
	return errors.Join(errs...)
}

// fsyncCount returns the number of commit-log fsyncs so far (for tests).
func (s *Store) fsyncCount() int64 { return s.cl.flush.fsyncs.Load() }

// now returns the store clock.
func (s *Store) now() time.Time { return s.opts.Clock() }
