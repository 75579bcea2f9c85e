package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/testutil"
)

func TestStoreParseFlushMode(t *testing.T) {
	for in, want := range map[string]FlushMode{"async": FlushAsync, "ASYNC_FLUSH": FlushAsync, "sync": FlushSync, "SYNC_FLUSH": FlushSync, " Sync ": FlushSync} {
		got, err := ParseFlushMode(in)
		testutil.NoError(t, err, in)
		testutil.Equal(t, got, want, in)
	}
	if _, err := ParseFlushMode("sometimes"); err == nil {
		t.Fatal("ParseFlushMode accepted garbage")
	}
	testutil.Equal(t, FlushSync.String(), "sync")
	testutil.Equal(t, FlushAsync.String(), "async")
	testutil.Equal(t, OffsetTooSmall.String(), "OFFSET_TOO_SMALL")
	testutil.Equal(t, Found.String(), "FOUND")
	testutil.Equal(t, MessageWasRemoving.String(), "MESSAGE_WAS_REMOVING")
	testutil.Equal(t, PutFlushDiskTimeout.String(), "FLUSH_DISK_TIMEOUT")
}

func TestStoreOptionsValidation(t *testing.T) {
	o, _ := testOptions(t)
	o.SegmentSize = 100
	if _, err := Open(o); err == nil || !strings.Contains(err.Error(), "SegmentSize") {
		t.Fatalf("tiny SegmentSize: %v", err)
	}
	o, _ = testOptions(t)
	o.DiskMaxUsedRatio = 1.5
	if _, err := Open(o); err == nil || !strings.Contains(err.Error(), "DiskMaxUsedRatio") {
		t.Fatalf("ratio 1.5: %v", err)
	}
	if _, err := Open(Options{}); err == nil {
		t.Fatal("Open without Dir succeeded")
	}
}

// Many topics and queues, records rolling over many 4 KiB segments and
// 8-entry consume-queue files: everything comes back as written.
func TestStorePutGetRoundTrip(t *testing.T) {
	o, _ := testOptions(t)
	s := openStore(t, o)
	topics := []string{"TopicA", "TopicB", "%RETRY%group-1"}
	const perQueue = 30
	want := map[string][]string{}
	var lastCL int64 = -1
	for i := 0; i < perQueue; i++ {
		for _, topic := range topics {
			for q := int32(0); q < 4; q++ {
				body := fmt.Sprintf("%s/%d/%d/%s", topic, q, i, strings.Repeat("x", rand.Intn(200)))
				m := newMsg(topic, q, body, map[string]string{"TAGS": "t", "KEYS": keyOf(i)})
				res := mustPut(t, s, m)
				testutil.Equal(t, res.QueueOffset, int64(i), "queue offset")
				testutil.Equal(t, res.Count, 1)
				testutil.True(t, res.CommitLogOffset > lastCL, "commit-log offsets grow")
				lastCL = res.CommitLogOffset
				testutil.Equal(t, m.QueueOffset, int64(i))
				testutil.Equal(t, m.CommitLogOffset, res.CommitLogOffset)
				testutil.Equal(t, res.MsgID, protocol.OffsetMessageID(o.StoreHost, res.CommitLogOffset))
				host, off, err := protocol.ParseOffsetMessageID(res.MsgID)
				testutil.NoError(t, err)
				testutil.Equal(t, host, o.StoreHost)
				testutil.Equal(t, off, res.CommitLogOffset)
				key := fmt.Sprintf("%s/%d", topic, q)
				want[key] = append(want[key], body)
			}
		}
	}
	testutil.True(t, len(segmentFiles(t, o.Dir)) > 10, "several segments")
	for _, topic := range topics {
		testutil.Equal(t, fmt.Sprint(s.Queues(topic)), "[0 1 2 3]", "queues")
		for q := int32(0); q < 4; q++ {
			got := readAll(t, s, topic, q)
			key := fmt.Sprintf("%s/%d", topic, q)
			testutil.Equal(t, len(got), len(want[key]), key)
			for i, m := range got {
				testutil.Equal(t, string(m.Body), want[key][i], key)
				testutil.Equal(t, m.Topic, topic)
				testutil.Equal(t, m.QueueID, q)
				testutil.Equal(t, m.QueueOffset, int64(i))
				testutil.Equal(t, m.StoreHost, o.StoreHost)
				at, err := s.MessageAt(m.CommitLogOffset)
				testutil.NoError(t, err, "MessageAt")
				testutil.Equal(t, string(at.Body), string(m.Body))
			}
		}
	}
	testutil.Equal(t, s.MaxOffset("TopicA", 0), int64(perQueue))
	testutil.Equal(t, s.MinOffset("TopicA", 0), int64(0))
	testutil.Equal(t, s.MaxOffset("nope", 0), int64(0))
	testutil.Equal(t, s.CommitLogMinOffset(), int64(0))
	testutil.True(t, s.CommitLogMaxOffset() > lastCL)
	testutil.Equal(t, len(s.Queues("nope")), 0)
}

