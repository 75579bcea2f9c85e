package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/testutil"
)

// fillStore writes n keyed messages to T/0 (and every third one to T/1 as
// well) and returns the T/0 results.
func fillStore(t *testing.T, s *Store, n int) []PutResult {
	t.Helper()
	var out []PutResult
	for i := 0; i < n; i++ {
		out = append(out, mustPut(t, s, newMsg("T", 0, fmt.Sprintf("body-%d-%s", i, strings.Repeat("p", i%50)), map[string]string{"KEYS": keyOf(i), "TAGS": "a"})))
		if i%3 == 0 {
			mustPut(t, s, newMsg("T", 1, fmt.Sprint(i), nil))
		}
	}
	return out
}

func TestStoreRecoveryCleanReopen(t *testing.T) {
	o, _ := testOptions(t)
	s := openStore(t, o)
	fillStore(t, s, 80)
	s.CommitOffset("g", "T", 0, 42)
	end := s.CommitLogMaxOffset()
	max0, max1 := s.MaxOffset("T", 0), s.MaxOffset("T", 1)
	testutil.NoError(t, s.Close())

	testutil.True(t, !fileExists(filepath.Join(o.Dir, "abort")), "abort file removed")
	b, err := os.ReadFile(filepath.Join(o.Dir, "checkpoint"))
	testutil.NoError(t, err)
	var cp checkpoint
	testutil.NoError(t, json.Unmarshal(b, &cp))
	testutil.Equal(t, cp.CommitLogFlushed, end, "exact checkpoint")
	testutil.Equal(t, cp.ConsumeQueues["T"][0], max0)

	lb, logger := newLogBuffer(t)
	o.Logger = logger
	s = openStore(t, o)
	testutil.True(t, fileExists(filepath.Join(o.Dir, "abort")), "abort file while open")
	testutil.Equal(t, s.CommitLogMaxOffset(), end)
	testutil.Equal(t, s.MaxOffset("T", 0), max0)
	testutil.Equal(t, s.MaxOffset("T", 1), max1)
	testutil.Equal(t, len(readAll(t, s, "T", 0)), 80)
	off, _ := s.QueryOffset("g", "T", 0)
	testutil.Equal(t, off, int64(42))
	testutil.True(t, !strings.Contains(lb.String(), "level=WARN"), "a clean reopen warns about nothing")
	testutil.True(t, strings.Contains(lb.String(), "records=0"), "nothing to verify past an exact checkpoint")
	res := mustPut(t, s, newMsg("T", 0, "next", nil))
	testutil.Equal(t, res.QueueOffset, int64(80))
	testutil.Equal(t, res.CommitLogOffset, end)
}

// An unclean stop with nothing torn loses nothing and re-verifies the tail.
func TestStoreRecoveryUncleanKeepsEverything(t *testing.T) {
	o, _ := testOptions(t)
	s := openStore(t, o)
	fillStore(t, s, 60)
	end := s.CommitLogMaxOffset()
	s.abandon()
	testutil.True(t, fileExists(filepath.Join(o.Dir, "abort")))
	lb, logger := newLogBuffer(t)
	o.Logger = logger
	s = openStore(t, o)
	testutil.True(t, containsLog(lb, "did not shut down cleanly"), "unclean shutdown reported")
	testutil.True(t, !containsLog(lb, "torn tail"), "nothing torn")
	testutil.Equal(t, s.CommitLogMaxOffset(), end)
	testutil.Equal(t, len(readAll(t, s, "T", 0)), 60)
	testutil.Equal(t, len(readAll(t, s, "T", 1)), 20)
}

