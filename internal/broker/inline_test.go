package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/store"
	"github.com/zonemq/zonemq/internal/testutil"
)

func TestBrokerPipelinedSendsStoredInArrivalOrder(t *testing.T) {
	// Sends are handled inline with flush async: requests pipelined on one
	// connection are stored in the order they were sent.
	opts := testBrokerOptions(t, "127.0.1.1", "idc1", "broker-a")
	s := startBroker(t, opts)
	testutil.True(t, !s.deferSendAcks(), "flush async answers sends once stored")
	c := newRawClient(t)
	createTopic(t, c, s.Addr(), "InlineOrder", 1)
	conn, err := c.Conn(t.Context(), s.Addr())
	testutil.NoError(t, err)

	const n = 200
	errs := make(chan error, n)
	for i := range n {
		h := protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: "InlineOrder", QueueID: 0, BornTimestamp: time.Now().UnixMilli()}
		req := remoting.NewRequest(int32(protocol.SendMessage), h.Ext(), []byte(fmt.Sprintf("m-%d", i)))
		conn.InvokeAsync(req, 10*time.Second, func(resp *remoting.Command, err error) {
			if err == nil && resp.Code != int32(protocol.Success) {
				err = fmt.Errorf("send: %s (%s)", protocol.ResponseCode(resp.Code), resp.Remark)
			}
			errs <- err
		})
	}
	for range n {
		testutil.NoError(t, <-errs)
	}
	resp := pullRaw(t, c, s.Addr(), "g", "InlineOrder", 0, 0, "*", n)
	expectCode(t, resp, protocol.Success, "pull")
	msgs := decodeAll(t, resp.Body)
	testutil.Equal(t, len(msgs), n, "pulled")
	for i, m := range msgs {
		testutil.Equal(t, string(m.Body), fmt.Sprintf("m-%d", i), "message at offset", i)
	}
}

func TestBrokerWaitingSendsAnsweredBySyncAcks(t *testing.T) {
	// The fsync and replica waits are not on the read goroutine: syncAcks
	// answers once they are over.
	opts := testBrokerOptions(t, "127.0.1.1", "idc1", "broker-a")
	opts.Flush = store.FlushSync
	s, err := New(opts)
	testutil.NoError(t, err)
	defer s.Shutdown()
	testutil.True(t, s.deferSendAcks(), "flush sync: sends answered after their fsync")

	opts = testBrokerOptions(t, "127.0.1.1", "idc1", "broker-b")
	opts.Replication = ReplicationSync
	s2, err := New(opts)
	testutil.NoError(t, err)
	defer s2.Shutdown()
	testutil.True(t, s2.deferSendAcks(), "replication sync: sends answered after their replicas'")
}

// serverConn opens a connection to s and returns the broker's side of it.
func serverConn(t *testing.T, s *Server, c *remoting.Client) *remoting.Conn {
	t.Helper()
	_, err := c.Conn(t.Context(), s.Addr())
	testutil.NoError(t, err)
	var sc *remoting.Conn
	testutil.Eventually(t, 5*time.Second, func() error {
		for _, conn := range s.remoting.Conns() {
			sc = conn
			return nil
		}
		return fmt.Errorf("no connection yet")
	})
	return sc
}

// Allocation budgets of the hot paths, per message. Counts are
// deterministic (times are not), so a change that adds allocations fails
// here and must say why in the budget.
const (
	// sendAllocBudget: handleSendMessage of one 1 KiB message (SEND_MESSAGE
	// and SEND_MESSAGE_V2 11 each; the answer's header has no map).
	sendAllocBudget = 11
	// pullAllocBudget: handlePullMessage of 32 messages, none of them per
	// message: the records are read into a pooled body (pullbuffers.go)
	// and the answer's header has no map.
	pullAllocBudget = 16
	// keptSendAllocBudget: a SEND_MESSAGE kept by the inline send batch and
	// stored with 31 others (inlinesends.go): 10.4.
	keptSendAllocBudget = 11
)

func TestBrokerSendAllocationBudget(t *testing.T) {
	if testing.Short() || raceDetector {
		t.Skip("allocation counts (the race detector allocates on its own)")
	}
	s := startBroker(t, testBrokerOptions(t, "127.0.1.1", "idc1", "broker-a"))
	c := newRawClient(t)
	createTopic(t, c, s.Addr(), benchTopic, benchQueues)
	sc := serverConn(t, s, c)
	body := make([]byte, benchBodySize)
	ctx := context.Background()
	// Every send has a UNIQ_KEY of its own, made beforehand: one sent again
	// would be answered as a stock client's retry (repeatOf), another path.
	const runs = 200
	seq := int64(0)
	for _, code := range []protocol.RequestCode{protocol.SendMessage, protocol.SendMessageV2} {
		reqs := make([]*remoting.Command, runs+1)
		for i := range reqs {
			seq++
			ext := benchSendExt(1, seq)
			if code == protocol.SendMessageV2 {
				// Short keys a–n, as rocketmq-client-go sends.
				var long protocol.SendMessageRequestHeader
				testutil.NoError(t, long.SetExt(ext))
				ext = (&protocol.SendMessageRequestHeaderV2{SendMessageRequestHeader: long}).Ext()
			}
			reqs[i] = remoting.NewRequest(int32(code), ext, body)
			reqs[i].Opaque = 7
		}
		n := 0
		allocs := testing.AllocsPerRun(runs, func() {
			r := reqs[n]
			n++
			if resp := s.handleSendMessage(ctx, sc, r); resp.Code != int32(protocol.Success) {
				t.Fatalf("send: %s", resp.Remark)
			}
		})
		t.Logf("handleSendMessage %s: %.1f allocations per message", code, allocs)
		testutil.True(t, allocs <= sendAllocBudget, fmt.Sprintf("%s: %.1f allocations per send, budget %d", code, allocs, sendAllocBudget))
	}
}

