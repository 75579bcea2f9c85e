package store

// syncfsMinQueues is the fewest queues a checkpoint must sync before it
// uses one syncfs instead of an fsync per file and directory. Below it the
// per-file fsyncs touch less; above it (a burst of new topics: each new
// queue costs a file fsync and three directory fsyncs) one syncfs is far
// cheaper — 20 000 new queues cost minutes of fsyncs on a VM disk otherwise.
const syncfsMinQueues = 64

// syncQueues makes every entry of qs published so far durable and records
// it in their syncedOffset. Caller holds maintMu.
func (s *Store) syncQueues(qs []*consumeQueue) error {
	if len(qs) < syncfsMinQueues || !canSyncfs {
		for _, q := range qs {
			if _, err := q.sync(); err != nil {
				return err
			}
		}
		return nil
	}
	maxes := make([]int64, len(qs))
	for i, q := range qs {
		// Entries below max are in the tail at least (published after append).
		maxes[i] = q.maxOffset.Load()
		if err := q.flushTailDeferDirSync(); err != nil {
			return err
		}
	}
	if err := syncfs(s.cqRoot); err != nil {
		return err
	}
	for i, q := range qs {
		q.syncedOffset = max(q.syncedOffset, maxes[i])
	}
	return nil
}

// flushTailDeferDirSync writes the tail to the files like flushTail, but
// leaves the directory fsyncs of new files to the caller's syncfs.
func (q *consumeQueue) flushTailDeferDirSync() error {
	q.tailMu.Lock()
	defer q.tailMu.Unlock()
	q.deferDirSync = true
	defer func() { q.deferDirSync = false }()
	if err := q.flushTailLocked(); err != nil {
		return err
	}
	q.tail = nil
	return nil
}