func TestStorePutMessagesBatch(t *testing.T) {
	o, _ := testOptions(t)
	s := openStore(t, o)
	mustPut(t, s, newMsg("T", 1, "first", nil))
	var batch []*protocol.MessageExt
	for i := 0; i < 5; i++ {
		batch = append(batch, newMsg("T", 1, fmt.Sprintf("b%d", i), map[string]string{"KEYS": fmt.Sprintf("batch-%d", i)}))
	}
	res, err := s.PutMessages(context.Background(), batch)
	testutil.NoError(t, err)
	testutil.Equal(t, res.Count, 5)
	testutil.Equal(t, res.QueueOffset, int64(1))
	ids := strings.Split(res.MsgID, ",")
	testutil.Equal(t, len(ids), 5)
	next := res.CommitLogOffset
	for i, m := range batch {
		testutil.Equal(t, m.QueueOffset, int64(1+i))
		testutil.Equal(t, m.CommitLogOffset, next, "adjacent records")
		testutil.Equal(t, ids[i], protocol.OffsetMessageID(o.StoreHost, m.CommitLogOffset))
		testutil.Equal(t, m.StoreTimestamp, res.StoreTimestamp)
		next += int64(m.StoreSize)
	}
	got := readAll(t, s, "T", 1)
	testutil.Equal(t, len(got), 6)
	testutil.Equal(t, string(got[5].Body), "b4")

	// One batch, one queue.
	_, err = s.PutMessages(context.Background(), []*protocol.MessageExt{newMsg("T", 1, "a", nil), newMsg("T", 2, "b", nil)})
	testutil.ErrorIs(t, err, ErrIllegalMessage)
	_, err = s.PutMessages(context.Background(), nil)
	testutil.ErrorIs(t, err, ErrIllegalMessage)
	// A batch larger than a segment is refused whole.
	var big []*protocol.MessageExt
	for i := 0; i < 10; i++ {
		big = append(big, newMsg("T", 1, strings.Repeat("z", 500), nil))
	}
	_, err = s.PutMessages(context.Background(), big)
	testutil.ErrorIs(t, err, ErrMessageTooLarge)
	testutil.Equal(t, s.MaxOffset("T", 1), int64(6), "nothing of the refused batch stored")
}

