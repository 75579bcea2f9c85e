package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/store"
	"github.com/zonemq/zonemq/internal/testutil"
)

// notifiedClient is a raw client that counts NOTIFY_CONSUMER_IDS_CHANGED.
type notifiedClient struct {
	*remoting.Client
	notices atomic.Int32
}

func newNotifiedClient(t *testing.T) *notifiedClient {
	t.Helper()
	n := &notifiedClient{Client: remoting.NewClient(remoting.ClientOptions{})}
	n.Handle(int32(protocol.NotifyConsumerIDsChanged), func(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
		if req.Ext("consumerGroup") != "" {
			n.notices.Add(1)
		}
		return nil
	})
	t.Cleanup(func() { n.Close() })
	return n
}

func TestBrokerConsumerRegistryAndNotifications(t *testing.T) {
	s := startBroker(t, testBrokerOptions(t, "127.0.1.1", "idc1", "broker-c"))
	admin := newRawClient(t)
	createTopic(t, admin, s.Addr(), "RegTopic", 4)
	const group = "reg_cg"

	c1, c2 := newNotifiedClient(t), newNotifiedClient(t)
	// zonemq SDK ids carry the client's IDC; they are kept verbatim.
	id1, id2 := "10.0.0.1@100@idc1", "instance-b@idc=idc2"
	hb := func(c *notifiedClient, id string) {
		resp := invoke(t, c.Client, s.Addr(), protocol.HeartBeat, nil,
			heartbeatBody(id, group, protocol.MessageModelCluster, map[string]string{"RegTopic": "TagA || TagB"}))
		expectCode(t, resp, protocol.Success, "heartbeat")
		testutil.Equal(t, resp.ExtFields["IS_SUPPORT_HEART_BEAT_V2"], "true", "IS_SUPPORT_HEART_BEAT_V2")
		testutil.Equal(t, resp.ExtFields["IS_SUB_CHANGE"], "true", "IS_SUB_CHANGE")
	}
	hb(c1, id1)
	testutil.Equal(t, strings.Join(s.ConsumerIDs(group), ","), id1, "one member")
	_, ok := s.topics.get(protocol.RetryTopic(group))
	testutil.True(t, ok, "retry topic created on heartbeat")
	retry, _ := s.topics.get(protocol.RetryTopic(group))
	testutil.Equal(t, retry.WriteQueueNums, 1, "retry topic queues")
	testutil.Equal(t, retry.Perm, 6, "retry topic perm")

	hb(c2, id2)
	// The existing member hears about the newcomer at once.
	testutil.Eventually(t, 5*time.Second, func() error {
		if c1.notices.Load() == 0 {
			return fmt.Errorf("member 1 was not notified of member 2")
		}
		return nil
	})
	resp := invoke(t, admin, s.Addr(), protocol.GetConsumerListByGroup, (&protocol.ConsumerGroupRequestHeader{ConsumerGroup: group}).Ext(), nil)
	expectCode(t, resp, protocol.Success, "consumer list")
	var list protocol.ConsumerListBody
	testutil.NoError(t, json.Unmarshal(resp.Body, &list), "consumer list body")
	testutil.Equal(t, strings.Join(list.ConsumerIDList, ","), id1+","+id2, "sorted verbatim ids")

	// A heartbeat again changes nothing and notifies nobody.
	before := c1.notices.Load() + c2.notices.Load()
	hb(c1, id1)

	// The heartbeat subscription filters pulls without a subscription bit.
	expectCode(t, sendRaw(t, admin, s.Addr(), "RegTopic", 0, map[string]string{protocol.PropertyTags: "TagC"}, []byte("c")), protocol.Success, "send TagC")
	expectCode(t, sendRaw(t, admin, s.Addr(), "RegTopic", 0, map[string]string{protocol.PropertyTags: "TagB"}, []byte("b")), protocol.Success, "send TagB")
	ph := protocol.PullMessageRequestHeader{ConsumerGroup: group, Topic: "RegTopic", QueueID: 0, MaxMsgNums: 32, CommitOffset: -1}
	pull := invoke(t, c1.Client, s.Addr(), protocol.PullMessage, ph.Ext(), nil)
	expectCode(t, pull, protocol.Success, "pull with the heartbeat subscription")
	ms := decodeAll(t, pull.Body)
	testutil.Equal(t, len(ms), 1, "only TagB matches")
	testutil.Equal(t, string(ms[0].Body), "b", "matched body")

	cc := invoke(t, admin, s.Addr(), protocol.GetConsumerConnectionList, (&protocol.ConsumerGroupRequestHeader{ConsumerGroup: group}).Ext(), nil)
	expectCode(t, cc, protocol.Success, "connection list")
	var conns protocol.ConsumerConnection
	testutil.NoError(t, json.Unmarshal(cc.Body, &conns), "connection list body")
	testutil.Equal(t, len(conns.ConnectionSet), 2, "connections")
	testutil.Equal(t, conns.MessageModel, protocol.MessageModelCluster, "message model")
	testutil.Equal(t, conns.SubscriptionTable["RegTopic"].SubString, "TagA || TagB", "subscription")

	// A member that goes away (connection closed, no unregister, as the Go
	// client does) leaves the group, and the rest are told at once.
	c2.Close()
	testutil.Eventually(t, 5*time.Second, func() error {
		if ids := s.ConsumerIDs(group); len(ids) != 1 || ids[0] != id1 {
			return fmt.Errorf("members %v", ids)
		}
		if c1.notices.Load()+c2.notices.Load() <= before {
			return fmt.Errorf("member 1 was not notified that member 2 left")
		}
		return nil
	})

	// UNREGISTER_CLIENT (Java clients) removes the member too.
	uh := protocol.UnregisterClientRequestHeader{ClientID: id1, ConsumerGroup: group}
	expectCode(t, invoke(t, c1.Client, s.Addr(), protocol.UnregisterClient, uh.Ext(), nil), protocol.Success, "unregister")
	testutil.Equal(t, len(s.ConsumerIDs(group)), 0, "no members")
	pull = invoke(t, c1.Client, s.Addr(), protocol.PullMessage, ph.Ext(), nil)
	expectCode(t, pull, protocol.SubscriptionNotExist, "pull after the group left")
}

