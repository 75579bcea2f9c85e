package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/controller"
	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/testutil"
)

// startControllers runs a 3-voter controller cluster, voter i in IDC i, with
// a short master lease, and returns the voters' request addresses.
func startControllers(t *testing.T, lease time.Duration) []string {
	t.Helper()
	var srvs []*controller.Server
	var peers []controller.Peer
	var addrs []string
	for i := 1; i <= 3; i++ {
		o := controller.NewOptions()
		ip := fmt.Sprintf("127.0.%d.1", i)
		o.Listen, o.RaftListen = ip+":0", ip+":0"
		o.NodeID = fmt.Sprintf("c%d", i)
		o.DataDir = t.TempDir()
		o.MasterLeaseTimeout = lease
		o.CheckInterval = 50 * time.Millisecond
		o.HeartbeatTimeout, o.ElectionTimeout, o.LeaderLeaseTimeout = 500*time.Millisecond, 500*time.Millisecond, 250*time.Millisecond
		o.Logger = testLogger()
		s, err := controller.New(o)
		testutil.NoError(t, err, "controller.New")
		done := make(chan error, 1)
		go func() { done <- s.Run(context.Background()) }()
		t.Cleanup(func() { s.Shutdown(); <-done })
		srvs = append(srvs, s)
		peers = append(peers, controller.Peer{ID: o.NodeID, RaftAddr: s.RaftAddr()})
		addrs = append(addrs, s.Addr())
	}
	for _, s := range srvs {
		testutil.NoError(t, s.Bootstrap(peers), "bootstrap")
	}
	return addrs
}

// TestControllerFailoverFencesTheOldMaster: a group's master cut off from
// the controller (its process alive) stops acknowledging when its lease
// lapses; the controller elects the in-sync replica, which takes writes; the
// old master, reconnected, follows it. Nothing acknowledged is lost, and
// nothing is acknowledged by the old master after the new one took over.
func TestControllerFailoverFencesTheOldMaster(t *testing.T) {
	const lease = 600 * time.Millisecond
	ctrl := startControllers(t, lease)
	ns := startNamesrv(t, "127.0.1.1:0", "idc1", nil)

	// The master reaches the controller through a dialer the test can cut
	// (redirects name the voters' own addresses, so a proxy would not do).
	var cut atomic.Bool
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		if cut.Load() {
			return nil, errors.New("test: the link to the controller is cut")
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	mopts := groupOptions(t, 1, "broker-c", 0, ReplicationSync, ns.Addr())
	mopts.ControllerAddrs = ctrl
	mopts.controllerDial = dial
	mopts.ControllerHeartbeatInterval = 150 * time.Millisecond
	master, _ := runBroker(t, mopts)
	ropts := groupOptions(t, 2, "broker-c", 1, ReplicationSync, ns.Addr())
	ropts.ControllerAddrs = ctrl
	ropts.ControllerHeartbeatInterval = 150 * time.Millisecond
	replica, _ := runBroker(t, ropts)

	c := newRawClient(t)
	createTopic(t, c, master.Addr(), "CtrlTopic", 4)
	waitInSync(t, master, 1)
	var acked []string
	testutil.Eventually(t, 15*time.Second, func() error {
		acked = append(acked, sendKeys(t, c, master.Addr(), "CtrlTopic", fmt.Sprintf("a%d-", len(acked)), 10)...)
		if len(acked) < 50 {
			return fmt.Errorf("%d sends acknowledged so far (waiting for the lease)", len(acked))
		}
		return nil
	})

	// The controller decides: a switchover or promotion sent to the brokers
	// directly is refused, not fought over.
	sw := protocol.ReplicaSwitchRequestHeader{BrokerName: "broker-c", To: 1}
	expectCode(t, invoke(t, c, master.Addr(), protocol.ReplicaSwitch, sw.Ext(), nil), protocol.IllegalOperation, "switch in controller mode")
	pr := protocol.ReplicaPromoteRequestHeader{BrokerName: "broker-c", LogEnd: -1}
	expectCode(t, invoke(t, c, replica.Addr(), protocol.ReplicaPromote, pr.Ext(), nil), protocol.IllegalOperation, "promote in controller mode")

	// Acknowledgements name the epoch they were given under.
	epochOf := func(resp *remoting.Command) int64 {
		t.Helper()
		var h protocol.SendMessageResponseHeader
		testutil.NoError(t, h.SetExt(resp.ExtFields), "send response header")
		return h.BrokerEpoch
	}
	first := sendRaw(t, c, master.Addr(), "CtrlTopic", 0, map[string]string{"KEYS": "epoch-1"}, []byte("x"))
	expectCode(t, first, protocol.Success, "send before the cut")
	acked = append(acked, "epoch-1")
	oldEpoch := epochOf(first)
	testutil.True(t, oldEpoch > 0, "the master's acknowledgement carries its epoch", oldEpoch)

	// Cut the master off the controller.
	cutAt := time.Now()
	cut.Store(true)
	for _, a := range master.repl.ctrlClient.Addrs() {
		master.repl.ctrlClient.CloseConn(a)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		resp := sendRaw(t, c, master.Addr(), "CtrlTopic", 0, map[string]string{"KEYS": "fenced"}, []byte("x"))
		if resp.Code == int32(protocol.Success) {
			acked = append(acked, "fenced")
			return fmt.Errorf("the cut-off master still acknowledges")
		}
		return nil
	})
	fencedAfter := time.Since(cutAt)
	var elected time.Duration
	testutil.Eventually(t, 15*time.Second, func() error {
		if !replica.IsMaster() {
			return fmt.Errorf("the replica is not master yet")
		}
		resp := sendRaw(t, c, replica.Addr(), "CtrlTopic", 1, map[string]string{"KEYS": "new-0"}, []byte("x"))
		if resp.Code != int32(protocol.Success) {
			return fmt.Errorf("the new master refuses: %s %s", protocol.ResponseCode(resp.Code), resp.Remark)
		}
		elected = time.Since(cutAt)
		acked = append(acked, "new-0")
		if e := epochOf(resp); e <= oldEpoch {
			t.Fatalf("the new master acknowledged under epoch %d, not above the old master's %d", e, oldEpoch)
		}
		return nil
	})
	t.Logf("master cut off: it stopped acknowledging after %s; the new master took a write %s after the cut (lease %s)",
		fencedAfter.Round(time.Millisecond), elected.Round(time.Millisecond), lease)
	// The old master never acknowledges again while cut off.
	resp := sendRaw(t, c, master.Addr(), "CtrlTopic", 0, nil, []byte("x"))
	testutil.True(t, resp.Code != int32(protocol.Success), "the fenced master refuses", resp.Remark)
	more := sendKeys(t, c, replica.Addr(), "CtrlTopic", "b", 30)
	acked = append(acked, more...)

	// Reconnected, the old master learns it was replaced and follows.
	cut.Store(false)
	testutil.Eventually(t, 15*time.Second, func() error {
		if master.IsMaster() {
			return fmt.Errorf("the old master has not stepped down")
		}
		return nil
	})
	waitCaughtUp(t, replica, master)
	keys := readKeys(t, c, replica.Addr(), "CtrlTopic", 4)
	for _, k := range acked {
		if keys[k] == 0 {
			t.Fatalf("acknowledged key %s missing on the new master", k)
		}
	}
	old := readKeys(t, c, master.Addr(), "CtrlTopic", 4)
	testutil.Equal(t, len(old), len(keys), "the old master holds the new master's log")
}
