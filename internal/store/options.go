package store

import (
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
)

// FlushMode says when an appended message counts as stored.
type FlushMode int

const (
	// FlushAsync acknowledges a put once its bytes are in the OS page cache;
	// a flusher fsyncs the commit log every Options.FlushInterval.
	FlushAsync FlushMode = iota
	// FlushSync acknowledges a put only after its bytes are on disk. Puts
	// that arrive while a flush runs share the next fsync (group commit).
	FlushSync
)

// ParseFlushMode parses "async" or "sync", or RocketMQ's flushDiskType
// values ASYNC_FLUSH and SYNC_FLUSH (case-insensitive).
func ParseFlushMode(s string) (FlushMode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "async", "async_flush":
		return FlushAsync, nil
	case "sync", "sync_flush":
		return FlushSync, nil
	}
	return 0, fmt.Errorf("store: flush mode %q is neither async (ASYNC_FLUSH) nor sync (SYNC_FLUSH)", s)
}

// String returns "async" or "sync".
func (m FlushMode) String() string {
	switch m {
	case FlushAsync:
		return "async"
	case FlushSync:
		return "sync"
	}
	return fmt.Sprintf("FlushMode(%d)", int(m))
}

// Defaults applied by NewOptions and, for zero fields, by Open.
const (
	DefaultSegmentSize         = 1 << 30
	DefaultConsumeQueueEntries = 300_000
	DefaultFlushInterval       = 500 * time.Millisecond
	DefaultSyncFlushTimeout    = 5 * time.Second
	DefaultFileReservedTime    = 72 * time.Hour
	DefaultCleanInterval       = 10 * time.Second
	DefaultDiskMaxUsedRatio    = 0.90

	// MinSegmentSize is the smallest accepted segment: room for one small
	// record and the end-of-segment marker. Tests use a few KiB.
	MinSegmentSize = 1 << 10
	// MaxSegmentSize keeps the end-of-segment marker's int32 TOTALSIZE valid.
	MaxSegmentSize = 1<<31 - 1
	// defaultCheckpointInterval is how often consume queues and key indexes
	// are fsynced and the checkpoint rewritten.
	defaultCheckpointInterval = time.Second
	// offsetPersistInterval is how often changed consumer offsets are
	// written. Busy consumers commit with every pull, so what a broker
	// crash replays is about this interval of each queue's traffic: 200 ms
	// keeps it to the messages in flight (the drill's S2 kill replayed
	// about 0.5 s of traffic at 1 s). RocketMQ's flushConsumerOffsetInterval
	// is 5 s. Only a changed table is written (one small file, fsynced), so
	// an idle broker does no I/O.
	offsetPersistInterval = 200 * time.Millisecond
)

// Options configures a Store. A zero field means its default (see
// NewOptions); Dir is required.
type Options struct {
	// Dir is the data directory; it is created if missing.
	Dir string
	// SegmentSize is the size of one commit-log segment (default 1 GiB). It
	// is fixed for the life of a data directory.
	SegmentSize int64
	// ConsumeQueueEntries is the number of 20-byte entries per consume-queue
	// file (default 300 000). It is fixed for the life of a data directory.
	ConsumeQueueEntries int
	// Flush is the flush policy (default FlushAsync).
	Flush FlushMode
	// FlushInterval is the async flush period (default 500 ms).
	FlushInterval time.Duration
	// SyncFlushTimeout bounds a sync put's wait for its fsync (default 5 s);
	// a put not flushed by then returns PutFlushDiskTimeout, but is stored.
	SyncFlushTimeout time.Duration
	// FileReservedTime is how long a segment is kept after its newest record
	// was stored (default 72 h).
	FileReservedTime time.Duration
	// CleanInterval is the retention and disk-usage check period (default 10 s).
	CleanInterval time.Duration
	// DiskMaxUsedRatio refuses puts with ErrDiskFull while the file system
	// holding Dir is fuller than this (0..1, default 0.90).
	DiskMaxUsedRatio float64
	// MaxMessageSize is the largest accepted body in bytes (default
	// protocol.DefaultMaxMessageSize).
	MaxMessageSize int
	// MaxOpenQueueFiles bounds the consume-queue file descriptors kept open
	// (default DefaultMaxOpenQueueFiles, 2048): descriptors are opened on
	// demand and the least recently used idle ones closed past the budget.
	MaxOpenQueueFiles int
	// RecoverDropCorrupt lets recovery drop a complete record at the end of
	// the commit log whose body fails its CRC (and logs what it drops at
	// Error). Without it Open refuses such a log with ErrCorrupt: the record
	// was whole, so it may have been acknowledged. Default false.
	RecoverDropCorrupt bool
	// StoreHost is stamped into every record's STOREHOST and message id.
	StoreHost netip.AddrPort
	// Logger receives recovery, retention and error reports (nil discards).
	Logger *slog.Logger
	// Fenced makes consumer reads (GetVisible, VisibleMaxOffset) stop at
	// the confirmed offset the owner sets with SetConfirmed, kept in the
	// checkpoint across restarts (0 on a store that never had one). Without
	// it every record is confirmed (NoFence). A broker in sync replication
	// with the controller sets it (fence.go).
	Fenced bool
	// OnArrive is called (outside store locks, may be nil) after a message
	// has been appended and dispatched to its consume queue, with the queue's
	// new max offset. The broker uses it to wake long-polling pulls.
	OnArrive func(topic string, queueID int32, maxOffset int64)
	// ObservePut and ObserveFlush, when set, are told how long each put
	// (PutMessage/PutMessages, the flush wait included) and each commit-log
	// fsync took; the broker feeds its latency histograms with them. They
	// run on the hot path and must not block.
	ObservePut, ObserveFlush func(time.Duration)
	// OnFlush, when set, is called by whoever flushed the commit log (the
	// flusher goroutine, Close) after every flush attempt, successful or
	// not (see FlushFailure), with FlushedOffset. It runs with the flush
	// lock held and must not block: a broker uses it to wake the goroutine
	// that answers the sends the fsync made durable (AppendEach).
	OnFlush func(flushed int64)
	// CommitLogSync replaces fdatasync on commit-log segments (nil: fdatasync).
	// Tests use it to hold, count or fail the fsync that acknowledgements
	// wait for.
	CommitLogSync func(*os.File) error

	// Clock is the wall clock for store timestamps and retention (default
	// time.Now); the broker passes wallclock.Now, tests a fake.
	Clock func() time.Time
	// checkpointInterval replaces defaultCheckpointInterval in tests.
	checkpointInterval time.Duration
}