func TestBrokerSilentClientExpires(t *testing.T) {
	opts := testBrokerOptions(t, "127.0.1.1", "idc1", "broker-e")
	opts.ChannelExpiry = 200 * time.Millisecond
	s := startBroker(t, opts)
	c := newRawClient(t)
	createTopic(t, c, s.Addr(), "ExpTopic", 1)
	expectCode(t, invoke(t, c, s.Addr(), protocol.HeartBeat, nil,
		heartbeatBody("silent@1", "exp_cg", protocol.MessageModelCluster, map[string]string{"ExpTopic": "*"})), protocol.Success, "heartbeat")
	testutil.Equal(t, len(s.ConsumerIDs("exp_cg")), 1, "member registered")
	conn, ok := c.ConnIfOpen(s.Addr())
	testutil.True(t, ok, "connection open")
	select {
	case <-conn.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the silent client's connection was not closed")
	}
	// The broker runs its close hook after the socket closes.
	testutil.Eventually(t, 5*time.Second, func() error {
		if ids := s.ConsumerIDs("exp_cg"); len(ids) != 0 {
			return fmt.Errorf("silent member still registered: %v", ids)
		}
		return nil
	})
}

func TestBrokerAutoCreateTopicOff(t *testing.T) {
	opts := testBrokerOptions(t, "127.0.1.1", "idc1", "broker-n")
	opts.AutoCreateTopic = false
	s := startBroker(t, opts)
	c := newRawClient(t)
	resp := sendRaw(t, c, s.Addr(), "NewTopic", 0, nil, []byte("x"))
	expectCode(t, resp, protocol.TopicNotExist, "send to a new topic")
	testutil.True(t, strings.Contains(resp.Remark, "auto-creation is off"), "remark explains: "+resp.Remark)
	_, ok := s.topics.get(protocol.AutoCreateTopicKey)
	testutil.True(t, !ok, "no TBW102 while auto-creation is off")
	// Retry topics are still created on demand.
	expectCode(t, sendRaw(t, c, s.Addr(), protocol.RetryTopic("g"), 0, nil, []byte("x")), protocol.Success, "send to a retry topic")
}

