package store

import (
	"fmt"
	"math"
	"sync/atomic"
	"time"
)

// diskGuard caches the disk-usage verdict so puts do not statfs each time.
type diskGuard struct {
	maxRatio  atomic.Uint64 // float64 bits
	lastRatio atomic.Uint64 // float64 bits
	full      atomic.Bool
	lastCheck atomic.Int64 // unix nanos
}

func (d *diskGuard) init(ratio float64) { d.maxRatio.Store(math.Float64bits(ratio)) }

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