// Torn tails written by the test itself: Open truncates only the torn part,
// says what it dropped, and everything before it stays readable with
// consistent consume queues.
func TestStoreRecoveryTornTail(t *testing.T) {
	cases := []struct {
		name    string
		tear    func(t *testing.T, path string, pos, size int64)
		kept    int // of 50 messages to T/0
		dropped bool
		// wholeRecord: the damaged record is complete, so Open refuses it
		// until RecoverDropCorrupt is set.
		wholeRecord bool
	}{
		{"truncated mid-record", func(t *testing.T, path string, pos, size int64) {
			testutil.NoError(t, os.Truncate(path, pos+size/2))
		}, 49, true, false},
		{"truncated mid-header", func(t *testing.T, path string, pos, size int64) {
			testutil.NoError(t, os.Truncate(path, pos+5))
		}, 49, true, false},
		{"garbage appended", func(t *testing.T, path string, pos, size int64) {
			appendBytes(t, path, []byte("\x00\x00\x01\x00garbage garbage garbage garbage"))
		}, 50, false, false},
		{"zeros appended", func(t *testing.T, path string, pos, size int64) {
			appendBytes(t, path, make([]byte, 300))
		}, 50, false, false},
		{"CRC flipped in the last record", func(t *testing.T, path string, pos, size int64) {
			flipByte(t, path, pos+8)
		}, 49, true, true},
		{"body flipped in the last record", func(t *testing.T, path string, pos, size int64) {
			flipByte(t, path, pos+bodyOffsetV4+2)
		}, 49, true, true},
		{"topic damaged in the last record", func(t *testing.T, path string, pos, size int64) {
			b, err := os.ReadFile(path)
			testutil.NoError(t, err)
			m, _, err := protocol.DecodeStoredMessage(b[pos:], false, true)
			testutil.NoError(t, err)
			flipByte(t, path, pos+bodyOffsetV4+int64(len(m.Body))+1) // first topic byte
		}, 49, true, true}, // the CRC32C covers the topic: a complete record that was damaged
		{"size field of the last record wrong", func(t *testing.T, path string, pos, size int64) {
			flipByte(t, path, pos+3)
		}, 49, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o, _ := testOptions(t)
			s := openStore(t, o)
			results := fillStore(t, s, 50)
			last := results[len(results)-1]
			// The consume-queue and key-index files were written, the
			// checkpoint (still at 0) was not: recovery must drop the entries
			// of the torn record.
			flushDerived(t, s)
			s.abandon()

			files := segmentFiles(t, o.Dir)
			path := files[len(files)-1]
			pos, size := lastRecordStart(t, path)
			testutil.Equal(t, last.CommitLogOffset, int64(len(files)-1)*o.SegmentSize+pos, "the last record is the last T/0 put")
			tc.tear(t, path, pos, size)
			if tc.wholeRecord {
				_, err := Open(o)
				testutil.ErrorIs(t, err, ErrCorrupt)
				testutil.True(t, strings.Contains(err.Error(), "--recover-drop-corrupt"), err.Error())
				testutil.True(t, strings.Contains(err.Error(), fmt.Sprintf("offset %d", last.CommitLogOffset)), err.Error())
				_, err = Open(o) // nothing was truncated: the same refusal
				testutil.ErrorIs(t, err, ErrCorrupt)
				o.RecoverDropCorrupt = true
			}

			lb, logger := newLogBuffer(t)
			o.Logger = logger
			s = openStore(t, o)
			log := lb.String()
			testutil.True(t, strings.Contains(log, "truncated a torn tail"), "torn tail logged")
			testutil.True(t, !s.LostDurableRecords(), "the torn record was never reported durable")
			if tc.wholeRecord {
				testutil.True(t, strings.Contains(log, "recovery drops a corrupt record"), "the drop is logged as such")
			}
			if tc.dropped {
				testutil.True(t, strings.Contains(log, fmt.Sprintf("from=%d", last.CommitLogOffset)), "dropped range logged")
				testutil.True(t, strings.Contains(log, "dropped entries pointing past the end of the commit log"), "queue entry drop logged")
				testutil.Equal(t, s.CommitLogMaxOffset(), last.CommitLogOffset)
			}
			got := readAll(t, s, "T", 0)
			testutil.Equal(t, len(got), tc.kept)
			for i, m := range got {
				testutil.True(t, strings.HasPrefix(string(m.Body), fmt.Sprintf("body-%d-", i)), string(m.Body))
			}
			testutil.Equal(t, s.MaxOffset("T", 0), int64(tc.kept))
			testutil.Equal(t, len(readAll(t, s, "T", 1)), 17)
			found, err := s.QueryByKey("T", keyOf(49), 5, 0, 0)
			testutil.NoError(t, err)
			testutil.Equal(t, len(found), tc.kept-49)
			found, err = s.QueryByKey("T", keyOf(48), 5, 0, 0)
			testutil.NoError(t, err)
			testutil.Equal(t, len(found), 1)
			// The store continues where the valid log ended.
			res := mustPut(t, s, newMsg("T", 0, "after recovery", nil))
			testutil.Equal(t, res.QueueOffset, int64(tc.kept))
			testutil.NoError(t, s.Close())
			s = openStore(t, o)
			testutil.Equal(t, len(readAll(t, s, "T", 0)), tc.kept+1)
		})
	}
}