func TestBrokerDelayedMessagesGoToTheScheduleSeam(t *testing.T) {
	s, err := New(testBrokerOptions(t, "127.0.1.1", "idc1", "broker-s"))
	testutil.NoError(t, err, "New")
	var mu sync.Mutex
	var levels []int
	s.schedule = func(ctx context.Context, m *protocol.MessageExt, level int) (store.PutResult, error) {
		mu.Lock()
		levels = append(levels, level)
		mu.Unlock()
		return s.putMessage(ctx, m)
	}
	go s.Run(context.Background())
	t.Cleanup(s.Shutdown)
	c := newRawClient(t)
	expectCode(t, sendRaw(t, c, s.Addr(), "DelayTopic", 0, map[string]string{protocol.PropertyDelayLevel: "3"}, []byte("x")), protocol.Success, "delayed send")
	expectCode(t, sendRaw(t, c, s.Addr(), "DelayTopic", 0, map[string]string{protocol.PropertyDelayLevel: "99"}, []byte("y")), protocol.Success, "capped delay")
	expectCode(t, sendRaw(t, c, s.Addr(), "DelayTopic", 0, nil, []byte("z")), protocol.Success, "plain send")
	mu.Lock()
	defer mu.Unlock()
	testutil.Equal(t, fmt.Sprint(levels), "[3 18]", "levels handed to the schedule seam")
}

func TestBrokerHeartbeatExpiry(t *testing.T) {
	s := &Server{opts: Options{ChannelExpiry: 120 * time.Second}}
	for _, tc := range []struct {
		millis int64
		want   time.Duration
	}{
		{0, 0}, {-5, 0}, // stock clients: the channel expiry
		{100, 3 * time.Second}, {1000, 3 * time.Second}, {2000, 6 * time.Second},
		{39_999, 119_997 * time.Millisecond}, {40_000, 120 * time.Second}, {1 << 62, 120 * time.Second},
	} {
		testutil.Equal(t, s.heartbeatExpiry(tc.millis), tc.want, fmt.Sprintf("expiry for %d ms", tc.millis))
	}
	s.opts.ChannelExpiry = time.Second // never later than the channel expiry
	testutil.Equal(t, s.heartbeatExpiry(100), time.Second, "capped by a short channel expiry")
}

// TestBrokerExpiryClockSurvivesBrokerStall: after the broker itself was
// stopped (a late tick), short expiries wait minFastExpiry, so the clients'
// queued heartbeats are read before anyone is dropped.
func TestBrokerExpiryClockSurvivesBrokerStall(t *testing.T) {
	t0 := time.Now()
	c := expiryClock{every: 750 * time.Millisecond, last: t0}
	short, stalled := c.tick(t0.Add(750 * time.Millisecond))
	testutil.True(t, short && stalled == 0, "an on-time tick", short, stalled)
	short, stalled = c.tick(t0.Add(2 * time.Second)) // a little late: scheduling noise
	testutil.True(t, short && stalled == 0, "a slightly late tick", short, stalled)
	short, stalled = c.tick(t0.Add(12 * time.Second)) // stopped for ~10 s
	testutil.True(t, !short && stalled > 9*time.Second, "a stall suspends short expiries", short, stalled)
	short, _ = c.tick(t0.Add(14 * time.Second))
	testutil.True(t, !short, "still suspended within minFastExpiry")
	short, _ = c.tick(t0.Add(15 * time.Second))
	testutil.True(t, short, "short expiries apply again after minFastExpiry")

	// With short expiries suspended, the registry uses the channel expiry.
	r := newClientRegistry()
	conn := &remoting.Conn{}
	r.registerProducer(clientChannel{conn: conn, clientID: "sdk@1", lastUpdate: t0, expiry: 3 * time.Second}, "pg")
	testutil.Equal(t, len(r.expired(t0.Add(10*time.Second), 120*time.Second, false)), 0, "suspended")
	testutil.Equal(t, len(r.expired(t0.Add(10*time.Second), 120*time.Second, true)), 1, "applied")
}

