package store

import (
	"fmt"
	"math"
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

// refreshDisk re-reads the file system usage and updates the verdict.
func (s *Store) refreshDisk() {
	s.disk.lastCheck.Store(time.Now().UnixNano())
	ratio, err := diskUsedRatio(s.dir)
	if err != nil {
		s.log.Warn("reading disk usage failed; the disk guard keeps its last verdict", "dir", s.dir, "err", err)
		return
	}
	s.disk.lastRatio.Store(math.Float64bits(ratio))
	max := math.Float64frombits(s.disk.maxRatio.Load())
	full := ratio > max
	if was := s.disk.full.Swap(full); was != full {
		if full {
			s.log.Error("disk usage above the limit; refusing puts", "dir", s.dir, "used", ratio, "limit", max)
		} else {
			s.log.Info("disk usage back under the limit; accepting puts", "dir", s.dir, "used", ratio, "limit", max)
		}
	}
}

// checkDisk returns ErrDiskFull (with detail) while the disk is too full. It
// re-reads the usage at most once a second.
func (s *Store) checkDisk() error {
	last := s.disk.lastCheck.Load()
	if now := time.Now().UnixNano(); now-last > int64(time.Second) && s.disk.lastCheck.CompareAndSwap(last, now) {
		s.refreshDisk()
	}
	if s.disk.full.Load() {
		return fmt.Errorf("%w: the file system of %s is %.1f%% used, above the limit of %.1f%% (DiskMaxUsedRatio)", ErrDiskFull, s.dir,
			100*math.Float64frombits(s.disk.lastRatio.Load()), 100*math.Float64frombits(s.disk.maxRatio.Load()))
	}
	return nil
}

// DiskUsedRatio returns the used share (0..1) of the file system holding
// the data directory, read now.
func (s *Store) DiskUsedRatio() float64 {
	ratio, err := diskUsedRatio(s.dir)
	if err != nil {
		return math.Float64frombits(s.disk.lastRatio.Load())
	}
	return ratio
}

// SetDiskMaxUsedRatio changes Options.DiskMaxUsedRatio at run time and
// re-evaluates the disk guard at once. Values outside (0, 1] are clamped.
func (s *Store) SetDiskMaxUsedRatio(ratio float64) {
	ratio = math.Min(math.Max(ratio, 0), 1)
	s.disk.maxRatio.Store(math.Float64bits(ratio))
	s.refreshDisk()
}