func TestStorePutRejects(t *testing.T) {
	o, _ := testOptions(t)
	o.MaxMessageSize = 1000
	s := openStore(t, o)
	_, err := s.PutMessage(context.Background(), newMsg("T", 0, strings.Repeat("a", 1001), nil))
	testutil.ErrorIs(t, err, ErrMessageTooLarge)
	_, err = s.PutMessage(context.Background(), newMsg("bad/topic", 0, "x", nil))
	testutil.ErrorIs(t, err, ErrIllegalMessage)
	_, err = s.PutMessage(context.Background(), newMsg("T", -1, "x", nil))
	testutil.ErrorIs(t, err, ErrIllegalMessage)
	_, err = s.PutMessage(context.Background(), newMsg(strings.Repeat("t", 128), 0, "x", nil))
	testutil.ErrorIs(t, err, ErrIllegalMessage)
	_, err = s.PutMessage(context.Background(), nil)
	testutil.ErrorIs(t, err, ErrIllegalMessage)
	testutil.Equal(t, s.CommitLogMaxOffset(), int64(0), "nothing written")
	testutil.NoError(t, s.Close())
	_, err = s.PutMessage(context.Background(), newMsg("T", 0, "late", nil))
	testutil.ErrorIs(t, err, ErrClosed)
	testutil.NoError(t, s.Close(), "second Close")
}

func TestStoreTagFilter(t *testing.T) {
	o, _ := testOptions(t)
	s := openStore(t, o)
	for i := 0; i < 40; i++ {
		tag := "A"
		if i%4 != 0 {
			tag = "B"
		}
		mustPut(t, s, newMsg("T", 0, fmt.Sprintf("%s-%d", tag, i), map[string]string{"TAGS": tag}))
	}
	codeA := protocol.TagsHashCode("A")
	onlyA := func(code int64) bool { return code == codeA }
	res := s.GetMessages("T", 0, 0, 3, 0, onlyA)
	testutil.Equal(t, res.Status, Found)
	testutil.Equal(t, len(res.Messages), 3)
	for _, raw := range res.Messages {
		m, _, err := protocol.DecodeStoredMessage(raw, false, true)
		testutil.NoError(t, err)
		testutil.True(t, strings.HasPrefix(string(m.Body), "A-"), string(m.Body))
	}
	// The third A is at offset 8. As in RocketMQ, the batch-full test runs
	// before the filter, so the scan stops at offset 9.
	testutil.Equal(t, res.NextBeginOffset, int64(9))

	none := func(int64) bool { return false }
	res = s.GetMessages("T", 0, 5, 10, 0, none)
	testutil.Equal(t, res.Status, NoMatchedMessage)
	testutil.Equal(t, len(res.Messages), 0)
	testutil.Equal(t, res.NextBeginOffset, int64(40), "stepped over every scanned entry")
}