// A corrupt record with valid records after it is not a torn tail: Open
// refuses to drop data from the middle of the log.
func TestStoreRecoveryMiddleCorruptionFails(t *testing.T) {
	cases := []struct {
		name    string
		corrupt func(t *testing.T, o Options, results []PutResult)
	}{
		{"bad CRC in the last segment", func(t *testing.T, o Options, results []PutResult) {
			files := segmentFiles(t, o.Dir)
			first := int64(len(files)-1) * o.SegmentSize
			for _, r := range results {
				if r.CommitLogOffset > first {
					flipByte(t, files[len(files)-1], r.CommitLogOffset-first+8)
					return
				}
			}
			t.Fatal("no second record in the last segment")
		}},
		{"bad size in the last segment", func(t *testing.T, o Options, results []PutResult) {
			files := segmentFiles(t, o.Dir)
			first := int64(len(files)-1) * o.SegmentSize
			for _, r := range results {
				if r.CommitLogOffset > first {
					flipByte(t, files[len(files)-1], r.CommitLogOffset-first+1)
					return
				}
			}
			t.Fatal("no second record in the last segment")
		}},
		{"last record of an earlier segment", func(t *testing.T, o Options, results []PutResult) {
			files := segmentFiles(t, o.Dir)
			pos, _ := lastRecordStart(t, files[0])
			flipByte(t, files[0], pos+8)
		}},
		{"earlier segment cut short", func(t *testing.T, o Options, results []PutResult) {
			files := segmentFiles(t, o.Dir)
			pos, size := lastRecordStart(t, files[0])
			testutil.NoError(t, os.Truncate(files[0], pos+size))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o, _ := testOptions(t)
			s := openStore(t, o)
			results := fillStore(t, s, 50)
			s.abandon()
			tc.corrupt(t, o, results)
			_, err := Open(o)
			testutil.ErrorIs(t, err, ErrCorrupt)
			testutil.True(t, strings.Contains(err.Error(), "not a torn tail"), err.Error())
			t.Log(err)
			// Nothing was truncated: the same error again.
			_, err = Open(o)
			testutil.ErrorIs(t, err, ErrCorrupt)
		})
	}
}

