package broker

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/store"
	"github.com/zonemq/zonemq/internal/testutil"
)

// heldFsync replaces the commit log's fdatasync in a test: while held, every
// fsync waits until released; synced counts the fsyncs that returned.
type heldFsync struct {
	held     atomic.Bool
	entered  chan struct{} // an fsync is waiting (cap 1)
	release  chan struct{}
	released sync.Once
	synced   atomic.Int64
	fail     atomic.Bool // fsyncs fail instead
}

func newHeldFsync(t *testing.T) *heldFsync {
	h := &heldFsync{entered: make(chan struct{}, 1), release: make(chan struct{})}
	t.Cleanup(h.let) // never leave the flusher stuck
	return h
}

func (h *heldFsync) sync(f *os.File) error {
	if h.fail.Load() {
		return errors.New("test: the disk is gone")
	}
	if h.held.Load() {
		select {
		case h.entered <- struct{}{}:
		default:
		}
		<-h.release
	}
	err := f.Sync()
	h.synced.Add(1)
	return err
}

func (h *heldFsync) let() { h.released.Do(func() { close(h.release) }) }

// heldFsyncBroker starts a --flush sync broker whose fsyncs go through fs,
// with topic (of queues queues) created and one message sent and answered
// while the disk still works.
func heldFsyncBroker(t *testing.T, fs *heldFsync, topic string, queues int) (*Server, *remoting.Client) {
	opts := testBrokerOptions(t, "127.0.1.1", "idc1", "broker-a")
	opts.Flush = store.FlushSync
	opts.commitLogSync = fs.sync
	s := startBroker(t, opts)
	c := newRawClient(t)
	createTopic(t, c, s.Addr(), topic, queues)
	expectCode(t, sendRaw(t, c, s.Addr(), topic, 0, nil, []byte("before")), protocol.Success, "send while the disk works")
	return s, c
}

// dialRaw opens a plain TCP connection to s, closed when the test ends.
func dialRaw(t *testing.T, s *Server) net.Conn {
	nc, err := net.Dial("tcp", s.Addr())
	testutil.NoError(t, err)
	t.Cleanup(func() { nc.Close() })
	return nc
}

// TestBrokerSyncFlushAnswersSendsOnlyAfterTheirFsync: with --flush sync, a
// send is answered SEND_OK only once an fsync that started after it was
// written has returned. The sends are written on a raw connection followed
// by a request that is not a send: everything the broker answers before
// that request's answer was decided before it read it, so while the fsync
// is held no send answer may come first.
func TestBrokerSyncFlushAnswersSendsOnlyAfterTheirFsync(t *testing.T) {
	fs := newHeldFsync(t)
	s, _ := heldFsyncBroker(t, fs, "SyncAck", 2)

	fs.held.Store(true)
	nc := dialRaw(t, s)
	const n = 40
	var frames []byte
	for i := range n {
		h := protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: "SyncAck", QueueID: int32(i % 2), BornTimestamp: time.Now().UnixMilli()}
		req := remoting.NewRequest(int32(protocol.SendMessage), h.Ext(), []byte(fmt.Sprintf("m-%d", i)))
		req.Opaque = int32(i + 1)
		frames = remoting.AppendFrame(frames, req)
	}
	probe := remoting.NewRequest(int32(protocol.GetMaxOffset), (&protocol.QueueRequestHeader{Topic: "SyncAck", QueueID: 0}).Ext(), nil)
	probe.Opaque = n + 1
	frames = remoting.AppendFrame(frames, probe)
	_, err := nc.Write(frames)
	testutil.NoError(t, err)

	r := bufio.NewReader(nc)
	nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		resp, err := remoting.ReadFrame(r, remoting.DefaultMaxFrameSize)
		testutil.NoError(t, err, "reading the probe's answer")
		if resp.Opaque == probe.Opaque {
			break
		}
		t.Fatalf("send %d answered %s while its fsync was held", resp.Opaque, protocol.ResponseCode(resp.Code))
	}
	select {
	case <-fs.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("no fsync was started for the sends")
	}
	testutil.True(t, s.store.FlushedOffset() < s.store.CommitLogMaxOffset(), "the sends are stored, not yet durable")
	synced := fs.synced.Load()

	fs.let()
	for range n {
		resp, err := remoting.ReadFrame(r, remoting.DefaultMaxFrameSize)
		testutil.NoError(t, err, "reading a send's answer")
		expectCode(t, resp, protocol.Success, fmt.Sprintf("send %d", resp.Opaque))
		testutil.True(t, fs.synced.Load() > synced, "answered after an fsync returned")
		var rh protocol.SendMessageResponseHeader
		testutil.NoError(t, rh.SetExt(resp.ExtFields))
		_, off, err := protocol.ParseOffsetMessageID(rh.MsgID)
		testutil.NoError(t, err)
		testutil.True(t, s.store.FlushedOffset() > off, fmt.Sprintf("send %d at %d answered with the durable prefix ending at %d", resp.Opaque, off, s.store.FlushedOffset()))
	}
}

