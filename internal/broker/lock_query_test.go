package broker

import (
	"encoding/json"
	"testing"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/testutil"
)

// TestBrokerQueryQueueLocks: ZONEMQ_QUERY_QUEUE_LOCKS shows the lock table
// as LOCK_BATCH_MQ judges it: the held queues, sorted, each with its owner;
// a released queue is gone; a bad group name is refused.
func TestBrokerQueryQueueLocks(t *testing.T) {
	s := startBroker(t, testBrokerOptions(t, "127.0.1.1", "idc1", "broker-lockq"))
	const topic, group = "LockQueryTopic", "lockq_cg"
	qs := testQueues(topic, 4)
	for i := range qs {
		qs[i].BrokerName = "broker-lockq"
	}
	a, c := newRawClient(t), newRawClient(t) // one connection per client id, as real clients
	for id, cl := range map[string]*remoting.Client{"A": a, "B": c} {
		hb := heartbeatBody(id, group, protocol.MessageModelCluster, map[string]string{topic: "*"})
		expectCode(t, invoke(t, cl, s.Addr(), protocol.HeartBeat, nil, hb), protocol.Success, "heartbeat "+id)
	}
	query := func() []protocol.QueueLock {
		t.Helper()
		resp := invoke(t, c, s.Addr(), protocol.QueryQueueLocks, map[string]string{"consumerGroup": group}, nil)
		expectCode(t, resp, protocol.Success, "QUERY_QUEUE_LOCKS")
		var body protocol.QueueLocksBody
		testutil.NoError(t, json.Unmarshal(resp.Body, &body), "answer body")
		testutil.Equal(t, body.ConsumerGroup, group, "group in the answer")
		testutil.True(t, body.Master, "a lone broker answers as master")
		return body.Locks
	}
	testutil.Equal(t, len(query()), 0, "no lock yet")

	testutil.Equal(t, lockRaw(t, c, s.Addr(), group, "B", qs[2:4]), "23", "B locks 2 and 3")
	testutil.Equal(t, lockRaw(t, a, s.Addr(), group, "A", qs[0:3]), "01", "A locks 0 and 1")
	got := query()
	want := []protocol.QueueLock{{Queue: qs[0], ClientID: "A"}, {Queue: qs[1], ClientID: "A"},
		{Queue: qs[2], ClientID: "B"}, {Queue: qs[3], ClientID: "B"}}
	testutil.Equal(t, len(got), len(want), "locks", got)
	for i := range want {
		testutil.Equal(t, got[i], want[i], "lock", i)
	}
	unlockRaw(t, c, s.Addr(), group, "B", qs[3:4])
	testutil.Equal(t, len(query()), 3, "a released queue is no longer locked")

	resp := invoke(t, c, s.Addr(), protocol.QueryQueueLocks, map[string]string{"consumerGroup": "bad group!"}, nil)
	expectCode(t, resp, protocol.InvalidParameter, "bad group")
}
