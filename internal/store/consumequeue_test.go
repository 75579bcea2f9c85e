package store

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/zonemq/zonemq/internal/testutil"
)

// Consume-queue files hold a fixed number of 20-byte entries and are named
// by their start byte offset, as RocketMQ names them.
func TestConsumeQueueFilesAndEntries(t *testing.T) {
	o, _ := testOptions(t)
	s := openStore(t, o)
	var phys []int64
	var sizes []int32
	for i := 0; i < 20; i++ {
		m := newMsg("Q", 5, fmt.Sprint(i), map[string]string{"TAGS": fmt.Sprintf("tag%d", i%2)})
		res := mustPut(t, s, m)
		phys = append(phys, res.CommitLogOffset)
		sizes = append(sizes, m.StoreSize)
	}
	// Entries gather in memory until a checkpoint (or 1024 of them).
	dir := filepath.Join(o.Dir, "consumequeue", "Q", "5")
	_, err := os.ReadDir(dir)
	testutil.True(t, os.IsNotExist(err), "no file before the tail is written")
	res := s.GetMessages("Q", 5, 0, 32, 0, nil)
	testutil.Equal(t, len(res.Messages), 20, "read from the tail")
	checkpointNow(t, s)
	des, err := os.ReadDir(dir)
	testutil.NoError(t, err)
	testutil.Equal(t, len(des), 3)
	for i, de := range des {
		testutil.Equal(t, de.Name(), fmt.Sprintf("%020d", int64(i)*8*cqEntrySize))
	}
	q := s.queue("Q", 5)
	for i := range phys {
		e, err := q.entryAt(int64(i))
		testutil.NoError(t, err)
		testutil.Equal(t, e.phys, phys[i])
		testutil.Equal(t, e.size, sizes[i])
		testutil.Equal(t, e.tags, tagsCodeOf(fmt.Sprintf("tag%d", i%2)))
	}
	st, err := os.Stat(filepath.Join(dir, des[2].Name()))
	testutil.NoError(t, err)
	testutil.Equal(t, st.Size(), int64(4*cqEntrySize), "the last file holds entries 16..19")
	// A read spans file boundaries.
	res = s.GetMessages("Q", 5, 6, 5, 0, nil)
	testutil.Equal(t, len(res.Messages), 5)
	testutil.Equal(t, res.NextBeginOffset, int64(11))
}

// A partial entry or trailing zeros at the end of the last file are trimmed
// on load.
func TestConsumeQueueLoadTrimsTail(t *testing.T) {
	o, _ := testOptions(t)
	s := openStore(t, o)
	for i := 0; i < 11; i++ {
		mustPut(t, s, newMsg("Q", 0, fmt.Sprint(i), nil))
	}
	testutil.NoError(t, s.Close())
	last := filepath.Join(o.Dir, "consumequeue", "Q", "0", fmt.Sprintf("%020d", 8*cqEntrySize))
	f, err := os.OpenFile(last, os.O_WRONLY|os.O_APPEND, 0)
	testutil.NoError(t, err)
	f.Write(make([]byte, 2*cqEntrySize+7))
	f.Close()
	s = openStore(t, o)
	testutil.Equal(t, s.MaxOffset("Q", 0), int64(11))
	testutil.Equal(t, len(readAll(t, s, "Q", 0)), 11)
	res := mustPut(t, s, newMsg("Q", 0, "next", nil))
	testutil.Equal(t, res.QueueOffset, int64(11))
}

// A queue's max offset survives a restart even when its last file is empty.
func TestConsumeQueueTruncateKeepsFile(t *testing.T) {
	o, _ := testOptions(t)
	s := openStore(t, o)
	for i := 0; i < 16; i++ {
		mustPut(t, s, newMsg("Q", 0, fmt.Sprint(i), nil))
	}
	q := s.queue("Q", 0)
	flushDerived(t, s)
	s.putMu.Lock()
	testutil.NoError(t, q.truncateTo(8))
	s.putMu.Unlock()
	testutil.Equal(t, s.MaxOffset("Q", 0), int64(8))
	st, err := os.Stat(filepath.Join(q.dir, fmt.Sprintf("%020d", 8*cqEntrySize)))
	testutil.NoError(t, err, "the emptied file stays")
	testutil.Equal(t, st.Size(), int64(0))
}

func tagsCodeOf(tag string) int64 {
	var h int32
	for _, r := range tag {
		h = 31*h + int32(r)
	}
	return int64(h)
}
