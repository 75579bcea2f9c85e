package store

import (
	"fmt"
	"strings"
	"testing"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/testutil"
)

// queueBodies reads topic/queueID from offset 0 and returns the bodies.
func queueBodies(t *testing.T, s *Store, topic string, queueID int32) string {
	t.Helper()
	res := s.GetMessages(topic, queueID, 0, 64, 0, nil)
	testutil.Equal(t, res.Status, Found, "status")
	var bodies []string
	for _, raw := range res.Messages {
		m, _, err := protocol.DecodeStoredMessage(raw, false, true)
		testutil.NoError(t, err)
		bodies = append(bodies, string(m.Body))
	}
	return strings.Join(bodies, ",")
}

// The records of two queues written in turn are read through the read
// cache. Blocks cached before TruncateLog are not served after it: the
// records written since at the same offsets (same sizes, so a stale block
// would even pass verification) are.
func TestStoreReadCacheForgetsTruncatedBytes(t *testing.T) {
	o, _ := testOptions(t)
	o.SegmentSize = 1 << 20
	o.ConsumeQueueEntries = 1024
	s := openStore(t, o)
	var cut int64
	for i := range 20 {
		r := mustPut(t, s, newMsg("T", int32(i%2), fmt.Sprintf("old-%02d", i), nil))
		if i == 10 {
			cut = r.CommitLogOffset
		}
	}
	testutil.Equal(t, queueBodies(t, s, "T", 0), "old-00,old-02,old-04,old-06,old-08,old-10,old-12,old-14,old-16,old-18")
	testutil.Equal(t, queueBodies(t, s, "T", 1), "old-01,old-03,old-05,old-07,old-09,old-11,old-13,old-15,old-17,old-19")

	testutil.NoError(t, s.TruncateLog(cut), "TruncateLog")
	for i := 10; i < 20; i++ {
		mustPut(t, s, newMsg("T", int32(i%2), fmt.Sprintf("new-%02d", i), nil))
	}
	testutil.Equal(t, queueBodies(t, s, "T", 0), "old-00,old-02,old-04,old-06,old-08,new-10,new-12,new-14,new-16,new-18")
	testutil.Equal(t, queueBodies(t, s, "T", 1), "old-01,old-03,old-05,old-07,old-09,new-11,new-13,new-15,new-17,new-19")
}

// Records appended after a block was cached (the block then ended at the
// write position) are read, not cut short at the cached block's end.
func TestStoreReadCacheGrowsWithTheLog(t *testing.T) {
	o, _ := testOptions(t)
	o.SegmentSize = 1 << 20
	o.ConsumeQueueEntries = 1024
	s := openStore(t, o)
	for i := range 4 {
		mustPut(t, s, newMsg("T", int32(i%2), fmt.Sprintf("a-%d", i), nil))
	}
	testutil.Equal(t, queueBodies(t, s, "T", 0), "a-0,a-2")
	for i := 4; i < 8; i++ {
		mustPut(t, s, newMsg("T", int32(i%2), fmt.Sprintf("a-%d", i), nil))
	}
	testutil.Equal(t, queueBodies(t, s, "T", 0), "a-0,a-2,a-4,a-6")
	testutil.Equal(t, queueBodies(t, s, "T", 1), "a-1,a-3,a-5,a-7")
}
