package store

import (
	"time"
)

// runRetention deletes the oldest segments whose newest record is older than
// FileReservedTime — never the segment being written, never one not yet
// flushed — then the consume-queue files that only point into them, and moves
// every queue's min offset up.
func (s *Store) runRetention() {
	s.maintMu.Lock()
	defer s.maintMu.Unlock()
	if s.closed.Load() {
		return
	}
	if !s.disk.full.Load() {
		s.reserve.ensure() // recreated here, off the put path, once there is room
	}
	now := s.now()
	cutoff := now.Add(-s.opts.FileReservedTime).UnixMilli()
	segs := s.cl.snapshot()
	flushed := s.cl.flushedPos.Load()
	n := 0
	for i := 0; i < len(segs)-1; i++ {
		g := segs[i]
		newest := g.newestStoreTime.Load()
		if newest == 0 || newest >= cutoff || g.end() > flushed {
			break // keep the log contiguous: delete from the front only
		}
		n++
	}
	if n == 0 {
		return
	}
	removed := s.cl.removeFront(n)
	for _, g := range removed {
		if err := g.remove(); err != nil {
			s.log.Error("deleting expired segment failed", "segment", g.path, "err", err)
		}
	}
	syncDir(s.cl.dir)
	syncDir(s.cl.indexDir)
	newMin := s.cl.minOffset()
	s.log.Info("retention deleted commit-log segments",
		"segments", n, "from", removed[0].start, "to", newMin,
		"newestRecord", time.UnixMilli(removed[n-1].newestStoreTime.Load()).UTC().Format(time.RFC3339),
		"fileReservedTime", s.opts.FileReservedTime)
	s.correctQueueMins(newMin)
}

// correctQueueMins deletes consume-queue files entirely below clMin and moves
// min offsets up. Caller holds maintMu (or runs recovery).
func (s *Store) correctQueueMins(clMin int64) {
	files := 0
	for _, q := range s.allQueues() {
		before := q.minOffset.Load()
		n, err := q.correctMin(clMin)
		files += n
		if err != nil {
			s.log.Error("correcting consume-queue min offset failed", "topic", q.topic, "queue", q.queueID, "err", err)
			continue
		}
		if after := q.minOffset.Load(); after != before {
			s.log.Debug("consume-queue min offset moved", "topic", q.topic, "queue", q.queueID, "from", before, "to", after)
		}
	}
	if files > 0 {
		s.log.Info("retention deleted consume-queue files", "files", files, "commitLogMin", clMin)
	}
}
