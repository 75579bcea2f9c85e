package store

import "errors"

// Sentinel errors. Returned errors wrap them with detail; test with errors.Is.
var (
	// ErrDiskFull refuses a put while the file system holding the data
	// directory is fuller than Options.DiskMaxUsedRatio. Nothing is written.
	ErrDiskFull = errors.New("store: disk full")
	// ErrMessageTooLarge refuses a body above Options.MaxMessageSize or a
	// record (or batch) that cannot fit in one commit-log segment.
	ErrMessageTooLarge = errors.New("store: message too large")
	// ErrClosed is returned by puts after Close.
	ErrClosed = errors.New("store: closed")
	// ErrIllegalMessage refuses a message the stored format cannot carry: a
	// bad topic name, a negative queue id, oversized properties, or a batch
	// that is empty or mixes topics/queues.
	ErrIllegalMessage = errors.New("store: illegal message")
	// ErrLocked means another Store (in this or another process) holds the
	// data directory.
	ErrLocked = errors.New("store: data directory is locked")
	// ErrCorrupt means Open found damage it will not repair by itself: a
	// corrupt record followed by valid ones, or inconsistent files.
	ErrCorrupt = errors.New("store: data directory is corrupt")
	// ErrNotFound is returned by lookups of a record or offset that does not
	// exist (any more).
	ErrNotFound = errors.New("store: not found")
)