func TestBrokerPullAllocationBudget(t *testing.T) {
	if testing.Short() || raceDetector {
		t.Skip("allocation counts (the race detector allocates on its own)")
	}
	s := startBroker(t, testBrokerOptions(t, "127.0.1.1", "idc1", "broker-a"))
	c := newRawClient(t)
	createTopic(t, c, s.Addr(), benchTopic, 1)
	body := make([]byte, benchBodySize)
	for range benchPullBatch {
		expectCode(t, sendRaw(t, c, s.Addr(), benchTopic, 0, map[string]string{protocol.PropertyTags: "TagA"}, body), protocol.Success, "send")
	}
	sc := serverConn(t, s, c)
	h := protocol.PullMessageRequestHeader{
		ConsumerGroup: "bench_cg", Topic: benchTopic, QueueID: 0, QueueOffset: 0, MaxMsgNums: benchPullBatch,
		SysFlag: protocol.PullFlagSubscription, Subscription: "TagA", ExpressionType: protocol.ExpressionTypeTag,
	}
	req := remoting.NewRequest(int32(protocol.PullMessage), h.Ext(), nil)
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		resp := s.handlePullMessage(ctx, sc, req)
		if resp == nil || resp.Code != int32(protocol.Success) || len(resp.Body) < benchPullBatch*benchBodySize {
			t.Fatalf("pull did not return %d messages", benchPullBatch)
		}
		resp.Encoded() // as the server does once the answer is encoded: the body goes back to its pool
	})
	t.Logf("handlePullMessage: %.1f allocations per pull of %d", allocs, benchPullBatch)
	testutil.True(t, allocs <= pullAllocBudget, fmt.Sprintf("%.1f allocations per pull, budget %d", allocs, pullAllocBudget))
}

// TestBrokerKeptSendsAllocationBudget: the inline send batch (sends kept on
// the read goroutine and stored with one store.PutEach) stays within the
// per-message send budget, and answers every kept send.
func TestBrokerKeptSendsAllocationBudget(t *testing.T) {
	if testing.Short() || raceDetector {
		t.Skip("allocation counts (the race detector allocates on its own)")
	}
	s := startBroker(t, testBrokerOptions(t, "127.0.1.1", "idc1", "broker-a"))
	c := newRawClient(t)
	createTopic(t, c, s.Addr(), benchTopic, benchQueues)
	sc := serverConn(t, s, c)
	body := make([]byte, benchBodySize)
	const group = 32
	// As a JSON header arrives (fields in a map), and as a ROCKETMQ one
	// arrives from the read loop (fields left in their wire form).
	seq := int64(0)
	for _, form := range []string{"map", "raw"} {
		groups := func(int) []*remoting.Command {
			reqs := oneWaySends(seq, group, body)
			seq += group
			if form == "raw" {
				for i, r := range reqs {
					r.Serialize = remoting.SerializeRocketMQ
					var err error
					reqs[i], err = remoting.DecodeFrameRawExt(remoting.AppendFrame(nil, r)[4:])
					testutil.NoError(t, err)
				}
			}
			return reqs
		}
		before := s.store.MaxOffset(benchTopic, 0)
		allocs := keptSendAllocs(t, s, sc, groups, nil)
		t.Logf("kept sends, fields as %s: %.1f allocations per message", form, allocs)
		testutil.True(t, allocs <= keptSendAllocBudget, fmt.Sprintf("%s: %.1f allocations per kept send, budget %d", form, allocs, keptSendAllocBudget))
		testutil.True(t, s.store.MaxOffset(benchTopic, 0) > before, "the kept sends were stored")
	}
}

// oneWaySends is a group of n SEND_MESSAGE requests spread over the bench
// queues, numbered (UNIQ_KEY) from seq+1, flagged oneway so the test's
// connection does not pile up answers nobody reads.
func oneWaySends(seq int64, n int, body []byte) []*remoting.Command {
	reqs := make([]*remoting.Command, n)
	for i := range reqs {
		reqs[i] = remoting.NewRequest(int32(protocol.SendMessage), benchSendExt(int32(i%benchQueues), seq+int64(i)+1), body)
		reqs[i].Flag |= remoting.FlagOneway
	}
	return reqs
}

// keptSendAllocs is the allocations per send of serving a group of sends
// on sc as the inline send batch does, storing them, and running after
// (when not nil), averaged over 50 runs. Each run serves a group of its
// own, made by group beforehand: sends of one UNIQ_KEY again would be
// answered as a stock client's retries (repeatOf), another path.
func keptSendAllocs(t *testing.T, s *Server, sc *remoting.Conn, group func(run int) []*remoting.Command, after func()) float64 {
	ctx := context.Background()
	k := s.keptSends(sc)
	const runs = 50
	groups := make([][]*remoting.Command, runs+1) // AllocsPerRun runs once more to warm up
	for i := range groups {
		groups[i] = group(i)
	}
	n := 0
	return testing.AllocsPerRun(runs, func() {
		reqs := groups[n]
		n++
		for _, r := range reqs {
			if resp := s.serveSend(ctx, sc, r, k); resp != nil {
				t.Fatalf("send not kept: %s", resp.Remark)
			}
		}
		s.storeKeptSends(sc)
		if after != nil {
			after()
		}
	}) / float64(len(groups[0]))
}
