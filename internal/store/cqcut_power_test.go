package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/zonemq/zonemq/internal/powerfs"
	"github.com/zonemq/zonemq/internal/testutil"
)

// A replica cuts its log to follow a new master, then fetches the master's
// records into the same offsets. If a power loss then brought back the
// consume-queue entries the cut dropped, they would point at other records
// of the refilled log: a queue one entry longer than its records, which no
// fetch can continue (the chaos campaign's seed 63, for good). The cut is
// durable at once. Needs FUSE (root, /dev/fuse); skipped elsewhere.
func TestConsumeQueueCutSurvivesAPowerLoss(t *testing.T) {
	dir, backing := t.TempDir(), t.TempDir()
	p, err := powerfs.Mount(dir, backing)
	if errors.Is(err, powerfs.ErrUnavailable) {
		t.Skipf("no FUSE here: %v", err)
	}
	testutil.NoError(t, err, "mount")
	t.Cleanup(func() { p.Unmount() })
	o, _ := testOptions(t)
	o.Dir, o.Flush = dir, FlushSync
	s, err := Open(o)
	testutil.NoError(t, err, "Open")
	first := s
	t.Cleanup(func() { first.Close() }) // closed below too; Close is idempotent
	var puts []PutResult
	for i := range 10 {
		puts = append(puts, mustPut(t, s, newMsg("T", 0, fmt.Sprint("a", i), nil)))
	}
	checkpointNow(t, s)
	testutil.NoError(t, s.TruncateLog(puts[6].CommitLogOffset), "TruncateLog")
	for i := range 10 {
		mustPut(t, s, newMsg("U", 0, fmt.Sprint("b", i), nil)) // fsynced: FlushSync
	}
	p.PowerLoss()
	disk := filepath.Join(t.TempDir(), "disk")
	testutil.NoError(t, os.CopyFS(disk, os.DirFS(backing)), "copy the disk as the power loss left it")
	s.Close()

	o.Dir = disk
	s = openStore(t, o)
	testutil.Equal(t, s.MaxOffset("T", 0), int64(6), "entries of T/0 after the power loss")
	testutil.Equal(t, s.MaxOffset("U", 0), int64(10), "entries of U/0 after the power loss")
}