func TestStoreGetStatuses(t *testing.T) {
	o, _ := testOptions(t)
	s := openStore(t, o)

	res := s.GetMessages("Unknown", 0, 0, 32, 0, nil)
	testutil.Equal(t, res.Status, NoMessageInQueue)
	testutil.Equal(t, res.NextBeginOffset, int64(0))
	res = s.GetMessages("Unknown", 0, 7, 32, 0, nil)
	testutil.Equal(t, res.Status, NoMessageInQueue)
	testutil.Equal(t, res.NextBeginOffset, int64(0), "RocketMQ resets to 0")

	for i := 0; i < 20; i++ {
		mustPut(t, s, newMsg("T", 0, fmt.Sprintf("m%d", i), nil))
	}
	res = s.GetMessages("T", 0, 20, 32, 0, nil)
	testutil.Equal(t, res.Status, OffsetOverflowOne)
	testutil.Equal(t, res.NextBeginOffset, int64(20))
	testutil.Equal(t, res.MaxOffset, int64(20))
	res = s.GetMessages("T", 0, 25, 32, 0, nil)
	testutil.Equal(t, res.Status, OffsetOverflowBadly)
	testutil.Equal(t, res.NextBeginOffset, int64(0), "min is 0, so RocketMQ restarts at 0")

	// maxNums <= 0 means one; maxBytes cuts the batch but never the first record.
	res = s.GetMessages("T", 0, 0, 0, 0, nil)
	testutil.Equal(t, len(res.Messages), 1)
	testutil.Equal(t, res.NextBeginOffset, int64(1))
	res = s.GetMessages("T", 0, 0, 32, 10, nil)
	testutil.Equal(t, len(res.Messages), 1)
	res = s.GetMessages("T", 0, 0, 32, 0, nil)
	testutil.Equal(t, len(res.Messages), 20)
	testutil.Equal(t, res.NextBeginOffset, int64(20))
	// maxBytes counts stored records, 4 bytes (the CRC32C trailer) longer
	// than the records handed out.
	res = s.GetMessages("T", 0, 3, 32, (len(res.Messages[0])+4)*2+1, nil)
	testutil.Equal(t, len(res.Messages), 2)
	testutil.Equal(t, res.NextBeginOffset, int64(5))

	// OffsetTooSmall and OffsetOverflowBadly with min > 0: pretend the first
	// consume-queue file was deleted.
	flushDerived(t, s)
	q := s.queue("T", 0)
	q.minOffset.Store(8)
	res = s.GetMessages("T", 0, 3, 32, 0, nil)
	testutil.Equal(t, res.Status, OffsetTooSmall)
	testutil.Equal(t, res.NextBeginOffset, int64(8))
	testutil.Equal(t, res.MinOffset, int64(8))
	res = s.GetMessages("T", 0, 99, 32, 0, nil)
	testutil.Equal(t, res.Status, OffsetOverflowBadly)
	testutil.Equal(t, res.NextBeginOffset, int64(20))

	// OffsetFoundNull: the file holding the offset is gone.
	q.mu.Lock()
	saved := q.files
	q.files = q.files[2:]
	q.mu.Unlock()
	res = s.GetMessages("T", 0, 9, 32, 0, nil)
	testutil.Equal(t, res.Status, OffsetFoundNull)
	testutil.Equal(t, res.NextBeginOffset, int64(16), "start of the next file")
	q.mu.Lock()
	q.files = saved
	q.mu.Unlock()
	q.minOffset.Store(0)

	// MessageWasRemoving: entries point below the oldest segment.
	for i := 0; i < 40; i++ {
		mustPut(t, s, newMsg("T", 1, strings.Repeat("m", 200), nil))
	}
	mustPut(t, s, newMsg("T", 0, "in a later segment", nil))
	segs := s.cl.snapshot()
	testutil.True(t, len(segs) > 2, "several segments")
	s.cl.segMu.Lock()
	s.cl.segments = segs[1:]
	s.cl.segMu.Unlock()
	res = s.GetMessages("T", 0, 0, 1, 0, nil)
	testutil.Equal(t, res.Status, Found, "removed entries are stepped over")
	testutil.Equal(t, res.NextBeginOffset, int64(21))
	s.queue("T", 0).maxOffset.Store(20) // hide the live entry
	res = s.GetMessages("T", 0, 0, 32, 0, nil)
	testutil.Equal(t, res.Status, MessageWasRemoving)
	testutil.Equal(t, res.NextBeginOffset, int64(20), "stepped over removed entries")
	s.queue("T", 0).maxOffset.Store(21)
	s.cl.segMu.Lock()
	s.cl.segments = segs
	s.cl.segMu.Unlock()
}

