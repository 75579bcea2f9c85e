package broker

import (
	"errors"
	"fmt"

	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/store"
)

// HardeningOptions are the broker's resource limits and data-check
// switches (docs/hardening.md). A zero field means its default.
type HardeningOptions struct {
	// RecoverDropCorrupt lets store recovery drop a complete record at the
	// end of the commit log whose body fails its CRC, logging what it drops
	// (--recover-drop-corrupt). Off by default: Open refuses such a log.
	RecoverDropCorrupt bool
	// ReseedCorruptReplica lets a replica whose commit log is damaged move
	// its data aside and copy the group's log again from the master
	// (reseed.go; --reseed-corrupt-replica, on by default). Off, it refuses
	// to start as a master does.
	ReseedCorruptReplica bool
	// RecoverMissingTopics re-creates topics that have consume queues on
	// disk but are missing from topics.json (--recover-missing-topics). Off
	// by default: the broker refuses to start.
	RecoverMissingTopics bool
	// MaxOpenQueueFiles is the budget of open consume-queue file handles
	// (--max-open-queue-files, default 2048); older handles are closed
	// least-recently-used first and reopened on demand.
	MaxOpenQueueFiles int
	// MaxParkedPulls caps the long-polling pulls parked at once
	// (--max-parked-pulls, default 50 000); a pull past it is answered
	// SYSTEM_BUSY, which clients back off from.
	MaxParkedPulls int
	// MaxParkedPullsPerConn caps them per connection (default 4 096).
	MaxParkedPullsPerConn int
	// MaxConnections caps the client connections (--max-connections,
	// default 10 000); one more is closed at once.
	MaxConnections int
	// MaxReceivingBytes bounds the bytes of large frames (over 64 KiB) being
	// received across all connections (--max-receiving-bytes, default
	// 256 MiB); further large frames wait unread.
	MaxReceivingBytes int64
}

// DefaultMaxOpenQueueFiles is HardeningOptions.MaxOpenQueueFiles' default:
// half of a 4 096-descriptor limit, leaving the rest to segments,
// key indexes and connections.
const DefaultMaxOpenQueueFiles = store.DefaultMaxOpenQueueFiles

// NewHardeningOptions returns the defaults.
func NewHardeningOptions() HardeningOptions {
	return HardeningOptions{
		ReseedCorruptReplica:  true,
		MaxOpenQueueFiles:     DefaultMaxOpenQueueFiles,
		MaxParkedPulls:        50_000,
		MaxParkedPullsPerConn: 4096,
		MaxConnections:        10_000,
		MaxReceivingBytes:     remoting.DefaultMaxReceivingBytes,
	}
}

// validate fills zero fields and checks the rest; errors name the flag.
func (h *HardeningOptions) validate() error {
	def := NewHardeningOptions()
	var errs []error
	switch {
	case h.MaxOpenQueueFiles == 0:
		h.MaxOpenQueueFiles = def.MaxOpenQueueFiles
	case h.MaxOpenQueueFiles < 16:
		errs = append(errs, fmt.Errorf("MaxOpenQueueFiles (--max-open-queue-files) is %d; it must be ≥ 16", h.MaxOpenQueueFiles))
	}
	fill := func(v *int, def int, flag string) {
		switch {
		case *v == 0:
			*v = def
		case *v < 0:
			errs = append(errs, fmt.Errorf("%s is %d; it must be ≥ 1", flag, *v))
		}
	}
	fill(&h.MaxParkedPulls, def.MaxParkedPulls, "MaxParkedPulls (--max-parked-pulls)")
	fill(&h.MaxParkedPullsPerConn, def.MaxParkedPullsPerConn, "MaxParkedPullsPerConn (--max-parked-pulls-per-conn)")
	fill(&h.MaxConnections, def.MaxConnections, "MaxConnections (--max-connections)")
	switch {
	case h.MaxReceivingBytes == 0:
		h.MaxReceivingBytes = def.MaxReceivingBytes
	case h.MaxReceivingBytes < 1<<20:
		errs = append(errs, fmt.Errorf("MaxReceivingBytes (--max-receiving-bytes) is %d; it must be ≥ 1 MiB", h.MaxReceivingBytes))
	}
	return errors.Join(errs...)
}
