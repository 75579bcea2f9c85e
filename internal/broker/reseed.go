package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/zonemq/zonemq/internal/store"
)

// A replica whose commit log is damaged (Open fails with ErrCorrupt: a
// record in the middle of the log, or a whole last record, fails its
// checks) copies its group's log again instead of refusing to start: its
// data is moved aside to quarantine/<time>/ — with its replication state,
// so it starts as a new replica would, the data directory replaced — and
// the master sends everything again. Nothing is lost: every copy of the
// group that the master acknowledged with is another broker's. A master
// (or a broker outside a replicated group) still refuses, naming the
// damage: its log may hold acknowledged messages no one else has, and an
// operator decides (docs/storage.md). The chaos campaign's "corrupt"
// fault exercises it (docs/disaster-recovery.md).

// quarantineDir is where a reseeded replica's damaged data goes.
const quarantineDir = "quarantine"

// storeEntries are what store.Open owns in a data directory (config/ is
// the broker's metadata, kept but for the replication state).
var storeEntries = []string{"commitlog", "consumequeue", "index", "checkpoint", "abort", "store.json", "reserve"}

// openStore opens the broker's store, reseeding a damaged replica; it
// reports whether it did. A reseeded broker does not become master until
// it has caught up with a master (replicationState.MustCatchUp): its disk said
// replica, but a controller may have elected it since, and its log now
// lacks what the group acknowledged.
func openStore(sopts store.Options, opts Options, logger *slog.Logger) (*store.Store, bool, error) {
	st, err := store.Open(sopts)
	if err == nil || !errors.Is(err, store.ErrCorrupt) || !opts.Hardening.ReseedCorruptReplica ||
		!startsAsReplica(opts) {
		return st, false, err
	}
	moved, qerr := quarantine(opts.DataDir)
	if qerr != nil {
		return nil, false, fmt.Errorf("%w (moving the damaged data aside: %v)", err, qerr)
	}
	logger.Error("this replica's commit log is damaged: its data was moved aside and the group's log is copied again from the master",
		"damage", err, "movedTo", moved)
	st, err = store.Open(sopts)
	return st, err == nil, err
}

// startsAsReplica reports whether the data directory's replication state
// says replica; without one, whether --id does.
func startsAsReplica(opts Options) bool {
	b, err := os.ReadFile(filepath.Join(opts.DataDir, "config", replicationStateMetadata+".json"))
	if errors.Is(err, os.ErrNotExist) {
		return opts.BrokerID != 0
	}
	var st replicationState
	if err != nil || json.Unmarshal(b, &st) != nil {
		return false // unreadable: an operator decides
	}
	return !st.Master
}

// quarantine moves the store's files and the replication state of dir
// into a new quarantine/<time>/ folder and returns its path.
func quarantine(dir string) (string, error) {
	dst := filepath.Join(dir, quarantineDir, time.Now().UTC().Format("20060102T150405.000000000"))
	if err := os.MkdirAll(filepath.Join(dst, "config"), 0o755); err != nil {
		return "", err
	}
	entries := append(storeEntries[:len(storeEntries):len(storeEntries)], filepath.Join("config", replicationStateMetadata+".json"))
	for _, name := range entries {
		err := os.Rename(filepath.Join(dir, name), filepath.Join(dst, name))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
	}
	return dst, store.SyncDir(dir)
}