func TestStoreOffsetByTimestamp(t *testing.T) {
	o, _ := testOptions(t)
	clock := &fakeClock{now: time.UnixMilli(1_000_000)}
	o.Clock = clock.Now
	s := openStore(t, o)
	for i := 0; i < 30; i++ {
		clock.Advance(10 * time.Millisecond)
		res := mustPut(t, s, newMsg("T", 2, fmt.Sprint(i), nil))
		testutil.Equal(t, res.StoreTimestamp, int64(1_000_000+10*(i+1)))
	}
	// Offset i was stored at 1_000_010 + 10*i.
	testutil.Equal(t, s.OffsetByTimestamp("T", 2, 0), int64(0))
	testutil.Equal(t, s.OffsetByTimestamp("T", 2, 1_000_010), int64(0))
	testutil.Equal(t, s.OffsetByTimestamp("T", 2, 1_000_011), int64(1))
	testutil.Equal(t, s.OffsetByTimestamp("T", 2, 1_000_150), int64(14))
	testutil.Equal(t, s.OffsetByTimestamp("T", 2, 1_000_300), int64(29))
	testutil.Equal(t, s.OffsetByTimestamp("T", 2, 9_999_999), int64(30), "none: max")
	testutil.Equal(t, s.OffsetByTimestamp("Nope", 2, 5), int64(0))
	ts, err := s.StoreTimeAt("T", 2, 14)
	testutil.NoError(t, err)
	testutil.Equal(t, ts, int64(1_000_150))
	_, err = s.StoreTimeAt("T", 2, 30)
	testutil.ErrorIs(t, err, ErrNotFound)

	// The clock steps back: store times stay non-decreasing.
	clock.Advance(-time.Hour)
	res := mustPut(t, s, newMsg("T", 2, "late", nil))
	testutil.Equal(t, res.StoreTimestamp, int64(1_000_300))
}

func TestStoreMessageAt(t *testing.T) {
	o, _ := testOptions(t)
	o.StoreHost = netipMust("[::1]:10911")
	s := openStore(t, o)
	m := newMsg("T", 0, "hello", map[string]string{"TAGS": "x"})
	m.BornHost = netipMust("[2001:db8::1]:5000")
	res := mustPut(t, s, m)
	got, err := s.MessageAt(res.CommitLogOffset)
	testutil.NoError(t, err)
	testutil.Equal(t, string(got.Body), "hello")
	testutil.Equal(t, got.StoreHost, o.StoreHost)
	testutil.Equal(t, got.BornHost, m.BornHost)
	testutil.Equal(t, got.StoreTimestamp, res.StoreTimestamp)
	ts, err := s.StoreTimeAt("T", 0, 0)
	testutil.NoError(t, err)
	testutil.Equal(t, ts, res.StoreTimestamp, "store time with IPv6 born host")
	_, err = s.MessageAt(res.CommitLogOffset + 1)
	testutil.ErrorIs(t, err, ErrNotFound)
	_, err = s.MessageAt(s.CommitLogMaxOffset())
	testutil.ErrorIs(t, err, ErrNotFound)
	_, err = s.MessageAt(-5)
	testutil.ErrorIs(t, err, ErrNotFound)
}

func TestStoreQueryByKey(t *testing.T) {
	o, _ := testOptions(t)
	clock := &fakeClock{now: time.UnixMilli(5_000_000)}
	o.Clock = clock.Now
	s := openStore(t, o)
	for i := 0; i < 60; i++ {
		clock.Advance(time.Second)
		props := map[string]string{"KEYS": fmt.Sprintf("order-%d shared", i%3), "UNIQ_KEY": fmt.Sprintf("U%03d", i)}
		mustPut(t, s, newMsg("Orders", int32(i%2), fmt.Sprint(i), props))
		mustPut(t, s, newMsg("Other", 0, fmt.Sprint(i), map[string]string{"KEYS": "shared"}))
	}
	check := func(s *Store) {
		t.Helper()
		got, err := s.QueryByKey("Orders", "U007", 10, 0, 0)
		testutil.NoError(t, err)
		testutil.Equal(t, len(got), 1)
		testutil.Equal(t, string(got[0].Body), "7")

		got, err = s.QueryByKey("Orders", "order-1", 100, 0, 0)
		testutil.NoError(t, err)
		testutil.Equal(t, len(got), 20)
		for i, m := range got {
			testutil.Equal(t, string(m.Body), fmt.Sprint(1+3*i), "oldest first")
			testutil.Equal(t, m.Topic, "Orders")
		}
		got, err = s.QueryByKey("Orders", "shared", 5, 0, 0)
		testutil.NoError(t, err)
		testutil.Equal(t, len(got), 5)
		testutil.Equal(t, string(got[4].Body), "59", "newest matches win")
		testutil.Equal(t, string(got[0].Body), "55")

		// Time range: stored at 5_000_000 + 1000*(i+1).
		got, err = s.QueryByKey("Orders", "shared", 100, 5_011_000, 5_020_000)
		testutil.NoError(t, err)
		testutil.Equal(t, len(got), 10)
		testutil.Equal(t, string(got[0].Body), "10")

		got, err = s.QueryByKey("Orders", "missing", 10, 0, 0)
		testutil.NoError(t, err)
		testutil.Equal(t, len(got), 0)
	}
	check(s)
	testutil.NoError(t, s.Close())
	check(openStore(t, o)) // the index is persisted
}

