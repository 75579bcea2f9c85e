package store

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/testutil"
)

// logBuffer collects a store's log lines for assertions; a failed test
// prints them.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func newLogBuffer(t testing.TB) (*logBuffer, *slog.Logger) {
	lb := &logBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("store log:\n%s", lb.String())
		}
	})
	return lb, slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// testOptions: tiny segments and consume-queue files so tests cross file
// boundaries; checkpoints only at Open/Close unless a test asks.
func testOptions(t testing.TB) (Options, *logBuffer) {
	lb, logger := newLogBuffer(t)
	o := NewOptions()
	o.Dir = t.TempDir()
	o.SegmentSize = 4096
	o.ConsumeQueueEntries = 8
	o.StoreHost = netip.MustParseAddrPort("127.0.0.1:10911")
	o.Logger = logger
	o.checkpointInterval = time.Hour
	o.CleanInterval = time.Hour
	return o, lb
}

func openStore(t testing.TB, o Options) *Store {
	t.Helper()
	s, err := Open(o)
	testutil.NoError(t, err, "Open")
	t.Cleanup(func() { s.Close() })
	return s
}

func newMsg(topic string, queueID int32, body string, props map[string]string) *protocol.MessageExt {
	return &protocol.MessageExt{
		Topic:         topic,
		QueueID:       queueID,
		Body:          []byte(body),
		BornTimestamp: 1_700_000_000_000,
		BornHost:      netip.MustParseAddrPort("127.0.0.2:40000"),
		Properties:    protocol.EncodeProperties(props),
	}
}

func mustPut(t testing.TB, s *Store, m *protocol.MessageExt) PutResult {
	t.Helper()
	res, err := s.PutMessage(context.Background(), m)
	testutil.NoError(t, err, "PutMessage")
	return res
}

// readAll pulls topic/queueID from its min to its max and decodes every record.
func readAll(t testing.TB, s *Store, topic string, queueID int32) []*protocol.MessageExt {
	t.Helper()
	var out []*protocol.MessageExt
	off := s.MinOffset(topic, queueID)
	for off < s.MaxOffset(topic, queueID) {
		res := s.GetMessages(topic, queueID, off, 64, 0, nil)
		if res.Status != Found {
			t.Fatalf("GetMessages %s/%d at %d: %v (min %d max %d)", topic, queueID, off, res.Status, res.MinOffset, res.MaxOffset)
		}
		for _, raw := range res.Messages {
			m, n, err := protocol.DecodeStoredMessage(raw, true, true)
			testutil.NoError(t, err, "decode pulled record")
			testutil.Equal(t, n, len(raw), "record length")
			out = append(out, m)
		}
		off = res.NextBeginOffset
	}
	return out
}

// segmentFiles lists the commit-log files of dir.
func segmentFiles(t testing.TB, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(filepath.Join(dir, "commitlog"))
	testutil.NoError(t, err)
	var names []string
	for _, de := range des {
		names = append(names, filepath.Join(dir, "commitlog", de.Name()))
	}
	sort.Strings(names)
	return names
}

// lastRecordStart walks the last segment's records and returns the position
// and size of its last record.
func lastRecordStart(t testing.TB, path string) (pos, size int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	testutil.NoError(t, err)
	pos, size = -1, 0
	for p := 0; p+8 <= len(b); {
		m, n, err := protocol.DecodeStoredMessage(b[p:], false, false)
		if err != nil || m == nil {
			break
		}
		pos, size = int64(p), int64(n)
		p += n
	}
	if pos < 0 {
		t.Fatalf("no record in %s", path)
	}
	return pos, size
}

func keyOf(i int) string { return fmt.Sprintf("K-%d", i) }

func containsLog(lb *logBuffer, s string) bool { return strings.Contains(lb.String(), s) }

// fakeClock is a settable clock for store timestamps and retention.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func netipMust(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

// flushDerived writes every consume-queue tail and key-index buffer to its
// file, as a crash after a batch write but before a checkpoint would leave them.
func flushDerived(t testing.TB, s *Store) {
	t.Helper()
	for _, q := range s.allQueues() {
		testutil.NoError(t, q.flushTail(), "flush consume-queue tail")
	}
	for _, g := range s.cl.snapshot() {
		testutil.NoError(t, g.index.flush(), "flush key index")
	}
}

// checkpointNow runs a checkpoint as the maintenance loop would.
func checkpointNow(t testing.TB, s *Store) {
	t.Helper()
	s.maintMu.Lock()
	defer s.maintMu.Unlock()
	testutil.NoError(t, s.checkpointLocked(true), "checkpoint")
}
