package store

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/testutil"
)

// TestStorePutEach stores groups of messages for several queues (crossing
// segments, with refused messages among them) and checks each result, the
// queues' contents and order, the key index, and that a reopened store
// recovers the same.
func TestStorePutEach(t *testing.T) {
	o, _ := testOptions(t)
	o.MaxMessageSize = 1000
	s := openStore(t, o)
	want := map[string][]string{}
	seq := 0
	for round := 0; round < 20; round++ {
		var ms []*protocol.MessageExt
		for i := 0; i < 7; i++ {
			q := int32(seq % 3)
			body := fmt.Sprintf("m%d/%s", seq, strings.Repeat("x", seq%150))
			ms = append(ms, newMsg("T", q, body, map[string]string{"TAGS": "t", "KEYS": fmt.Sprintf("k%d", seq)}))
			seq++
		}
		ms[3] = newMsg("T", 0, strings.Repeat("y", 1001), nil) // too large
		ms[5] = newMsg("bad/topic", 0, "z", nil)
		res := make([]PutResult, len(ms))
		errs := make([]error, len(ms))
		s.PutEach(context.Background(), ms, res, errs)
		testutil.ErrorIs(t, errs[3], ErrMessageTooLarge)
		testutil.ErrorIs(t, errs[5], ErrIllegalMessage)
		for i, m := range ms {
			if i == 3 || i == 5 {
				continue
			}
			testutil.NoError(t, errs[i], "message", i)
			key := fmt.Sprintf("T/%d", m.QueueID)
			testutil.Equal(t, res[i].QueueOffset, int64(len(want[key])), "queue offset of", i)
			testutil.Equal(t, res[i].Count, 1)
			testutil.Equal(t, m.CommitLogOffset, res[i].CommitLogOffset)
			testutil.Equal(t, res[i].End, res[i].CommitLogOffset+int64(m.StoreSize))
			testutil.Equal(t, res[i].MsgID, protocol.OffsetMessageID(o.StoreHost, res[i].CommitLogOffset))
			want[key] = append(want[key], string(m.Body))
		}
	}
	testutil.True(t, len(segmentFiles(t, o.Dir)) > 3, "several segments")
	check := func(s *Store) {
		t.Helper()
		for q := int32(0); q < 3; q++ {
			key := fmt.Sprintf("T/%d", q)
			got := readAll(t, s, "T", q)
			testutil.Equal(t, len(got), len(want[key]), key)
			for i, m := range got {
				testutil.Equal(t, string(m.Body), want[key][i], key)
				testutil.Equal(t, m.QueueOffset, int64(i))
			}
		}
		found, err := s.QueryByKey("T", "k7", 10, 0, 1<<62)
		testutil.NoError(t, err)
		testutil.Equal(t, len(found), 1, "key index")
	}
	check(s)
	testutil.NoError(t, s.Close())
	check(openStore(t, o))
}

// TestStorePutEachClosed: a closed store refuses every message.
func TestStorePutEachClosed(t *testing.T) {
	o, _ := testOptions(t)
	s := openStore(t, o)
	testutil.NoError(t, s.Close())
	ms := []*protocol.MessageExt{newMsg("T", 0, "a", nil), newMsg("T", 1, "b", nil)}
	res := make([]PutResult, 2)
	errs := make([]error, 2)
	s.PutEach(context.Background(), ms, res, errs)
	testutil.ErrorIs(t, errs[0], ErrClosed)
	testutil.ErrorIs(t, errs[1], ErrClosed)
}
