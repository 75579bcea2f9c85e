package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/zonemq/zonemq/internal/testutil"
)

// copyLog replicates master's log into replica, maxBytes per chunk, the way
// the broker's fetch loop does, and returns the replica's end.
func copyLog(t *testing.T, master, replica *Store, maxBytes int) int64 {
	t.Helper()
	from := replica.CommitLogMaxOffset()
	for range 100000 {
		chunk, err := master.ReadLog(from, maxBytes)
		testutil.NoError(t, err, "ReadLog")
		if chunk == nil {
			return from
		}
		from, err = replica.AppendReplicated(context.Background(), from, chunk)
		testutil.NoError(t, err, "AppendReplicated")
	}
	t.Fatal("copyLog did not converge")
	return 0
}

// sameLogs checks the two commit logs are identical byte for byte and every
// queue reads the same records.
func sameLogs(t *testing.T, a, b *Store, topics []string, queues int32) {
	t.Helper()
	testutil.Equal(t, b.CommitLogMaxOffset(), a.CommitLogMaxOffset(), "log end")
	fa, fb := segmentFiles(t, a.dir), segmentFiles(t, b.dir)
	testutil.Equal(t, len(fb), len(fa), "segment count")
	for i := range fa {
		x, err := os.ReadFile(fa[i])
		testutil.NoError(t, err)
		y, err := os.ReadFile(fb[i])
		testutil.NoError(t, err)
		if !bytes.Equal(x, y) {
			t.Fatalf("segment %s differs from %s", fb[i], fa[i])
		}
	}
	for _, topic := range topics {
		for q := range queues {
			ma, mb := readAll(t, a, topic, q), readAll(t, b, topic, q)
			testutil.Equal(t, len(mb), len(ma), "messages in "+topic)
			for i := range ma {
				testutil.Equal(t, mb[i].QueueOffset, ma[i].QueueOffset, "queue offset")
				testutil.Equal(t, mb[i].CommitLogOffset, ma[i].CommitLogOffset, "commit-log offset")
				testutil.Equal(t, string(mb[i].Body), string(ma[i].Body), "body")
			}
		}
	}
}

func TestStoreReplicateByteForByte(t *testing.T) {
	mo, _ := testOptions(t)
	master := openStore(t, mo)
	ro, _ := testOptions(t)
	replica := openStore(t, ro)

	topics := []string{"TopicA", "TopicB"}
	for i := range 300 {
		topic := topics[i%2]
		mustPut(t, master, newMsg(topic, int32(i%3), fmt.Sprintf("body-%03d-%s", i, bytes.Repeat([]byte("x"), i%50)),
			map[string]string{"KEYS": fmt.Sprintf("k%d", i)}))
		if i%37 == 0 {
			copyLog(t, master, replica, 700) // small chunks cross segment ends
		}
	}
	copyLog(t, master, replica, 700)
	if n := len(segmentFiles(t, master.dir)); n < 3 {
		t.Fatalf("the test needs segment rolls; master has %d segments", n)
	}
	sameLogs(t, master, replica, topics, 3)

	// Key lookups work on the replica (its key index is derived).
	found, err := replica.QueryByKey("TopicA", "k100", 4, 0, 1<<62)
	testutil.NoError(t, err, "QueryByKey on the replica")
	testutil.Equal(t, len(found), 1, "messages for key k100")

	// The replica recovers its own files after a restart.
	testutil.NoError(t, replica.Close(), "close replica")
	replica = openStore(t, ro)
	sameLogs(t, master, replica, topics, 3)

	// A chunk that does not continue the log is refused, nothing changes.
	end := replica.CommitLogMaxOffset()
	mustPut(t, master, newMsg("TopicA", 0, "later", nil))
	chunk, err := master.ReadLog(end, 1<<20)
	testutil.NoError(t, err)
	if _, err := replica.AppendReplicated(context.Background(), end-1, chunk); !errors.Is(err, ErrLogMismatch) {
		t.Fatalf("a chunk at the wrong offset: got %v, want ErrLogMismatch", err)
	}
	bad := bytes.Clone(chunk)
	bad[len(bad)-1] ^= 0xff // inside the body: the CRC fails
	if _, err := replica.AppendReplicated(context.Background(), end, bad); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a chunk with a flipped body byte: got %v, want ErrCorrupt", err)
	}
	testutil.Equal(t, replica.CommitLogMaxOffset(), end, "log end after refused chunks")
	copyLog(t, master, replica, 1<<20)
	sameLogs(t, master, replica, topics, 3)
}

