package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// checkpoint records what is durable: every commit-log byte below
// CommitLogFlushed is fsynced, and so are the consume-queue and key-index
// entries of those records; ConsumeQueues holds each queue's fsynced entry
// count (its durable max offset). Recovery verifies the commit log from
// CommitLogFlushed on. After a clean Close it is exact (CommitLogFlushed is
// the end of the log).
type checkpoint struct {
	Version          int                        `json:"version"`
	CommitLogFlushed int64                      `json:"commitLogFlushed"`
	WrittenAt        int64                      `json:"writtenAt"` // wall clock, ms
	ConsumeQueues    map[string]map[int32]int64 `json:"consumeQueues"`
	// Confirmed is the read fence's mark (fence.go) when it was written.
	Confirmed int64 `json:"confirmed,omitempty"`
}

const checkpointVersion = 1

func checkpointPath(dir string) string { return filepath.Join(dir, "checkpoint") }

// readCheckpoint returns nil, nil when there is no checkpoint file.
func readCheckpoint(dir string) (*checkpoint, error) {
	b, err := os.ReadFile(checkpointPath(dir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var cp checkpoint
	if err := json.Unmarshal(b, &cp); err != nil {
		return nil, fmt.Errorf("checkpoint is not valid JSON: %w", err)
	}
	if cp.Version != checkpointVersion || cp.CommitLogFlushed < 0 {
		return nil, fmt.Errorf("checkpoint has version %d and commitLogFlushed %d", cp.Version, cp.CommitLogFlushed)
	}
	return &cp, nil
}

func writeCheckpoint(dir string, cp *checkpoint) error {
	cp.Version = checkpointVersion
	b, err := json.Marshal(cp)
	if err != nil {
		return err
	}
	return writeFileAtomic(checkpointPath(dir), b)
}

// layout is Dir/store.json: the parameters that fix how the files are cut.
// They cannot change for an existing data directory.
type layout struct {
	Version             int   `json:"version"`
	SegmentSize         int64 `json:"segmentSize"`
	ConsumeQueueEntries int   `json:"consumeQueueEntries"`
}

// checkLayout writes store.json on first use and afterwards refuses options
// that disagree with it.
func checkLayout(dir string, o Options) error {
	path := filepath.Join(dir, "store.json")
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		b, _ := json.MarshalIndent(layout{Version: 1, SegmentSize: o.SegmentSize, ConsumeQueueEntries: o.ConsumeQueueEntries}, "", "  ")
		return writeFileAtomic(path, append(b, '\n'))
	}
	if err != nil {
		return fmt.Errorf("store: read %s: %w", path, err)
	}
	var l layout
	if err := json.Unmarshal(b, &l); err != nil {
		return fmt.Errorf("%w: %s is not valid JSON: %v", ErrCorrupt, path, err)
	}
	if l.SegmentSize != o.SegmentSize {
		return fmt.Errorf("store: Options.SegmentSize is %d but the data directory %s was created with %d; it cannot change", o.SegmentSize, dir, l.SegmentSize)
	}
	if l.ConsumeQueueEntries != o.ConsumeQueueEntries {
		return fmt.Errorf("store: Options.ConsumeQueueEntries is %d but the data directory %s was created with %d; it cannot change", o.ConsumeQueueEntries, dir, l.ConsumeQueueEntries)
	}
	return nil
}
