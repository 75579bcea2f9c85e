package broker

import (
	"fmt"
	"testing"

	"github.com/zonemq/zonemq/internal/store"
	"github.com/zonemq/zonemq/internal/testutil"
)

// Topic changes go to the journal and are compacted into topics.json once
// the journal is as long as the table; a reload replays both to the same
// table, deletions included.
func TestTopicTableJournalCompactsAndReplays(t *testing.T) {
	opts := testBrokerOptions(t, "127.0.1.1", "idc1", "broker-j")
	open := func() (*store.Store, *topicTable) {
		so := store.NewOptions()
		so.Dir = opts.DataDir
		so.SegmentSize = 1 << 20
		st, err := store.Open(so)
		testutil.NoError(t, err)
		tt, err := loadTopicTable(st, testLogger(), opts)
		testutil.NoError(t, err)
		return st, tt
	}
	st, tt := open()
	const n = topicJournalMinCompact + 100
	for i := range n {
		_, created, err := tt.createIfAbsent(newTopicConfig(fmt.Sprintf("J%d", i), 2, 6))
		testutil.NoError(t, err)
		testutil.True(t, created, "created")
	}
	testutil.True(t, tt.journaled < n, fmt.Sprint("the journal was compacted: ", tt.journaled, " records"))
	_, err := tt.remove("J7")
	testutil.NoError(t, err)
	want := tt.snapshot()
	testutil.NoError(t, st.Close())

	st, tt = open()
	defer st.Close()
	got := tt.snapshot()
	testutil.Equal(t, len(got.TopicConfigTable), len(want.TopicConfigTable))
	_, ok := tt.get("J7")
	testutil.True(t, !ok, "the deletion was replayed")
	cfg, ok := tt.get(fmt.Sprintf("J%d", n-1))
	testutil.True(t, ok && cfg.ReadQueueNums == 2, "the last creation was replayed")
	testutil.Equal(t, got.DataVersion.Counter, want.DataVersion.Counter)
}
