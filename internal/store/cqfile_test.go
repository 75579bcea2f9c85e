package store

import (
	"fmt"
	"testing"

	"github.com/zonemq/zonemq/internal/testutil"
)

// With a budget far below the number of queue files, reads and writes of
// every queue still work, the open descriptors stay within the budget, and
// a restart reopens nothing up front.
func TestConsumeQueueHandleBudget(t *testing.T) {
	o, _ := testOptions(t)
	o.MaxOpenQueueFiles = 16
	s := openStore(t, o)
	const topics = 100 // above syncfsMinQueues: checkpoints use syncfs
	for round := range 3 {
		for i := range topics {
			mustPut(t, s, newMsg(fmt.Sprintf("T%d", i), 0, fmt.Sprintf("r%d", round), nil))
		}
		flushDerived(t, s) // writes every queue's tail to its file
		testutil.True(t, s.OpenQueueFiles() <= o.MaxOpenQueueFiles, fmt.Sprint("open after writes: ", s.OpenQueueFiles()))
	}
	for i := range topics {
		got := readAll(t, s, fmt.Sprintf("T%d", i), 0)
		testutil.Equal(t, len(got), 3)
	}
	testutil.True(t, s.OpenQueueFiles() <= o.MaxOpenQueueFiles, fmt.Sprint("open after reads: ", s.OpenQueueFiles()))
	testutil.True(t, s.handles.closes.Load() > 0, "descriptors were evicted")
	testutil.NoError(t, s.Close())

	s = openStore(t, o)
	testutil.True(t, s.OpenQueueFiles() <= o.MaxOpenQueueFiles, fmt.Sprint("open after restart: ", s.OpenQueueFiles()))
	for i := range topics {
		testutil.Equal(t, s.MaxOffset(fmt.Sprintf("T%d", i), 0), int64(3))
		testutil.Equal(t, len(readAll(t, s, fmt.Sprintf("T%d", i), 0)), 3)
	}
}
