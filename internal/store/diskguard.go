package store

import (
	"fmt"
	"math"
	"sync/atomic"
	"time"
)

// minFreeBytes is the free space below which the disk counts as full even
// when DiskMaxUsedRatio allows more (a ratio of 1, a huge disk).
const minFreeBytes = 1 << 20

// diskGuard caches the disk-usage verdict so puts do not statfs each time.
// It also counts the commit-log bytes written since its last look: once
// they reach half the room that was left under the limit it looks again at
// once, so a burst of writes cannot carry the disk past the limit between
// two timed checks (half, because consume-queue and key-index entries grow
// with the records: at most 20 + 16 per key bytes next to 91+).
type diskGuard struct {
	maxRatio  atomic.Uint64 // float64 bits
	lastRatio atomic.Uint64 // float64 bits
	full      atomic.Bool
	lastCheck atomic.Int64 // unix nanos
	// posAtCheck is the commit-log write position at the last look;
	// headroom the bytes that were left under the limit then (0 when full
	// or unknown: every put looks again).
	posAtCheck atomic.Int64
	headroom   atomic.Int64
}

func (d *diskGuard) init(ratio float64) { d.maxRatio.Store(math.Float64bits(ratio)) }

// refreshDisk re-reads the file system usage and updates the verdict.
func (s *Store) refreshDisk() {
	s.disk.lastCheck.Store(time.Now().UnixNano())
	if s.cl != nil {
		s.disk.posAtCheck.Store(s.cl.writePos.Load())
	}
	used, total, err := diskSpace(s.dir)
	if err != nil {
		s.log.Warn("reading disk usage failed; the disk guard keeps its last verdict", "dir", s.dir, "err", err)
		return
	}
	ratio := 0.0
	if total > 0 {
		ratio = float64(used) / float64(total)
	}
	s.disk.lastRatio.Store(math.Float64bits(ratio))
	max := math.Float64frombits(s.disk.maxRatio.Load())
	// Below minFreeBytes the file system itself is about to refuse writes
	// (metadata, checkpoints), whatever the ratio allows.
	full := ratio > max || total > 0 && total-used < minFreeBytes
	room := int64(0)
	if total == 0 {
		room = math.MaxInt64 // no usage known: only the timed checks
	} else if limit := max * float64(total); float64(used) < limit {
		room = int64(limit - float64(used))
	}
	s.disk.headroom.Store(room)
	if was := s.disk.full.Swap(full); was != full {
		if full {
			s.log.Error("disk usage above the limit; refusing puts", "dir", s.dir, "used", ratio, "limit", max)
		} else {
			s.log.Info("disk usage back under the limit; accepting puts", "dir", s.dir, "used", ratio, "limit", max)
		}
	}
}

// checkDisk returns ErrDiskFull (with detail) while the disk is too full. It
// re-reads the usage once a second, and at once when the bytes written
// since the last look reach half the room that was left (see diskGuard).
func (s *Store) checkDisk() error {
	last := s.disk.lastCheck.Load()
	now := time.Now().UnixNano()
	written := s.cl.writePos.Load() - s.disk.posAtCheck.Load()
	if (now-last > int64(time.Second) || 2*written >= s.disk.headroom.Load()) && s.disk.lastCheck.CompareAndSwap(last, now) {
		s.refreshDisk()
	}
	if s.disk.full.Load() {
		return fmt.Errorf("%w: the file system of %s is %.1f%% used, above the limit of %.1f%% (DiskMaxUsedRatio)", ErrDiskFull, s.dir,
			100*math.Float64frombits(s.disk.lastRatio.Load()), 100*math.Float64frombits(s.disk.maxRatio.Load()))
	}
	return nil
}

// CheckDiskNow re-reads the disk usage and returns ErrDiskFull (with
// detail) if the disk is too full for new data. Rare writers that are not
// puts — topic creation — ask it before writing.
func (s *Store) CheckDiskNow() error {
	s.refreshDisk()
	return s.checkDisk()
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

// DiskMaxUsedRatio returns the disk guard in force (Options.DiskMaxUsedRatio
// or the last SetDiskMaxUsedRatio).
func (s *Store) DiskMaxUsedRatio() float64 { return math.Float64frombits(s.disk.maxRatio.Load()) }

// SetDiskMaxUsedRatio changes Options.DiskMaxUsedRatio at run time and
// re-evaluates the disk guard at once. Values outside (0, 1] are clamped.
func (s *Store) SetDiskMaxUsedRatio(ratio float64) {
	ratio = math.Min(math.Max(ratio, 0), 1)
	s.disk.maxRatio.Store(math.Float64bits(ratio))
	s.refreshDisk()
}