func TestStoreConsumerOffsets(t *testing.T) {
	o, _ := testOptions(t)
	s := openStore(t, o)
	s.CommitOffset("g1", "T", 0, 5)
	s.CommitOffset("g1", "T", 1, 7)
	s.CommitOffset("g1", "U", 0, 1)
	s.CommitOffset("g2", "T", 0, 9)
	off, ok := s.QueryOffset("g1", "T", 1)
	testutil.True(t, ok)
	testutil.Equal(t, off, int64(7))
	_, ok = s.QueryOffset("g1", "T", 3)
	testutil.True(t, !ok, "unknown queue")
	g := s.GroupOffsets("g1")
	testutil.Equal(t, len(g), 2)
	testutil.Equal(t, g["T"][0], int64(5))
	g["T"][0] = 100 // a copy
	off, _ = s.QueryOffset("g1", "T", 0)
	testutil.Equal(t, off, int64(5))
	s.DeleteGroupOffsets("g2")
	_, ok = s.QueryOffset("g2", "T", 0)
	testutil.True(t, !ok)
	testutil.NoError(t, s.Close())

	b, err := os.ReadFile(filepath.Join(o.Dir, "config", "consumerOffset.json"))
	testutil.NoError(t, err)
	testutil.True(t, strings.Contains(string(b), `"T@g1"`), string(b))
	s = openStore(t, o)
	off, ok = s.QueryOffset("g1", "U", 0)
	testutil.True(t, ok)
	testutil.Equal(t, off, int64(1))
	_, ok = s.QueryOffset("g2", "T", 0)
	testutil.True(t, !ok)
}

func TestStoreMetadata(t *testing.T) {
	o, _ := testOptions(t)
	s := openStore(t, o)
	type topicConfig struct {
		Name   string `json:"name"`
		Queues int    `json:"queues"`
	}
	var got map[string]topicConfig
	found, err := s.LoadMetadata("topics", &got)
	testutil.NoError(t, err)
	testutil.True(t, !found)
	want := map[string]topicConfig{"T": {Name: "T", Queues: 8}}
	testutil.NoError(t, s.SaveMetadata("topics", want))
	testutil.NoError(t, s.Close())
	s = openStore(t, o)
	found, err = s.LoadMetadata("topics", &got)
	testutil.NoError(t, err)
	testutil.True(t, found)
	testutil.Equal(t, got["T"], want["T"])
	for _, bad := range []string{"", "..", "a/b", ".hidden", "consumerOffset"} {
		if err := s.SaveMetadata(bad, want); err == nil {
			t.Fatalf("SaveMetadata(%q) succeeded", bad)
		}
	}
	testutil.NoError(t, os.WriteFile(filepath.Join(o.Dir, "config", "broken.json"), []byte("{"), 0o644))
	found, err = s.LoadMetadata("broken", &got)
	testutil.True(t, found && err != nil, "broken JSON is an error")
	// No temp files left behind.
	des, _ := os.ReadDir(filepath.Join(o.Dir, "config"))
	for _, de := range des {
		testutil.True(t, !strings.Contains(de.Name(), ".tmp"), de.Name())
	}
}

