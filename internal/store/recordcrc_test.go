package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/testutil"
)

// The attack: a byte flipped on disk in a stored topic name, property or
// key (none of which BODYCRC covers) was served — the topic flip to a
// consumer of the wrong topic. Now no read serves such a record: pulls get
// MESSAGE_CORRUPT, MessageAt and QueryByKey ErrCorruptRecord, and
// replication reads stop before it.
func TestStoreFlippedTopicPropertyKeyNotServed(t *testing.T) {
	cases := []struct{ name, topic, needle, key string }{
		{"topic", "FlipTopic", "FlipTopic", "k-topic"},
		{"property", "PropTopic", "crimson", "k-prop"},
		{"key", "KeyTopic", "kiwi-key", "kiwi-key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o, _ := testOptions(t)
			s := openStore(t, o)
			before := mustPut(t, s, newMsg(tc.topic, 0, "first", nil))
			bad := mustPut(t, s, newMsg(tc.topic, 0, "second", map[string]string{"KEYS": tc.key, "color": "crimson"}))
			mustPut(t, s, newMsg(tc.topic, 0, "third", nil))
			testutil.FlipAfter(t, segmentFiles(t, o.Dir)[0], []byte(tc.needle), bad.CommitLogOffset)

			res := s.GetMessages(tc.topic, 0, 0, 32, 0, nil)
			testutil.Equal(t, res.Status, Found)
			testutil.Equal(t, len(res.Messages), 1, "only the record before the damaged one")
			testutil.Equal(t, res.NextBeginOffset, int64(1))
			res = s.GetMessages(tc.topic, 0, 1, 32, 0, nil)
			testutil.Equal(t, res.Status, MessageCorrupt)
			testutil.Equal(t, len(res.Messages), 0)
			testutil.Equal(t, res.CorruptOffset, bad.CommitLogOffset)
			// The topic the flipped byte now spells has no such record.
			testutil.Equal(t, s.GetMessages("FlIpTopic", 0, 0, 32, 0, nil).Status, NoMessageInQueue)

			_, err := s.MessageAt(bad.CommitLogOffset)
			testutil.ErrorIs(t, err, ErrCorruptRecord)
			if tc.name != "key" { // the damaged key no longer matches the query
				_, err = s.QueryByKey(tc.topic, tc.key, 8, 0, 0)
				testutil.ErrorIs(t, err, ErrCorruptRecord)
			}

			chunk, err := s.ReadLog(0, 1<<20)
			testutil.NoError(t, err)
			testutil.Equal(t, int64(len(chunk)), bad.CommitLogOffset-before.CommitLogOffset, "replication stops before it")
			_, err = s.ReadLog(bad.CommitLogOffset, 1<<20)
			testutil.ErrorIs(t, err, ErrCorruptRecord)
		})
	}
}

// After a crash, recovery re-dispatches the tail of the log. A record whose
// topic byte was flipped (to another valid topic name) was dispatched to
// that other topic's queue; now the record fails its CRC32C, Open refuses
// it, and with RecoverDropCorrupt it is dropped, not delivered.
func TestStoreRecoveryFlippedTopicNotDispatched(t *testing.T) {
	o, _ := testOptions(t)
	s := openStore(t, o)
	mustPut(t, s, newMsg("OtherTopic", 0, "before", nil))
	mustPut(t, s, newMsg("FlipTopic", 0, "victim", nil))
	flushDerived(t, s)
	s.abandon()
	testutil.FlipAfter(t, segmentFiles(t, o.Dir)[0], []byte("FlipTopic"), 0)

	_, err := Open(o)
	testutil.ErrorIs(t, err, ErrCorrupt)
	testutil.True(t, strings.Contains(err.Error(), "fails its CRC check"), err.Error())

	o.RecoverDropCorrupt = true
	s = openStore(t, o)
	testutil.Equal(t, s.GetMessages("FlIpTopic", 0, 0, 32, 0, nil).Status, NoMessageInQueue)
	testutil.Equal(t, s.MaxOffset("FlipTopic", 0), int64(0))
	testutil.Equal(t, len(readAll(t, s, "OtherTopic", 0)), 1)
}

