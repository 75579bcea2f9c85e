package store

import (
	"fmt"
	"strings"
	"testing"

	"github.com/zonemq/zonemq/internal/testutil"
)

// A byte flipped in a stored body is never served: GetMessages returns the
// records before it, then MESSAGE_CORRUPT at its offset; MessageAt and
// QueryByKey refuse it; each read is logged and counted.
func TestStoreBitFlipNotServed(t *testing.T) {
	o, lb := testOptions(t)
	s := openStore(t, o)
	var results []PutResult
	for i := 0; i < 10; i++ {
		results = append(results, mustPut(t, s, newMsg("T", 0, fmt.Sprintf("body-%d", i), map[string]string{"KEYS": keyOf(i)})))
	}
	bad := results[4]
	files := segmentFiles(t, o.Dir)
	segStart := bad.CommitLogOffset - bad.CommitLogOffset%o.SegmentSize
	flipByte(t, files[segStart/o.SegmentSize], bad.CommitLogOffset-segStart+bodyOffsetV4+1)

	res := s.GetMessages("T", 0, 0, 32, 0, nil)
	testutil.Equal(t, res.Status, Found)
	testutil.Equal(t, len(res.Messages), 4, "the records before the damaged one")
	testutil.Equal(t, res.NextBeginOffset, int64(4), "the consumer comes back to the damaged record")

	res = s.GetMessages("T", 0, 4, 32, 0, nil)
	testutil.Equal(t, res.Status, MessageCorrupt)
	testutil.Equal(t, len(res.Messages), 0)
	testutil.Equal(t, res.NextBeginOffset, int64(4))
	testutil.Equal(t, res.CorruptOffset, bad.CommitLogOffset)

	res = s.GetMessages("T", 0, 5, 32, 0, nil)
	testutil.Equal(t, res.Status, Found)
	testutil.Equal(t, len(res.Messages), 5, "the records after it are served")

	_, err := s.MessageAt(bad.CommitLogOffset)
	testutil.ErrorIs(t, err, ErrCorruptRecord)
	_, err = s.QueryByKey("T", keyOf(4), 5, 0, 0)
	testutil.ErrorIs(t, err, ErrCorruptRecord)
	found, err := s.QueryByKey("T", keyOf(3), 5, 0, 0)
	testutil.NoError(t, err)
	testutil.Equal(t, len(found), 1)

	testutil.Equal(t, s.CorruptRecords(), int64(4))
	testutil.True(t, strings.Contains(lb.String(), "corrupt record not served"), lb.String())
	testutil.True(t, strings.Contains(lb.String(), fmt.Sprintf("commitLogOffset=%d", bad.CommitLogOffset)), "the log names the record")
}