func TestStoreSecondOpenFails(t *testing.T) {
	o, _ := testOptions(t)
	s := openStore(t, o)
	_, err := Open(o)
	testutil.ErrorIs(t, err, ErrLocked)
	testutil.True(t, strings.Contains(err.Error(), filepath.Join(o.Dir, "lock")), err.Error())
	testutil.NoError(t, s.Close())
	s2, err := Open(o)
	testutil.NoError(t, err, "reopen after Close")
	testutil.NoError(t, s2.Close())
}

func TestStoreLayoutIsFixed(t *testing.T) {
	o, _ := testOptions(t)
	s := openStore(t, o)
	mustPut(t, s, newMsg("T", 0, "x", nil))
	testutil.NoError(t, s.Close())
	o.SegmentSize = 8192
	_, err := Open(o)
	if err == nil || !strings.Contains(err.Error(), "SegmentSize") {
		t.Fatalf("changed SegmentSize: %v", err)
	}
}

func TestStoreDeleteTopic(t *testing.T) {
	o, _ := testOptions(t)
	s := openStore(t, o)
	for i := 0; i < 10; i++ {
		mustPut(t, s, newMsg("Gone", int32(i%2), "x", nil))
		mustPut(t, s, newMsg("Kept", 0, "y", nil))
	}
	s.CommitOffset("g", "Gone", 0, 3)
	s.CommitOffset("g", "Kept", 0, 4)
	testutil.NoError(t, s.DeleteTopic("Gone"))
	testutil.Equal(t, len(s.Queues("Gone")), 0)
	testutil.Equal(t, s.MaxOffset("Gone", 0), int64(0))
	_, ok := s.QueryOffset("g", "Gone", 0)
	testutil.True(t, !ok)
	_, ok = s.QueryOffset("g", "Kept", 0)
	testutil.True(t, ok)
	testutil.True(t, !fileExists(filepath.Join(o.Dir, "consumequeue", "Gone")))
	// Not brought back by recovery, clean or not.
	s.abandon()
	s = openStore(t, o)
	testutil.Equal(t, len(s.Queues("Gone")), 0)
	testutil.Equal(t, s.MaxOffset("Kept", 0), int64(10))
	// Re-created from scratch by a new put.
	res := mustPut(t, s, newMsg("Gone", 0, "again", nil))
	testutil.Equal(t, res.QueueOffset, int64(0))
}

func TestStoreOnArrive(t *testing.T) {
	o, _ := testOptions(t)
	var mu sync.Mutex
	var calls []string
	o.OnArrive = func(topic string, queueID int32, maxOffset int64) {
		mu.Lock()
		calls = append(calls, fmt.Sprintf("%s/%d/%d", topic, queueID, maxOffset))
		mu.Unlock()
	}
	s := openStore(t, o)
	mustPut(t, s, newMsg("T", 3, "a", nil))
	_, err := s.PutMessages(context.Background(), []*protocol.MessageExt{newMsg("T", 3, "b", nil), newMsg("T", 3, "c", nil)})
	testutil.NoError(t, err)
	mu.Lock()
	defer mu.Unlock()
	testutil.Equal(t, strings.Join(calls, " "), "T/3/1 T/3/3")
}

