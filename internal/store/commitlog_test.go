package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/testutil"
)

// Every full segment ends with a blank marker whose TOTALSIZE is the rest of
// the segment; records never straddle; names are the 20-digit start offsets.
func TestCommitLogSegmentRollWritesBlankMarker(t *testing.T) {
	o, _ := testOptions(t)
	s := openStore(t, o)
	for i := 0; i < 100; i++ {
		mustPut(t, s, newMsg("T", int32(i%3), strings.Repeat("b", 50+i*7%300), nil))
	}
	files := segmentFiles(t, o.Dir)
	testutil.True(t, len(files) >= 5, "segments rolled")
	for i, path := range files {
		testutil.Equal(t, filepath.Base(path), fmt.Sprintf("%020d", int64(i)*o.SegmentSize), "segment name")
		b, err := os.ReadFile(path)
		testutil.NoError(t, err)
		testutil.True(t, int64(len(b)) <= o.SegmentSize, "file within the segment size")
		p := 0
		for p < len(b) {
			size := int(binary.BigEndian.Uint32(b[p:]))
			magic := binary.BigEndian.Uint32(b[p+4:])
			if magic == protocol.BlankMagicCode {
				testutil.Equal(t, int64(size), o.SegmentSize-int64(p), "marker covers the rest")
				testutil.Equal(t, len(b), p+blankMarkerLen, "marker is the last thing written")
				break
			}
			m, n, err := protocol.DecodeStoredMessage(b[p:], false, true)
			testutil.NoError(t, err, path, p)
			testutil.Equal(t, m.CommitLogOffset, int64(i)*o.SegmentSize+int64(p), "physical offset is global")
			p += n
		}
		if i < len(files)-1 {
			testutil.True(t, p < len(b), "a full segment ends with a marker")
		}
		if _, err := os.Stat(filepath.Join(o.Dir, "index", filepath.Base(path))); err != nil {
			t.Fatalf("segment %s has no key index: %v", path, err)
		}
	}
}

func TestCommitLogRecordMustFitSegment(t *testing.T) {
	o, _ := testOptions(t)
	s := openStore(t, o)
	_, err := s.PutMessage(context.Background(), newMsg("T", 0, strings.Repeat("x", int(o.SegmentSize)), nil))
	testutil.ErrorIs(t, err, ErrMessageTooLarge)
	// The largest record that fits: segment minus marker.
	m := newMsg("T", 0, "", nil)
	m.Body = make([]byte, int(o.SegmentSize)-blankMarkerLen-m.RecordSize())
	mustPut(t, s, newMsg("T", 0, "small first", nil))
	res := mustPut(t, s, m)
	testutil.Equal(t, res.CommitLogOffset, o.SegmentSize, "rolled to a fresh segment")
	got, err := s.MessageAt(res.CommitLogOffset)
	testutil.NoError(t, err)
	testutil.Equal(t, len(got.Body), len(m.Body))
	res = mustPut(t, s, newMsg("T", 0, "after", nil))
	testutil.Equal(t, res.CommitLogOffset, 2*o.SegmentSize)
}