// TestBrokerSyncFlushFailedFsyncIsNotAcknowledged: a send whose fsync fails
// is answered FLUSH_DISK_TIMEOUT (stored, not known durable), never
// SEND_OK; the sends after it are refused.
func TestBrokerSyncFlushFailedFsyncIsNotAcknowledged(t *testing.T) {
	fs := newHeldFsync(t)
	s, c := heldFsyncBroker(t, fs, "SyncFail", 1)
	fs.fail.Store(true)
	expectCode(t, sendRaw(t, c, s.Addr(), "SyncFail", 0, nil, []byte("lost")), protocol.FlushDiskTimeout, "send whose fsync failed")
	resp := sendRaw(t, c, s.Addr(), "SyncFail", 0, nil, []byte("after"))
	testutil.True(t, resp.Code != int32(protocol.Success), "a send after the failed fsync is refused: "+resp.Remark)
}

// TestBrokerSyncFlushSendsThatWaitElsewhere: with --flush sync the sends
// that are not deferred to syncAcks (a batch, a delayed message) are still
// served, on goroutines of their own, and answered.
func TestBrokerSyncFlushSendsThatWaitElsewhere(t *testing.T) {
	opts := testBrokerOptions(t, "127.0.1.1", "idc1", "broker-a")
	opts.Flush = store.FlushSync
	s := startBroker(t, opts)
	c := newRawClient(t)
	createTopic(t, c, s.Addr(), "SyncOther", 1)

	var body []byte
	for i := range 3 {
		body = append(body, encodeBatchItem(0, []byte(fmt.Sprintf("b-%d", i)), "")...)
	}
	bh := protocol.SendMessageRequestHeaderV2{SendMessageRequestHeader: protocol.SendMessageRequestHeader{
		ProducerGroup: "raw_pg", Topic: "SyncOther", QueueID: 0, BornTimestamp: time.Now().UnixMilli(), Batch: true,
	}}
	expectCode(t, invoke(t, c, s.Addr(), protocol.SendBatchMessage, bh.Ext(), body), protocol.Success, "batch send")
	delayed := map[string]string{protocol.PropertyDelayLevel: "1"}
	expectCode(t, sendRaw(t, c, s.Addr(), "SyncOther", 0, delayed, []byte("later")), protocol.Success, "delayed send")
	expectCode(t, sendRaw(t, c, s.Addr(), "SyncOther", 0, nil, []byte("plain")), protocol.Success, "plain send")
	testutil.True(t, s.store.FlushedOffset() >= s.store.CommitLogMaxOffset(), "every answered send is durable")
}

// syncSendAllocBudget: a SEND_MESSAGE kept by the inline send batch with
// --flush sync, stored with 31 others and answered after their fsync by
// syncAcks, the fsync and the answer included: 10.5 (10.4 with flush async).
const syncSendAllocBudget = 11