// Readers run against a store being appended to (run with -race).
func TestStoreConcurrentPutAndGet(t *testing.T) {
	o, _ := testOptions(t)
	o.SegmentSize = 16 << 10
	arrived := [2]chan struct{}{make(chan struct{}, 1), make(chan struct{}, 1)}
	o.OnArrive = func(_ string, queueID int32, _ int64) {
		select {
		case arrived[queueID] <- struct{}{}:
		default:
		}
	}
	s := openStore(t, o)
	const writers, perWriter = 4, 150
	var wg sync.WaitGroup
	var done atomic.Bool
	errs := make(chan error, writers+2)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < perWriter; i++ {
				if _, err := s.PutMessage(context.Background(), newMsg("C", int32(w%2), fmt.Sprintf("%d-%d", w, i), nil)); err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	var rg sync.WaitGroup
	for r := 0; r < 2; r++ {
		rg.Add(1)
		go func(q int32) {
			defer rg.Done()
			off := int64(0)
			for !done.Load() || off < s.MaxOffset("C", q) {
				res := s.GetMessages("C", q, off, 32, 0, nil)
				switch res.Status {
				case Found:
					for _, raw := range res.Messages {
						m, _, err := protocol.DecodeStoredMessage(raw, false, true)
						if err != nil {
							errs <- err
							return
						}
						if m.QueueOffset != off {
							errs <- fmt.Errorf("queue %d: record at %d has queue offset %d", q, off, m.QueueOffset)
							return
						}
						off++
					}
					if off != res.NextBeginOffset {
						errs <- fmt.Errorf("next %d after reading to %d", res.NextBeginOffset, off)
						return
					}
				case OffsetOverflowOne, NoMessageInQueue:
					select { // caught up: wait for the next message
					case <-arrived[q]:
					case <-time.After(10 * time.Millisecond):
					}
				default:
					errs <- fmt.Errorf("unexpected status %v at %d", res.Status, off)
					return
				}
			}
		}(int32(r))
	}
	wg.Wait()
	done.Store(true)
	rg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	testutil.Equal(t, s.MaxOffset("C", 0)+s.MaxOffset("C", 1), int64(writers*perWriter))
}

func TestStoreErrorsAreSentinels(t *testing.T) {
	for _, err := range []error{ErrDiskFull, ErrMessageTooLarge, ErrClosed, ErrIllegalMessage} {
		wrapped := fmt.Errorf("ctx: %w", err)
		testutil.True(t, errors.Is(wrapped, err))
	}
}

// Records read together share one buffer, but each slice ends at its record,
// so keeping or appending to one never touches another.
func TestStoreGetMessagesSlicesAreIndependent(t *testing.T) {
	o, _ := testOptions(t)
	s := openStore(t, o)
	for i := 0; i < 6; i++ {
		mustPut(t, s, newMsg("T", 0, fmt.Sprintf("m%d", i), nil))
	}
	res := s.GetMessages("T", 0, 0, 6, 0, nil)
	testutil.Equal(t, len(res.Messages), 6)
	second := append([]byte(nil), res.Messages[1]...)
	res.Messages[0] = append(res.Messages[0], "clobber"...)
	testutil.Equal(t, string(res.Messages[1]), string(second))
	for i, raw := range res.Messages[1:] {
		m, _, err := protocol.DecodeStoredMessage(raw, false, true)
		testutil.NoError(t, err)
		testutil.Equal(t, string(m.Body), fmt.Sprintf("m%d", i+1))
	}
}

// A pull reading into a buffer it reuses allocates per call, never per
// record: the same count for 8 records as for 64 (deterministic counts, not
// times).
func TestStoreGetMessagesIntoAllocationBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts")
	}
	o, _ := testOptions(t)
	o.SegmentSize = 1 << 20
	o.ConsumeQueueEntries = 1024
	s := openStore(t, o)
	for i := 0; i < 128; i++ {
		mustPut(t, s, newMsg("T", int32(i%2), strings.Repeat("b", 1024), map[string]string{"TAGS": "TagA"}))
	}
	counts := map[int]float64{}
	for _, n := range []int{8, 64} {
		buf := make([]byte, 0, 1<<20)
		counts[n] = testing.AllocsPerRun(20, func() {
			res := s.GetMessagesInto(buf, "T", 0, 0, n, 0, nil)
			if res.Status != Found || len(res.Messages) != n {
				t.Fatalf("read %d of %d records (%v)", len(res.Messages), n, res.Status)
			}
			if &res.Body()[0] != &buf[:1][0] {
				t.Fatal("the body is not the caller's buffer")
			}
		})
	}
	t.Logf("GetMessagesInto: %.0f allocations for 8 records, %.0f for 64", counts[8], counts[64])
	testutil.Equal(t, counts[64], counts[8], "allocations for 64 records and for 8")
}