// Sync mode: many concurrent puts share fsyncs, and none returns before its
// bytes are covered by the flushed position.
func TestCommitLogGroupCommit(t *testing.T) {
	o, _ := testOptions(t)
	o.Flush = FlushSync
	o.SegmentSize = 64 << 10
	s := openStore(t, o)
	const workers, each = 32, 20
	before := s.fsyncCount()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				m := newMsg("G", int32(w%4), fmt.Sprintf("%d-%d", w, i), nil)
				res, err := s.PutMessage(context.Background(), m)
				if err != nil {
					errs <- err
					return
				}
				if res.Status != PutOK {
					errs <- fmt.Errorf("status %v", res.Status)
					return
				}
				if end := res.CommitLogOffset + int64(m.StoreSize); s.cl.flushedPos.Load() < end {
					errs <- fmt.Errorf("put returned with flushed %d below its end %d", s.cl.flushedPos.Load(), end)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	fsyncs := s.fsyncCount() - before
	t.Logf("%d sync puts, %d fsyncs", workers*each, fsyncs)
	testutil.True(t, fsyncs > 0, "fsyncs happened")
	testutil.True(t, fsyncs < workers*each, fmt.Sprintf("group commit: %d fsyncs for %d puts", fsyncs, workers*each))
}

func TestCommitLogAsyncFlushInterval(t *testing.T) {
	o, _ := testOptions(t)
	o.FlushInterval = 10 * time.Millisecond
	s := openStore(t, o)
	m := newMsg("A", 0, "x", nil)
	res := mustPut(t, s, m)
	end := res.CommitLogOffset + int64(m.StoreSize)
	testutil.Eventually(t, 5*time.Second, func() error {
		if got := s.cl.flushedPos.Load(); got < end {
			return fmt.Errorf("flushed %d < %d", got, end)
		}
		return nil
	})
}

func TestCommitLogWaitFlushedTimesOut(t *testing.T) {
	o, _ := testOptions(t)
	o.Flush = FlushSync
	s := openStore(t, o)
	mustPut(t, s, newMsg("A", 0, "x", nil))
	// A position nothing will ever reach.
	ok := s.cl.waitFlushed(context.Background(), s.CommitLogMaxOffset()+1, 30*time.Millisecond)
	testutil.True(t, !ok, "timed out")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ok = s.cl.waitFlushed(ctx, s.CommitLogMaxOffset()+1, time.Hour)
	testutil.True(t, !ok, "context ended")
}

// The log may end exactly at a segment's end-of-segment marker with no next
// segment (its first record torn and the empty file gone): writing resumes
// with a new segment at the boundary.
func TestCommitLogRecoveryEndsAtSegmentBoundary(t *testing.T) {
	o, lb := testOptions(t)
	s := openStore(t, o)
	for i := 0; i < 40; i++ {
		mustPut(t, s, newMsg("T", 0, strings.Repeat("r", 150), nil))
	}
	s.abandon()
	files := segmentFiles(t, o.Dir)
	last := files[len(files)-1]
	testutil.NoError(t, os.Remove(last))
	s = openStore(t, o)
	boundary := int64(len(files)-1) * o.SegmentSize
	testutil.Equal(t, s.CommitLogMaxOffset(), boundary)
	testutil.True(t, containsLog(lb, "dropped entries pointing past the end") || s.MaxOffset("T", 0) < 40, "entries of the lost segment dropped")
	n := s.MaxOffset("T", 0)
	testutil.Equal(t, int64(len(readAll(t, s, "T", 0))), n)
	res := mustPut(t, s, newMsg("T", 0, "resumed", nil))
	testutil.Equal(t, res.CommitLogOffset, boundary)
	testutil.Equal(t, res.QueueOffset, n)
	testutil.Equal(t, filepath.Base(segmentFiles(t, o.Dir)[len(files)-1]), offsetName(boundary))
}

// Close while sync puts are waiting: every put returns (stored, or
// ErrClosed), nothing hangs, and everything acknowledged is there afterwards.
func TestCommitLogCloseWithSyncPutsInFlight(t *testing.T) {
	o, _ := testOptions(t)
	o.Flush = FlushSync
	s, err := Open(o)
	testutil.NoError(t, err)
	var wg sync.WaitGroup
	var mu sync.Mutex
	acked := 0
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				_, err := s.PutMessage(context.Background(), newMsg("T", int32(w), "x", nil))
				if err != nil {
					if !errors.Is(err, ErrClosed) {
						t.Errorf("put during Close: %v", err)
					}
					return
				}
				mu.Lock()
				acked++
				mu.Unlock()
			}
		}(w)
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if acked < 50 {
			return fmt.Errorf("%d acked", acked)
		}
		return nil
	})
	testutil.NoError(t, s.Close())
	wg.Wait()
	s = openStore(t, o)
	total := int64(0)
	for _, q := range s.Queues("T") {
		total += s.MaxOffset("T", q)
	}
	testutil.True(t, total >= int64(acked), fmt.Sprintf("%d stored, %d acknowledged", total, acked))
}