// TestBrokerSyncSendAllocationBudget: waiting for the fsync costs a sync
// send no allocation of its own beyond the group's (no goroutine, timer or
// channel per send).
func TestBrokerSyncSendAllocationBudget(t *testing.T) {
	if testing.Short() || raceDetector {
		t.Skip("allocation counts (the race detector allocates on its own)")
	}
	opts := testBrokerOptions(t, "127.0.1.1", "idc1", "broker-a")
	opts.Flush = store.FlushSync
	s := startBroker(t, opts)
	c := newRawClient(t)
	createTopic(t, c, s.Addr(), benchTopic, benchQueues)
	sc := serverConn(t, s, c)
	body := make([]byte, benchBodySize)
	k := s.keptSends(sc)
	answered := func() {
		// Every send's token is back once syncAcks has answered it.
		for deadline := time.Now().Add(30 * time.Second); len(k.tokens) > 0; runtime.Gosched() {
			if time.Now().After(deadline) {
				t.Fatalf("%d sends still unanswered", len(k.tokens))
			}
		}
	}
	allocs := keptSendAllocs(t, s, sc, func(run int) []*remoting.Command { return oneWaySends(int64(run)*32, 32, body) }, answered)
	t.Logf("sync sends: %.1f allocations per message", allocs)
	testutil.True(t, allocs <= syncSendAllocBudget, fmt.Sprintf("%.1f allocations per sync send, budget %d", allocs, syncSendAllocBudget))
	testutil.True(t, s.store.FlushedOffset() >= s.store.CommitLogMaxOffset(), "the sends were flushed")
}

// pendingSends is how many answered-to-be sends syncAcks holds.
func (a *syncAcks) pendingSends() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, g := range a.pending {
		n += len(g.reqs)
	}
	return n
}

// TestBrokerSyncFlushBoundsPendingSends: while the fsync is held, a
// connection that keeps sending has at most maxPendingSends sends waiting
// in the broker (its reads stop there), and once the fsync returns every
// send is answered.
func TestBrokerSyncFlushBoundsPendingSends(t *testing.T) {
	fs := newHeldFsync(t)
	s, _ := heldFsyncBroker(t, fs, "SyncBound", 1)

	fs.held.Store(true)
	nc := dialRaw(t, s)
	const n = maxPendingSends + 100
	var frames []byte
	for i := range n {
		h := protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: "SyncBound", QueueID: 0, BornTimestamp: time.Now().UnixMilli()}
		req := remoting.NewRequest(int32(protocol.SendMessage), h.Ext(), []byte("x"))
		req.Opaque = int32(i + 1)
		frames = remoting.AppendFrame(frames, req)
	}
	written := make(chan error, 1)
	go func() { _, err := nc.Write(frames); written <- err }()

	testutil.Eventually(t, 30*time.Second, func() error {
		if got := s.syncAcks.pendingSends(); got != maxPendingSends {
			return fmt.Errorf("%d sends waiting for the fsync, want %d", got, maxPendingSends)
		}
		return nil
	})
	fs.let()
	testutil.NoError(t, <-written)
	r := bufio.NewReader(nc)
	nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	seen := make(map[int32]bool, n)
	for range n {
		resp, err := remoting.ReadFrame(r, remoting.DefaultMaxFrameSize)
		testutil.NoError(t, err, "reading a send's answer")
		expectCode(t, resp, protocol.Success, fmt.Sprintf("send %d", resp.Opaque))
		seen[resp.Opaque] = true
	}
	testutil.Equal(t, len(seen), n, "sends answered")
}