// TestBrokerAnnouncedHeartbeatExpiresFast: a client announcing its
// heartbeat period (heartbeatIntervalMillis, the zonemq SDK) that goes
// silent is dropped after 3 s, not the 120 s channel expiry, and the other
// members are notified; a stock-style client, as silent, stays.
func TestBrokerAnnouncedHeartbeatExpiresFast(t *testing.T) {
	s := startBroker(t, testBrokerOptions(t, "127.0.1.1", "idc1", "broker-fast-expiry"))
	testutil.Equal(t, s.opts.ChannelExpiry, 120*time.Second, "default channel expiry")
	admin := newRawClient(t)
	createTopic(t, admin, s.Addr(), "FastTopic", 2)
	const group = "fast_cg"
	heartbeat := func(c *remoting.Client, id string, top, perGroup int64) {
		t.Helper()
		var hb protocol.HeartbeatData
		testutil.NoError(t, json.Unmarshal(heartbeatBody(id, group, protocol.MessageModelCluster, map[string]string{"FastTopic": "*"}), &hb), "heartbeat body")
		hb.HeartbeatIntervalMillis = top
		hb.ConsumerDataSet[0].HeartbeatIntervalMillis = perGroup
		body, err := json.Marshal(hb)
		testutil.NoError(t, err, "encoding a heartbeat")
		expectCode(t, invoke(t, c, s.Addr(), protocol.HeartBeat, nil, body), protocol.Success, "heartbeat "+id)
	}
	stock, top, perGroup := newNotifiedClient(t), newRawClient(t), newRawClient(t)
	heartbeat(stock.Client, "stock@1", 0, 0)
	start := time.Now()
	heartbeat(top, "sdk-top@1", 100, 0)
	heartbeat(perGroup, "sdk-group@1", 0, 100)
	testutil.Equal(t, strings.Join(s.ConsumerIDs(group), ","), "sdk-group@1,sdk-top@1,stock@1", "three members")
	// Both joins are announced first, so a later notice is about a drop.
	testutil.Eventually(t, 5*time.Second, func() error {
		if n := stock.notices.Load(); n < 2 {
			return fmt.Errorf("%d join notices, want 2", n)
		}
		return nil
	})
	before := stock.notices.Load()

	conns := map[string]*remoting.Conn{}
	for name, c := range map[string]*remoting.Client{"top-level": top, "per-group": perGroup} {
		conn, ok := c.ConnIfOpen(s.Addr())
		testutil.True(t, ok, name+" connection open")
		conns[name] = conn
	}
	for name, conn := range conns {
		select {
		case <-conn.Done():
		case <-time.After(10 * time.Second):
			t.Fatalf("the %s announcing client was not dropped", name)
		}
	}
	took := time.Since(start)
	testutil.True(t, took >= minFastExpiry, "dropped no earlier than 3 s", took)
	testutil.Eventually(t, 5*time.Second, func() error {
		if ids := s.ConsumerIDs(group); len(ids) != 1 || ids[0] != "stock@1" {
			return fmt.Errorf("members %v", ids)
		}
		if stock.notices.Load() == before {
			return fmt.Errorf("the remaining member was not notified")
		}
		return nil
	})
	// The stock-style client has been as silent and is still a member, on
	// an open connection.
	conn, ok := stock.ConnIfOpen(s.Addr())
	testutil.True(t, ok, "stock connection open")
	select {
	case <-conn.Done():
		t.Fatal("the stock-style client was dropped early")
	default:
	}
	testutil.True(t, time.Since(start) >= minFastExpiry, "the stock client was silent as long")
}

// A burst of changes to one group (members joining back to back) is told
// to its members a few times, not once per change — at most once per gap
// (notifyGapPerMember per member, up to notifyGap) — and a notice follows
// the last change, so every member rebalances on the final membership.
func TestBrokerGroupChangesToldCoalesced(t *testing.T) {
	s := startBroker(t, testBrokerOptions(t, "127.0.1.1", "idc1", "broker-n"))
	admin := newRawClient(t)
	createTopic(t, admin, s.Addr(), "BurstTopic", 4)
	const group = "burst_cg"
	const joiners = 200
	var mu sync.Mutex
	var told []time.Time
	first := remoting.NewClient(remoting.ClientOptions{})
	t.Cleanup(func() { first.Close() })
	first.Handle(int32(protocol.NotifyConsumerIDsChanged), func(_ context.Context, _ *remoting.Conn, _ *remoting.Command) *remoting.Command {
		mu.Lock()
		told = append(told, time.Now())
		mu.Unlock()
		return nil
	})
	hb := func(c *remoting.Client, id string) {
		resp := invoke(t, c, s.Addr(), protocol.HeartBeat, nil,
			heartbeatBody(id, group, protocol.MessageModelCluster, map[string]string{"BurstTopic": "*"}))
		expectCode(t, resp, protocol.Success, "heartbeat")
	}
	hb(first, "first@idc1")
	var lastChange time.Time
	for i := range joiners {
		c := newRawClient(t)
		lastChange = time.Now()
		hb(c, fmt.Sprintf("joiner-%d@idc1", i))
	}
	testutil.Equal(t, len(s.ConsumerIDs(group)), joiners+1, "every member listed")
	testutil.Eventually(t, 5*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(told) == 0 || told[len(told)-1].Before(lastChange) {
			return fmt.Errorf("no notice after the last join yet (%d notices)", len(told))
		}
		return nil
	})
	mu.Lock()
	n := len(told)
	mu.Unlock()
	testutil.True(t, n < joiners/2, "notices coalesced:", n, "for", joiners, "joins")
	t.Logf("%d notices for %d joins", n, joiners)
}