// writeOldFormatLog writes records in the format of the stores before the
// whole-record CRC (v1, body CRC only) as the first segment of o.Dir, and
// removes the checkpoint so the next Open dispatches them.
func writeOldFormatLog(t *testing.T, o Options, n int) {
	t.Helper()
	s := openStore(t, o)
	testutil.NoError(t, s.Close())
	var log []byte
	for i := 0; i < n; i++ {
		m := newMsg("T", 0, fmt.Sprintf("old-%d", i), map[string]string{"KEYS": fmt.Sprintf("old-key-%d", i)})
		m.StoreHost = o.StoreHost
		m.QueueOffset, m.CommitLogOffset, m.StoreTimestamp = int64(i), int64(len(log)), 1_700_000_000_000+int64(i)
		log = protocol.AppendStoredMessage(log, m)
	}
	testutil.NoError(t, os.WriteFile(filepath.Join(o.Dir, "commitlog", offsetName(0)), log, 0o644))
	testutil.NoError(t, os.Remove(filepath.Join(o.Dir, "checkpoint")))
}

// A log written before the whole-record CRC stays readable, and old and new
// records live in one log: pulls (handed out as v1), MessageAt, QueryByKey,
// recovery and replication read both; a flipped body byte in an old record
// is still caught by its body CRC.
func TestStoreReadsOldFormatRecords(t *testing.T) {
	o, _ := testOptions(t)
	writeOldFormatLog(t, o, 5)
	s := openStore(t, o)
	testutil.Equal(t, s.MaxOffset("T", 0), int64(5), "old records dispatched")
	for i := 0; i < 5; i++ {
		mustPut(t, s, newMsg("T", 0, fmt.Sprintf("new-%d", i), map[string]string{"KEYS": fmt.Sprintf("new-key-%d", i)}))
	}
	check := func(s *Store) {
		t.Helper()
		res := s.GetMessages("T", 0, 0, 32, 0, nil)
		testutil.Equal(t, res.Status, Found)
		testutil.Equal(t, len(res.Messages), 10)
		body := res.Body()
		pos := 0
		for i, rec := range res.Messages {
			testutil.Equal(t, binary.BigEndian.Uint32(rec[4:]), protocol.MessageMagicV1, "handed out as v1")
			testutil.Equal(t, int(binary.BigEndian.Uint32(rec)), len(rec))
			testutil.True(t, bytes.Equal(body[pos:pos+len(rec)], rec), "the body is the records back to back")
			pos += len(rec)
			m, _, err := protocol.DecodeStoredMessage(rec, false, true)
			testutil.NoError(t, err)
			want := fmt.Sprintf("old-%d", i)
			if i >= 5 {
				want = fmt.Sprintf("new-%d", i-5)
			}
			testutil.Equal(t, string(m.Body), want)
			got, err := s.MessageAt(m.CommitLogOffset)
			testutil.NoError(t, err)
			testutil.Equal(t, string(got.Body), want)
		}
		testutil.Equal(t, pos, len(body))
		for _, key := range []string{"old-key-2", "new-key-3"} {
			found, err := s.QueryByKey("T", key, 4, 0, 0)
			testutil.NoError(t, err)
			testutil.Equal(t, len(found), 1, key)
		}
	}
	check(s)

	// Replication copies the mixed log byte for byte and verifies it.
	ro, _ := testOptions(t)
	r := openStore(t, ro)
	for from := int64(0); from < s.CommitLogMaxOffset(); {
		chunk, err := s.ReadLog(from, 300)
		testutil.NoError(t, err)
		from, err = r.AppendReplicated(context.Background(), from, chunk)
		testutil.NoError(t, err)
	}
	check(r)

	// Recovery verifies and re-dispatches the whole mixed log.
	testutil.NoError(t, s.Close())
	testutil.NoError(t, os.Remove(filepath.Join(o.Dir, "checkpoint")))
	s = openStore(t, o)
	check(s)

	// The old check still guards old records.
	old, err := s.MessageAt(0)
	testutil.NoError(t, err)
	flipByte(t, segmentFiles(t, o.Dir)[0], bodyOffsetV4+1)
	_, err = s.MessageAt(old.CommitLogOffset)
	testutil.True(t, errors.Is(err, ErrCorruptRecord), err)
	testutil.Equal(t, s.GetMessages("T", 0, 0, 32, 0, nil).Status, MessageCorrupt)
}