// Consume queues and key indexes that lost entries the checkpoint recorded
// are rebuilt from the commit log.
func TestStoreRecoveryRebuildsDerivedFiles(t *testing.T) {
	t.Run("queue directory deleted", func(t *testing.T) {
		o, _ := testOptions(t)
		s := openStore(t, o)
		fillStore(t, s, 40)
		testutil.NoError(t, s.Close())
		testutil.NoError(t, os.RemoveAll(filepath.Join(o.Dir, "consumequeue", "T", "0")))
		lb, logger := newLogBuffer(t)
		o.Logger = logger
		s = openStore(t, o)
		testutil.True(t, containsLog(lb, "consume queue in the checkpoint is missing"), "logged")
		testutil.Equal(t, len(readAll(t, s, "T", 0)), 40)
		testutil.Equal(t, len(readAll(t, s, "T", 1)), 14)
	})
	t.Run("queue file cut short", func(t *testing.T) {
		o, _ := testOptions(t)
		s := openStore(t, o)
		fillStore(t, s, 40)
		testutil.NoError(t, s.Close())
		last := filepath.Join(o.Dir, "consumequeue", "T", "0", fmt.Sprintf("%020d", 32*cqEntrySize))
		testutil.NoError(t, os.Truncate(last, 3*cqEntrySize))
		lb, logger := newLogBuffer(t)
		o.Logger = logger
		s = openStore(t, o)
		testutil.True(t, containsLog(lb, "lost entries the checkpoint recorded"), "logged")
		got := readAll(t, s, "T", 0)
		testutil.Equal(t, len(got), 40)
		testutil.Equal(t, string(got[39].Body[:8]), "body-39-")
	})
	t.Run("key index deleted", func(t *testing.T) {
		o, _ := testOptions(t)
		s := openStore(t, o)
		fillStore(t, s, 40)
		testutil.NoError(t, s.Close())
		testutil.NoError(t, os.Remove(filepath.Join(o.Dir, "index", fmt.Sprintf("%020d", 0))))
		lb, logger := newLogBuffer(t)
		o.Logger = logger
		s = openStore(t, o)
		testutil.True(t, containsLog(lb, "key index of a segment is missing"), "logged")
		found, err := s.QueryByKey("T", keyOf(0), 5, 0, 0)
		testutil.NoError(t, err)
		testutil.Equal(t, len(found), 1)
	})
	t.Run("checkpoint deleted", func(t *testing.T) {
		o, _ := testOptions(t)
		s := openStore(t, o)
		fillStore(t, s, 40)
		testutil.NoError(t, s.Close())
		testutil.NoError(t, os.Remove(filepath.Join(o.Dir, "checkpoint")))
		lb, logger := newLogBuffer(t)
		o.Logger = logger
		s = openStore(t, o)
		testutil.True(t, containsLog(lb, "records=54"), "every record verified")
		testutil.Equal(t, len(readAll(t, s, "T", 0)), 40)
	})
	t.Run("queue entry points elsewhere", func(t *testing.T) {
		o, _ := testOptions(t)
		s := openStore(t, o)
		fillStore(t, s, 40)
		flushDerived(t, s)
		s.abandon()
		// Entry 38 of T/0 now points at entry 37's record.
		path := filepath.Join(o.Dir, "consumequeue", "T", "0", fmt.Sprintf("%020d", 32*cqEntrySize))
		b, err := os.ReadFile(path)
		testutil.NoError(t, err)
		copy(b[6*cqEntrySize:7*cqEntrySize], b[5*cqEntrySize:6*cqEntrySize])
		testutil.NoError(t, os.WriteFile(path, b, 0o644))
		lb, logger := newLogBuffer(t)
		o.Logger = logger
		s = openStore(t, o)
		testutil.True(t, containsLog(lb, "disagrees with the commit log"), "logged")
		got := readAll(t, s, "T", 0)
		testutil.Equal(t, len(got), 40)
		testutil.Equal(t, string(got[38].Body[:8]), "body-38-")
	})
}

func appendBytes(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	testutil.NoError(t, err)
	_, err = f.Write(b)
	testutil.NoError(t, err)
	testutil.NoError(t, f.Close())
}

func flipByte(t *testing.T, path string, at int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	testutil.NoError(t, err)
	defer f.Close()
	var b [1]byte
	_, err = f.ReadAt(b[:], at)
	testutil.NoError(t, err)
	b[0] ^= 0x5A
	_, err = f.WriteAt(b[:], at)
	testutil.NoError(t, err)
}

// bodyOffsetV4 is where BODY starts in a record with IPv4 hosts.
const bodyOffsetV4 = 88