func TestStoreReplicaTruncatesDivergentTail(t *testing.T) {
	mo, _ := testOptions(t)
	master := openStore(t, mo)
	ro, _ := testOptions(t)
	replica := openStore(t, ro)
	for i := range 100 {
		mustPut(t, master, newMsg("T", int32(i%2), fmt.Sprintf("common-%d", i), map[string]string{"KEYS": fmt.Sprintf("c%d", i)}))
	}
	common := copyLog(t, master, replica, 1<<20)

	// The replica (an old master) wrote a tail nobody acknowledged,
	// spanning a segment roll.
	for i := range 60 {
		mustPut(t, replica, newMsg("T", int32(i%2), fmt.Sprintf("divergent-%d-%s", i, bytes.Repeat([]byte("d"), 80)),
			map[string]string{"KEYS": fmt.Sprintf("d%d", i)}))
	}
	if replica.CommitLogMaxOffset() <= common {
		t.Fatal("no divergent tail written")
	}
	// Meanwhile the master went on.
	for i := range 40 {
		mustPut(t, master, newMsg("T", int32(i%2), fmt.Sprintf("new-%d", i), nil))
	}

	testutil.NoError(t, replica.TruncateLog(common), "TruncateLog")
	testutil.Equal(t, replica.CommitLogMaxOffset(), common, "log end after truncation")
	found, err := replica.QueryByKey("T", "d5", 4, 0, 1<<62)
	testutil.NoError(t, err)
	testutil.Equal(t, len(found), 0, "truncated keys are gone from the index")
	copyLog(t, master, replica, 1<<20)
	sameLogs(t, master, replica, []string{"T"}, 2)

	// And it survives a restart.
	testutil.NoError(t, replica.Close())
	replica = openStore(t, ro)
	sameLogs(t, master, replica, []string{"T"}, 2)
}

func TestStoreReplicaStartsAtMastersOldestSegment(t *testing.T) {
	mo, _ := testOptions(t)
	master := openStore(t, mo)
	for i := range 200 {
		mustPut(t, master, newMsg("T", 0, fmt.Sprintf("m-%03d-%s", i, bytes.Repeat([]byte("z"), 40)), nil))
	}
	// Pretend retention deleted the first two segments: start the replica
	// at the third segment's start and copy from there.
	segs := master.cl.snapshot()
	if len(segs) < 3 {
		t.Fatalf("need 3 segments, have %d", len(segs))
	}
	start := segs[2].start
	ro, _ := testOptions(t)
	replica := openStore(t, ro)
	testutil.NoError(t, replica.StartLogAt(start), "StartLogAt")
	copyLog(t, master, replica, 512)
	testutil.Equal(t, replica.CommitLogMaxOffset(), master.CommitLogMaxOffset(), "log end")
	// The queue on the replica starts at the first record it holds.
	got := readAll(t, replica, "T", 0)
	want := readAll(t, master, "T", 0)
	testutil.True(t, len(got) > 0 && len(got) < len(want), "the replica holds a suffix of the queue")
	tail := want[len(want)-len(got):]
	for i := range got {
		testutil.Equal(t, got[i].QueueOffset, tail[i].QueueOffset, "queue offset")
		testutil.Equal(t, string(got[i].Body), string(tail[i].Body), "body")
	}
	if err := replica.StartLogAt(0); err == nil {
		t.Fatal("StartLogAt on a non-empty log succeeded")
	}
}

func TestStoreReplicaFollowsARecreatedTopic(t *testing.T) {
	mo, _ := testOptions(t)
	master := openStore(t, mo)
	ro, _ := testOptions(t)
	replica := openStore(t, ro)
	for i := range 20 {
		mustPut(t, master, newMsg("T", 0, fmt.Sprintf("old-%d", i), nil))
	}
	copyLog(t, master, replica, 1<<20)
	testutil.NoError(t, master.DeleteTopic("T"), "DeleteTopic")
	for i := range 5 {
		mustPut(t, master, newMsg("T", 0, fmt.Sprintf("new-%d", i), nil))
	}
	copyLog(t, master, replica, 1<<20)
	got := readAll(t, replica, "T", 0)
	testutil.Equal(t, len(got), 5, "the replica's queue restarted with the master's")
	testutil.Equal(t, string(got[0].Body), "new-0", "first message")
	testutil.Equal(t, got[0].QueueOffset, int64(0), "queue offset")
}
