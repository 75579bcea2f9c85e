package broker

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/testutil"
)

// A sync-replication master drops a replica that stopped acknowledging
// from its in-sync set, but the controller, which elects from the set it
// committed, still counts that replica until the master's next report is
// committed. The chaos campaign (seed 64) lost an acknowledged message in
// that window: the master dropped a replica, acknowledged sends and
// stopped; the controller elected the dropped replica, and the other
// copies cut the acknowledged records to match it. The master here is cut
// off from the controller (its lease still valid) while a replica holds
// its fsync: a send must wait although the master's own set has dropped
// the replica, and be acknowledged only once the controller, reached
// again, has dropped it too.
func TestSendWaitsUntilTheControllerDropsTheReplica(t *testing.T) {
	ctrl := startControllers(t, 5*time.Second)
	ns := startNamesrv(t, "127.0.1.1:0", "idc1", nil)
	var link controllerLink
	mopts := ctrlGroupOptions(t, 1, "broker-isr", 0, ReplicationSync, ns.Addr(), ctrl)
	mopts.controllerDial = link.dial
	mopts.ReplicaAckTimeout = 20 * time.Second
	mopts.ReplicaLagMax = 300 * time.Millisecond
	master, _ := runBroker(t, mopts)

	held := ctrlGroupOptions(t, 2, "broker-isr", 1, ReplicationSync, ns.Addr(), ctrl)
	hold, free := holdFsync(&held)
	_, _ = runBroker(t, held)
	t.Cleanup(free) // before the brokers stop: the held replica's flusher waits on it
	_, _ = runBroker(t, ctrlGroupOptions(t, 3, "broker-isr", 2, ReplicationSync, ns.Addr(), ctrl))

	c := newRawClient(t)
	createTopic(t, c, master.Addr(), "IsrTopic", 1)
	waitInSync(t, master, 2)
	testutil.Eventually(t, 15*time.Second, func() error { // the first lease
		if r := sendRaw(t, c, master.Addr(), "IsrTopic", 0, nil, []byte("first")); r.Code != int32(protocol.Success) {
			return fmt.Errorf("send answered %d %s", r.Code, r.Remark)
		}
		return nil
	})
	waitControllerInSync(t, c, ctrl, "broker-isr", 1)
	waitControllerInSync(t, c, ctrl, "broker-isr", 2)

	link.sever(master)
	hold.Store(true)
	h := protocol.SendMessageRequestHeader{ProducerGroup: "raw_pg", Topic: "IsrTopic", QueueID: 0, BornTimestamp: time.Now().UnixMilli()}
	sent := asyncInvoke(c, master.Addr(), remoting.NewRequest(int32(protocol.SendMessage), h.Ext(), []byte("waits")))
	testutil.Eventually(t, 10*time.Second, func() error {
		if st := master.repl.replicaStates()[1]; st.InSync {
			return fmt.Errorf("the master still counts the held replica in sync")
		}
		return nil
	})
	// The master's set has dropped the replica; the controller's has not.
	select {
	case r := <-sent:
		t.Fatalf("the send was acknowledged (%d %s) while the controller still counted the replica that lacks it in sync", r.Code, r.Remark)
	case <-time.After(500 * time.Millisecond):
	}
	testutil.True(t, master.store.Confirmed() < master.store.CommitLogMaxOffset(), "consumers do not see the send either",
		master.store.Confirmed(), master.store.CommitLogMaxOffset())

	link.cut.Store(false)
	r := <-sent
	expectCode(t, r, protocol.Success, "the send once the controller dropped the replica")
	inSync := controllerInSync(t, c, ctrl, "broker-isr")
	testutil.True(t, !slices.Contains(inSync, 1), "the controller dropped the replica before the acknowledgement", inSync)
}

// controllerInSync is the in-sync set the controller's leader committed for
// group name.
func controllerInSync(t *testing.T, c *remoting.Client, ctrl []string, name string) []int64 {
	t.Helper()
	var set []int64
	testutil.Eventually(t, 10*time.Second, func() error {
		_, g, err := controllerGroup(t, c, ctrl, name)
		if err == nil {
			set = g.InSync
		}
		return err
	})
	return set
}

// A replica in the master's own set counts toward min-insync-replicas only
// once the controller's committed set has it too (all of them while the
// controller has named none): until then an election could pick a member
// the controller keeps eligible instead, which lacks what it confirmed.
func TestAckSetCountsOnlyReplicasTheControllerHas(t *testing.T) {
	r := &replication{s: &Server{opts: Options{BrokerID: 0}}, replicas: map[int64]*replicaPeer{
		1: {id: 1, inSync: true, acked: 100},
		2: {id: 2, inSync: true, acked: 100},
	}}
	r.committedSync = []int64{0, 1}
	inSync, counted, behind, low := r.ackSetLocked(100)
	testutil.Equal(t, [4]int64{int64(inSync), int64(counted), int64(behind), low}, [4]int64{2, 1, 0, 100},
		"in sync, counted, behind, low with replica 2 not committed yet")
	r.committedSync = nil
	_, counted, _, _ = r.ackSetLocked(100)
	testutil.Equal(t, counted, 2, "no committed set named yet: every in-sync replica counts")
}
