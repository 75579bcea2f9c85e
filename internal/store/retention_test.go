package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/testutil"
)

func TestStoreRetentionDeletesExpiredSegments(t *testing.T) {
	o, lb := testOptions(t)
	clock := &fakeClock{now: time.UnixMilli(1_700_000_000_000)}
	o.Clock = clock.Now
	o.FileReservedTime = time.Hour
	s := openStore(t, o)
	phys := map[int32][]int64{}
	for i := 0; i < 60; i++ {
		q := int32(i % 2)
		res := mustPut(t, s, newMsg("T", q, strings.Repeat("o", 200), nil))
		phys[q] = append(phys[q], res.CommitLogOffset)
	}
	before := len(segmentFiles(t, o.Dir))
	testutil.True(t, before >= 4, "several segments")

	// Nothing is old yet.
	s.runRetention()
	testutil.Equal(t, len(segmentFiles(t, o.Dir)), before)

	clock.Advance(2 * time.Hour)
	fresh := mustPut(t, s, newMsg("T", 0, "fresh", nil))
	phys[0] = append(phys[0], fresh.CommitLogOffset)
	testutil.NoError(t, s.cl.flushCommitLog())
	checkpointNow(t, s) // write the consume-queue files
	s.runRetention()

	after := segmentFiles(t, o.Dir)
	testutil.Equal(t, len(after), 1, "only the segment being written is left")
	clMin := s.CommitLogMinOffset()
	testutil.Equal(t, filepath.Base(after[0]), offsetName(clMin))
	testutil.True(t, clMin <= fresh.CommitLogOffset, "the fresh record is kept")
	testutil.True(t, containsLog(lb, "retention deleted commit-log segments"), "deletion logged")
	idx, _ := os.ReadDir(filepath.Join(o.Dir, "index"))
	testutil.Equal(t, len(idx), 1, "key indexes deleted with their segments")

	check := func(s *Store) {
		t.Helper()
		for q, offs := range phys {
			wantMin := int64(len(offs))
			for i, p := range offs {
				if p >= clMin {
					wantMin = int64(i)
					break
				}
			}
			testutil.Equal(t, s.MinOffset("T", q), wantMin, "min offset of queue", q)
			testutil.Equal(t, s.MaxOffset("T", q), int64(len(offs)))
			res := s.GetMessages("T", q, 0, 32, 0, nil)
			if wantMin > 0 {
				testutil.Equal(t, res.Status, OffsetTooSmall)
				testutil.Equal(t, res.NextBeginOffset, wantMin)
			}
			testutil.Equal(t, int64(len(readAll(t, s, "T", q))), int64(len(offs))-wantMin)
		}
		_, err := s.MessageAt(phys[1][0])
		testutil.ErrorIs(t, err, ErrNotFound)
	}
	check(s)
	// Consume-queue files entirely below the commit log are gone; the last one stays.
	files, _ := os.ReadDir(filepath.Join(o.Dir, "consumequeue", "T", "1"))
	testutil.Equal(t, len(files), 1)

	testutil.NoError(t, s.Close())
	check(openStore(t, o))
}

func TestStoreRetentionKeepsActiveSegment(t *testing.T) {
	o, _ := testOptions(t)
	clock := &fakeClock{now: time.UnixMilli(1_700_000_000_000)}
	o.Clock = clock.Now
	o.FileReservedTime = time.Minute
	s := openStore(t, o)
	for i := 0; i < 5; i++ {
		mustPut(t, s, newMsg("T", 0, "old", nil))
	}
	testutil.NoError(t, s.cl.flushCommitLog())
	clock.Advance(24 * time.Hour)
	s.runRetention()
	testutil.Equal(t, len(segmentFiles(t, o.Dir)), 1)
	testutil.Equal(t, len(readAll(t, s, "T", 0)), 5)
}

// The periodic cleaner runs retention on its own.
func TestStoreRetentionRunsPeriodically(t *testing.T) {
	o, _ := testOptions(t)
	clock := &fakeClock{now: time.UnixMilli(1_700_000_000_000)}
	o.Clock = clock.Now
	o.FileReservedTime = time.Hour
	o.CleanInterval = 10 * time.Millisecond
	o.FlushInterval = 10 * time.Millisecond
	s := openStore(t, o)
	for i := 0; i < 40; i++ {
		mustPut(t, s, newMsg("T", 0, strings.Repeat("o", 200), nil))
	}
	clock.Advance(2 * time.Hour)
	mustPut(t, s, newMsg("T", 0, "fresh", nil))
	testutil.Eventually(t, 5*time.Second, func() error {
		if n := len(segmentFiles(t, o.Dir)); n != 1 {
			return fmt.Errorf("%d segments left", n)
		}
		if s.MinOffset("T", 0) == 0 {
			return fmt.Errorf("min offset did not move")
		}
		return nil
	})
}

func TestStoreDiskFullGuard(t *testing.T) {
	o, lb := testOptions(t)
	s := openStore(t, o)
	mustPut(t, s, newMsg("T", 0, "before", nil))
	end := s.CommitLogMaxOffset()
	testutil.True(t, s.DiskUsedRatio() > 0 && s.DiskUsedRatio() < 1, "a plausible usage ratio")

	s.SetDiskMaxUsedRatio(0.0001)
	_, err := s.PutMessage(context.Background(), newMsg("T", 0, "refused", nil))
	testutil.ErrorIs(t, err, ErrDiskFull)
	testutil.True(t, strings.Contains(err.Error(), "DiskMaxUsedRatio"), err.Error())
	_, err = s.PutMessages(context.Background(), nil)
	testutil.True(t, err != nil, "batch refused too")
	testutil.Equal(t, s.CommitLogMaxOffset(), end, "nothing written")
	testutil.Equal(t, len(readAll(t, s, "T", 0)), 1, "still readable")
	testutil.True(t, containsLog(lb, "refusing puts"), "logged")

	s.SetDiskMaxUsedRatio(1)
	res := mustPut(t, s, newMsg("T", 0, "after", nil))
	testutil.Equal(t, res.QueueOffset, int64(1))

	// The limit from Options applies from the start.
	o2, _ := testOptions(t)
	o2.DiskMaxUsedRatio = 0.0001
	s2 := openStore(t, o2)
	_, err = s2.PutMessage(context.Background(), newMsg("T", 0, "x", nil))
	testutil.ErrorIs(t, err, ErrDiskFull)
}