// NewOptions returns Options with every default filled in except Dir.
func NewOptions() Options {
	return Options{
		SegmentSize:         DefaultSegmentSize,
		ConsumeQueueEntries: DefaultConsumeQueueEntries,
		Flush:               FlushAsync,
		FlushInterval:       DefaultFlushInterval,
		SyncFlushTimeout:    DefaultSyncFlushTimeout,
		FileReservedTime:    DefaultFileReservedTime,
		CleanInterval:       DefaultCleanInterval,
		DiskMaxUsedRatio:    DefaultDiskMaxUsedRatio,
		MaxMessageSize:      protocol.DefaultMaxMessageSize,
	}
}

// withDefaults fills zero fields and validates the rest; errors name the field.
func (o Options) withDefaults() (Options, error) {
	d := NewOptions()
	if o.Dir == "" {
		return o, fmt.Errorf("store: Options.Dir is empty")
	}
	if o.SegmentSize == 0 {
		o.SegmentSize = d.SegmentSize
	}
	if o.ConsumeQueueEntries == 0 {
		o.ConsumeQueueEntries = d.ConsumeQueueEntries
	}
	if o.FlushInterval == 0 {
		o.FlushInterval = d.FlushInterval
	}
	if o.SyncFlushTimeout == 0 {
		o.SyncFlushTimeout = d.SyncFlushTimeout
	}
	if o.FileReservedTime == 0 {
		o.FileReservedTime = d.FileReservedTime
	}
	if o.CleanInterval == 0 {
		o.CleanInterval = d.CleanInterval
	}
	if o.DiskMaxUsedRatio == 0 {
		o.DiskMaxUsedRatio = d.DiskMaxUsedRatio
	}
	if o.MaxMessageSize == 0 {
		o.MaxMessageSize = d.MaxMessageSize
	}
	if o.checkpointInterval == 0 {
		o.checkpointInterval = defaultCheckpointInterval
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	switch {
	case o.SegmentSize < MinSegmentSize || o.SegmentSize > MaxSegmentSize:
		return o, fmt.Errorf("store: Options.SegmentSize %d is outside %d..%d", o.SegmentSize, MinSegmentSize, MaxSegmentSize)
	case o.ConsumeQueueEntries < 2 || o.ConsumeQueueEntries > 1<<26:
		return o, fmt.Errorf("store: Options.ConsumeQueueEntries %d is outside 2..%d", o.ConsumeQueueEntries, 1<<26)
	case o.Flush != FlushAsync && o.Flush != FlushSync:
		return o, fmt.Errorf("store: Options.Flush %d is neither FlushAsync nor FlushSync", int(o.Flush))
	case o.FlushInterval < 0 || o.SyncFlushTimeout < 0 || o.FileReservedTime < 0 || o.CleanInterval < 0:
		return o, fmt.Errorf("store: Options durations must not be negative")
	case o.DiskMaxUsedRatio < 0 || o.DiskMaxUsedRatio > 1:
		return o, fmt.Errorf("store: Options.DiskMaxUsedRatio %g is outside 0..1", o.DiskMaxUsedRatio)
	case o.MaxOpenQueueFiles < 0:
		return o, fmt.Errorf("store: Options.MaxOpenQueueFiles %d is negative", o.MaxOpenQueueFiles)
	case o.MaxMessageSize < 0:
		return o, fmt.Errorf("store: Options.MaxMessageSize %d is negative", o.MaxMessageSize)
	}
	if o.Flush == FlushSync && o.FlushInterval > 100*time.Millisecond {
		// In sync mode the interval is only a safety net; puts wake the
		// flusher themselves.
		o.FlushInterval = 100 * time.Millisecond
	}
	return o, nil
}
