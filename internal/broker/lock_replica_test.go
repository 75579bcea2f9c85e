package broker

import (
	"encoding/json"
	"testing"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/testutil"
)

// TestReplicaGrantsOnlyConcurrentLocks: an orderly consumer's lock (a stock
// client's, or the SDK's orderly one) is granted by the group's master only;
// a replica grants the locks of consumers marked zmqConcurrent. A master
// that steps down forgets the locks it granted.
func TestReplicaGrantsOnlyConcurrentLocks(t *testing.T) {
	ns := startNamesrv(t, "127.0.1.1:0", "idc1", nil)
	master, _ := runBroker(t, groupOptions(t, 1, "broker-lk", 0, ReplicationSync, ns.Addr()))
	replica, _ := runBroker(t, groupOptions(t, 2, "broker-lk", 1, ReplicationSync, ns.Addr()))
	c := newRawClient(t)
	createTopic(t, c, master.Addr(), "LockTopic", 2)
	waitInSync(t, master, 1)

	mqs := []protocol.MessageQueue{{Topic: "LockTopic", BrokerName: "broker-lk", QueueID: 0}}
	lock := func(addr, client string, concurrent bool) int {
		t.Helper()
		body, _ := json.Marshal(lockBatchBody{ConsumerGroup: "lock_g", ClientID: client, MQSet: mqs, Concurrent: concurrent})
		resp := invoke(t, c, addr, protocol.LockBatchMQ, nil, body)
		expectCode(t, resp, protocol.Success, "LOCK_BATCH_MQ")
		var out lockBatchResponseBody
		testutil.NoError(t, json.Unmarshal(resp.Body, &out), "lock answer")
		return len(out.LockOKMQSet)
	}
	testutil.Equal(t, lock(replica.Addr(), "orderly@idc2", false), 0, "a replica refuses an orderly lock")
	testutil.Equal(t, lock(replica.Addr(), "concurrent@idc2", true), 1, "a replica grants a concurrent consumer's lock")
	testutil.Equal(t, lock(master.Addr(), "orderly@idc1", false), 1, "the master grants an orderly lock")
	held := func(s *Server) int {
		s.extra.locks.mu.Lock()
		defer s.extra.locks.mu.Unlock()
		return len(s.extra.locks.groups["lock_g"])
	}
	testutil.Equal(t, held(master), 1, "the master's lock table")

	sw := protocol.ReplicaSwitchRequestHeader{BrokerName: "broker-lk", To: 1}
	expectCode(t, invoke(t, c, master.Addr(), protocol.ReplicaSwitch, sw.Ext(), nil), protocol.Success, "switchover")
	testutil.Equal(t, held(master), 0, "the demoted master forgot its locks")
	testutil.Equal(t, lock(master.Addr(), "orderly@idc1", false), 0, "the demoted master refuses orderly locks")
}