// TestBrokerSyncReplicationSilentReplicaTimesOut: with --replication sync a
// replica that joined the in-sync set and then stops fetching gets the
// sends FLUSH_SLAVE_TIMEOUT after ReplicaAckTimeout, never SUCCESS; once it
// fetches again the next send is acknowledged. The replica is played by a
// raw connection speaking HELLO and FETCH.
func TestBrokerSyncReplicationSilentReplicaTimesOut(t *testing.T) {
	opts := testBrokerOptions(t, "127.0.1.1", "idc1", "broker-r")
	opts.Replication = ReplicationSync
	opts.ReplicaAckTimeout = 300 * time.Millisecond
	opts.ReplicaLagMax = time.Minute // the silent replica stays in the set
	s := startBroker(t, opts)
	c := newRawClient(t)
	createTopic(t, c, s.Addr(), "SyncRep", 1)
	expectCode(t, sendRaw(t, c, s.Addr(), "SyncRep", 0, nil, []byte("alone")), protocol.Success, "send without replicas")

	rc := newRawClient(t)
	hello := protocol.ReplicaHelloRequestHeader{BrokerName: "broker-r", ReplicaID: 1, ReplicaAddr: "127.0.2.1:1", IDC: "idc2",
		SegmentSize: s.store.SegmentSize()}
	expectCode(t, invoke(t, rc, s.Addr(), protocol.ReplicaHello, hello.Ext(), nil), protocol.Success, "replica hello")
	var from int64 // the replica's log end
	fetch := func() {
		t.Helper()
		// Fetch until the replica's offset is the master's log end: it is
		// then in the in-sync set, with everything acknowledged.
		for {
			h := protocol.ReplicaFetchRequestHeader{BrokerName: "broker-r", ReplicaID: 1, Epoch: s.repl.epoch(), Offset: from, MaxBytes: 1 << 20, MaxWaitMillis: 50}
			resp := invoke(t, rc, s.Addr(), protocol.ReplicaFetch, h.Ext(), nil)
			expectCode(t, resp, protocol.Success, "replica fetch")
			if len(resp.Body) == 0 && from == s.store.CommitLogMaxOffset() {
				return
			}
			from += int64(len(resp.Body))
		}
	}
	fetch()
	waitInSync(t, s, 1)

	resp := sendRaw(t, c, s.Addr(), "SyncRep", 0, nil, []byte("unconfirmed"))
	expectCode(t, resp, protocol.FlushSlaveTimeout, "send the silent replica never confirmed")
	fetch()

	// A send while the replica fetches again is acknowledged.
	h := protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: "SyncRep", QueueID: 0, BornTimestamp: time.Now().UnixMilli()}
	answered := make(chan *remoting.Command, 1)
	go func() {
		resp, err := c.Invoke(context.Background(), s.Addr(), remoting.NewRequest(int32(protocol.SendMessage), h.Ext(), []byte("confirmed")))
		if err != nil {
			resp = &remoting.Command{Code: int32(protocol.SystemError), Remark: err.Error()}
		}
		answered <- resp
	}()
	for deadline := time.Now().Add(30 * time.Second); ; {
		select {
		case resp := <-answered:
			expectCode(t, resp, protocol.Success, "send once the replica fetches again")
			return
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the send was not answered")
		}
		fetch()
	}
}

// A replica's HELLO whose connection closed before the master handled it
// does not hang the master. Registering the close callback on a closed
// connection runs it at once, and it took the lock the handler held: the
// chaos campaign saw a restarted master's every send and replica hang for
// good. The test holds the lock while the connection goes, as a busy
// master would.
func TestReplicaHelloOnAClosedConnectionDoesNotHangTheMaster(t *testing.T) {
	opts := testBrokerOptions(t, "127.0.1.1", "idc1", "broker-h")
	opts.Replication = ReplicationAsync
	s := startBroker(t, opts)
	c := newRawClient(t)
	createTopic(t, c, s.Addr(), "HelloTopic", 1)

	s.repl.mu.Lock()
	nc, err := net.Dial("tcp", s.Addr())
	if err != nil {
		s.repl.mu.Unlock()
		t.Fatal(err)
	}
	hello := protocol.ReplicaHelloRequestHeader{BrokerName: "broker-h", ReplicaID: 1, ReplicaAddr: "127.0.2.1:1", IDC: "idc2",
		SegmentSize: s.store.SegmentSize()}
	_, err = nc.Write(remoting.EncodeFrame(remoting.NewRequest(int32(protocol.ReplicaHello), hello.Ext(), nil)))
	open := func() bool {
		for _, cn := range s.remoting.Conns() {
			if cn.RemoteAddr() == nc.LocalAddr().String() {
				return true
			}
		}
		return false
	}
	closed := func() error {
		if open() {
			return fmt.Errorf("the master still has the replica's connection")
		}
		return nil
	}
	// Polled with the lock held (Eventually would fail with it held): the
	// master takes the connection, then sees it close.
	deadline := time.Now().Add(10 * time.Second)
	for !open() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	nc.Close()
	for closed() != nil && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	s.repl.mu.Unlock()
	testutil.NoError(t, err, "writing the hello")
	testutil.NoError(t, closed(), "the connection closed before the hello was handled")

	done := make(chan *remoting.Command, 1)
	go func() { done <- sendRaw(t, c, s.Addr(), "HelloTopic", 0, nil, []byte("after")) }()
	select {
	case resp := <-done:
		expectCode(t, resp, protocol.Success, "a send after the hello")
	case <-time.After(10 * time.Second):
		t.Fatal("the master hangs after a HELLO on a closed connection")
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if n := len(s.repl.replicaStates()); n != 0 {
			return fmt.Errorf("%d replicas listed, want the closed one dropped", n)
		}
		return nil
	})
}