// A light checkpoint syncs only busy queues and holds the recorded position
// back to the first record whose queue entry is not durable yet; a full one
// covers everything flushed.
func TestStoreCheckpointLightAndFull(t *testing.T) {
	o, _ := testOptions(t)
	o.SegmentSize = 1 << 20
	o.ConsumeQueueEntries = 1000
	s := openStore(t, o)
	quiet := mustPut(t, s, newMsg("Quiet", 0, "q0", nil))
	for i := 0; i < cqTailFlushEntries+10; i++ {
		mustPut(t, s, newMsg("Busy", 0, "b", nil))
	}
	testutil.NoError(t, s.cl.flushCommitLog())
	read := func() checkpoint {
		b, err := os.ReadFile(filepath.Join(o.Dir, "checkpoint"))
		testutil.NoError(t, err)
		var cp checkpoint
		testutil.NoError(t, json.Unmarshal(b, &cp))
		return cp
	}
	s.maintMu.Lock()
	testutil.NoError(t, s.checkpointLocked(false))
	s.maintMu.Unlock()
	cp := read()
	testutil.Equal(t, cp.ConsumeQueues["Busy"][0], int64(cqTailFlushEntries+10), "busy queue synced")
	testutil.Equal(t, cp.ConsumeQueues["Quiet"][0], int64(0), "quiet queue left for later")
	testutil.Equal(t, cp.CommitLogFlushed, quiet.CommitLogOffset, "held back to the quiet queue's first record")

	checkpointNow(t, s)
	cp = read()
	testutil.Equal(t, cp.ConsumeQueues["Quiet"][0], int64(1))
	testutil.Equal(t, cp.CommitLogFlushed, s.CommitLogMaxOffset())
}

// After a crash the segment being written is verified from its start, not
// only past the checkpoint: a record the checkpoint already counted as
// durable that was damaged on disk is found at Open (ErrCorrupt: valid
// records follow it), not by the first read that needs it.
func TestStoreRecoveryUncleanVerifiesTheWholeLastSegment(t *testing.T) {
	o := crashedWholeCheckpoint(t)
	seg := segmentFiles(t, o.Dir)
	last := seg[len(seg)-1]
	// Flip a body byte of the first record, far below the checkpoint.
	f, err := os.OpenFile(last, os.O_RDWR, 0)
	testutil.NoError(t, err)
	var b [1]byte
	_, err = f.ReadAt(b[:], 120)
	testutil.NoError(t, err)
	b[0] ^= 0x10
	_, err = f.WriteAt(b[:], 120)
	testutil.NoError(t, err)
	testutil.NoError(t, f.Close())

	_, err = Open(o)
	testutil.True(t, errors.Is(err, ErrCorrupt), "the damaged record below the checkpoint is found", err)
}

// A commit log cut below its flushed checkpoint — at a record boundary or
// inside a record — lost records the store had reported durable: Open
// says so (LostDurableRecords), and a replicated broker then refuses to
// lead until it has copied them back.
func TestStoreReportsLostDurableRecords(t *testing.T) {
	for _, mid := range []bool{false, true} {
		t.Run(fmt.Sprintf("inside a record %v", mid), func(t *testing.T) {
			o := crashedWholeCheckpoint(t)
			files := segmentFiles(t, o.Dir)
			path := files[len(files)-1]
			pos, size := lastRecordStart(t, path)
			cut := pos
			if mid {
				cut += size / 2
			}
			testutil.NoError(t, os.Truncate(path, cut))
			s := openStore(t, o)
			testutil.True(t, s.LostDurableRecords(), "a cut below the checkpoint is reported")
			testutil.NoError(t, s.Close())
			s = openStore(t, o)
			testutil.True(t, !s.LostDurableRecords(), "reported once: the next clean open has nothing missing")
		})
	}
}

// crashedWholeCheckpoint fills a store whose checkpoint then covers the
// whole log (everything fsynced and recorded so) and abandons it as a crash
// would; it returns the options that open it again.
func crashedWholeCheckpoint(t *testing.T) Options {
	t.Helper()
	o, _ := testOptions(t)
	s := openStore(t, o)
	fillStore(t, s, 60)
	testutil.NoError(t, s.cl.flushCommitLog(), "flush")
	flushDerived(t, s)
	checkpointNow(t, s)
	testutil.Equal(t, s.FlushedOffset(), s.CommitLogMaxOffset(), "the checkpoint covers the whole log")
	s.abandon()
	return o
}
