package broker

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/testutil"
)

// A sync-replication master stores a send before its replicas hold it; a
// consumer must not read it until they do (the chaos campaign's pull
// workload: a consumer read such a record, the group failed over and cut
// it, and the acknowledged message stored next at its offset was skipped).
// The replica here holds its fsync, so it cannot acknowledge: the pull
// finds nothing, GET_MAX_OFFSET does not count it, and a long poll parked
// on it is answered with it once the replica confirms it.
func TestConsumersReadOnlyWhatTheReplicasConfirmed(t *testing.T) {
	ctrl := startControllers(t, 2*time.Second)
	ns := startNamesrv(t, "127.0.1.1:0", "idc1", nil)
	mopts := ctrlGroupOptions(t, 1, "broker-hw", 0, ReplicationSync, ns.Addr(), ctrl)
	mopts.ReplicaAckTimeout = 20 * time.Second
	mopts.ReplicaLagMax = 20 * time.Second // the held replica stays in the in-sync set
	master, _ := runBroker(t, mopts)
	ropts := ctrlGroupOptions(t, 2, "broker-hw", 1, ReplicationSync, ns.Addr(), ctrl)
	hold, free := holdFsync(&ropts)
	replica, _ := runBroker(t, ropts)
	t.Cleanup(free) // before the brokers stop: the replica's flusher may wait on it
	c := newRawClient(t)
	createTopic(t, c, master.Addr(), "HWTopic", 1)
	waitInSync(t, master, 1)
	testutil.Eventually(t, 15*time.Second, func() error { // the first lease
		if r := sendRaw(t, c, master.Addr(), "HWTopic", 0, nil, []byte("confirmed")); r.Code != int32(protocol.Success) {
			return fmt.Errorf("send answered %d %s", r.Code, r.Remark)
		}
		return nil
	})
	waitCaughtUp(t, master, replica)
	testutil.Eventually(t, 10*time.Second, func() error {
		if got := replica.store.Visible(); got < master.store.CommitLogMaxOffset() {
			return fmt.Errorf("the replica shows up to %d, the log ends at %d", got, master.store.CommitLogMaxOffset())
		}
		return nil
	})

	hold.Store(true)
	end := master.store.CommitLogMaxOffset()
	n := master.store.MaxOffset("HWTopic", 0) // where the unconfirmed send goes
	h := protocol.SendMessageRequestHeader{ProducerGroup: "raw_pg", Topic: "HWTopic", QueueID: 0, BornTimestamp: time.Now().UnixMilli()}
	sent := asyncInvoke(c, master.Addr(), remoting.NewRequest(int32(protocol.SendMessage), h.Ext(), []byte("unconfirmed")))
	testutil.Eventually(t, 10*time.Second, func() error {
		if master.store.CommitLogMaxOffset() == end {
			return fmt.Errorf("the send is not stored yet")
		}
		return nil
	})
	// The replica has it (the copy is written, its fsync held) but has not
	// acknowledged it: not confirmed.
	resp := pullRaw(t, c, master.Addr(), "hw_cg", "HWTopic", 0, n, "*", 32)
	expectCode(t, resp, protocol.PullNotFound, "pull of a record the replica has not confirmed")
	var ph protocol.PullMessageResponseHeader
	testutil.NoError(t, ph.SetExt(resp.ExtFields), "pull answer header")
	testutil.Equal(t, ph.NextBeginOffset, n, "next offset of the empty pull")
	qh := protocol.QueueRequestHeader{Topic: "HWTopic", QueueID: 0}
	resp = invoke(t, c, master.Addr(), protocol.GetMaxOffset, qh.Ext(), nil)
	expectCode(t, resp, protocol.Success, "GET_MAX_OFFSET")
	testutil.Equal(t, resp.ExtFields["offset"], strconv.FormatInt(n, 10), "max offset consumers see")
	resp = pullRaw(t, c, replica.Addr(), "hw_cg", "HWTopic", 0, n, "*", 32)
	expectCode(t, resp, protocol.PullNotFound, "pull from the replica of a record the master has not confirmed")

	parked := asyncInvoke(c, master.Addr(), suspendedPull("hw_cg", "HWTopic", 0, n))
	testutil.Eventually(t, 10*time.Second, func() error {
		if master.pulls.parked() != 1 {
			return fmt.Errorf("%d pulls parked", master.pulls.parked())
		}
		return nil
	})
	select {
	case r := <-sent:
		t.Fatalf("the send was answered (%d %s) before the replica confirmed it", r.Code, r.Remark)
	default:
	}
	free()
	expectCode(t, <-sent, protocol.Success, "the send once the replica confirmed it")
	resp = <-parked
	expectCode(t, resp, protocol.Success, "the parked pull once the record is confirmed")
	msgs := decodeAll(t, resp.Body)
	if len(msgs) != 1 || string(msgs[0].Body) != "unconfirmed" {
		t.Fatalf("the parked pull got %d messages, want the one confirmed", len(msgs))
	}
	// The replica learns the master's mark with its next fetch.
	testutil.Eventually(t, 10*time.Second, func() error {
		if r := pullRaw(t, c, replica.Addr(), "hw_cg", "HWTopic", 0, n, "*", 32); r.Code != int32(protocol.Success) {
			return fmt.Errorf("the replica answers %d %s", r.Code, r.Remark)
		}
		return nil
	})
}
