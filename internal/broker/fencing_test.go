package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/namesrv"
	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/testutil"
)

// squatter is issue 22's impostor: a process at another address that
// registers a broker group's master slot (id 0) and answers REPLICA_HELLO
// with a newer epoch of its own and truncateTo=0.
func squatter(t *testing.T, nsAddr, group string) string {
	t.Helper()
	srv, err := remoting.NewServer(remoting.ServerOptions{Listen: "127.0.9.9:0"})
	testutil.NoError(t, err)
	srv.Handle(int32(protocol.ReplicaHello), func(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
		epoch := time.Now().Unix() + 1000
		resp := remoting.NewResponse(req, int32(protocol.Success), "")
		resp.ExtFields = (&protocol.ReplicaHelloResponseHeader{Epoch: epoch, TruncateTo: 0, LogMin: 0, LogEnd: 0}).Ext()
		resp.Body, _ = json.Marshal([]protocol.EpochEntry{{Epoch: epoch, StartOffset: 0}})
		return resp
	})
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	t.Cleanup(func() { srv.Close(); <-done })
	c := newRawClient(t)
	h := protocol.RegisterBrokerRequestHeader{BrokerName: group, BrokerAddr: srv.Addr(), ClusterName: protocol.DefaultCluster,
		BrokerID: 0, HeartbeatTimeoutMillis: 60_000, ZoneName: "idc9"}
	expectCode(t, invoke(t, c, nsAddr, protocol.RegisterBroker, h.Ext(), nil), protocol.Success, "the squatter's registration")
	return srv.Addr()
}

// stoppedMasterWithData runs a master of group with 20 acknowledged
// messages on topic (4 queues), registered with a name server, and stops
// it: the starting point of a restart.
func stoppedMasterWithData(t *testing.T, group, topic string) (*namesrv.Server, Options, *Server, *remoting.Client) {
	t.Helper()
	ns := startNamesrv(t, "127.0.1.1:0", "idc1", nil)
	opts := groupOptions(t, 1, group, 0, ReplicationAsync, ns.Addr())
	m, stop := runBroker(t, opts)
	c := newRawClient(t)
	createTopic(t, c, m.Addr(), topic, 4)
	acked := sendKeys(t, c, m.Addr(), topic, "k", 20)
	testutil.Equal(t, len(acked), 20, "acknowledged")
	waitRegistered(t, c, ns.Addr(), m)
	stop()
	return ns, opts, m, c
}

// TestMasterDoesNotStepDownToASquatter: a master restarts while another
// process holds its group's master slot and answers as a master whose
// history is not the group's. The master keeps its role and every byte of
// its log. (Issue 22: it demoted itself for good, persisted
// "master": false, and truncated its commit log to 0 bytes.)
func TestMasterDoesNotStepDownToASquatter(t *testing.T) {
	ns, opts, m, c := stoppedMasterWithData(t, "broker-sq", "SqT")
	end := m.store.CommitLogMaxOffset()

	squatter(t, ns.Addr(), "broker-sq")
	opts.Listen = m.Addr()
	m, _ = runBroker(t, opts)
	testutil.True(t, m.IsMaster(), "the master stepped down to a squatter")
	testutil.Equal(t, m.store.CommitLogMaxOffset(), end, "the master's log end")
	testutil.Equal(t, len(readKeys(t, c, m.Addr(), "SqT", 4)), 20, "acknowledged messages readable on the master")
}

// TestReplicaRefusesAnUnprovenTruncation: a HELLO answer that asks to drop
// data its epoch history does not prove unacknowledged is refused, and
// nothing is cut; the legitimate cases pass.
func TestReplicaRefusesAnUnprovenTruncation(t *testing.T) {
	mine := []protocol.EpochEntry{{Epoch: 5, StartOffset: 0}, {Epoch: 7, StartOffset: 1000}}
	const end = 2000
	ok := func(what string, rh protocol.ReplicaHelloResponseHeader, theirs []protocol.EpochEntry) {
		t.Helper()
		testutil.NoError(t, checkTruncation(mine, end, rh, theirs), what)
	}
	refused := func(what string, rh protocol.ReplicaHelloResponseHeader, theirs []protocol.EpochEntry) {
		t.Helper()
		testutil.True(t, checkTruncation(mine, end, rh, theirs) != nil, what)
	}
	// A promoted replica that had epoch 7 up to 1500 and began epoch 8 there.
	succ := []protocol.EpochEntry{{Epoch: 5, StartOffset: 0}, {Epoch: 7, StartOffset: 1000}, {Epoch: 8, StartOffset: 1500}}
	ok("a successor proving the cut", protocol.ReplicaHelloResponseHeader{Epoch: 8, TruncateTo: 1500, LogEnd: 3000}, succ)
	ok("the same master, caught up", protocol.ReplicaHelloResponseHeader{Epoch: 7, TruncateTo: end, LogEnd: 2500}, mine)
	refused("issue 22's squatter: truncateTo 0, an unrelated history",
		protocol.ReplicaHelloResponseHeader{Epoch: 99, TruncateTo: 0, LogEnd: 0}, []protocol.EpochEntry{{Epoch: 99, StartOffset: 0}})
	refused("a successor asking to cut more than it proves", protocol.ReplicaHelloResponseHeader{Epoch: 8, TruncateTo: 0, LogEnd: 3000}, succ)
	refused("a master at an older epoch", protocol.ReplicaHelloResponseHeader{Epoch: 6, TruncateTo: end, LogEnd: 3000},
		[]protocol.EpochEntry{{Epoch: 5, StartOffset: 0}, {Epoch: 6, StartOffset: 900}})
	refused("a master of the same epoch that lost the tail", protocol.ReplicaHelloResponseHeader{Epoch: 7, TruncateTo: 1200, LogEnd: 1200}, mine)
	refused("a history that disagrees on an epoch's start", protocol.ReplicaHelloResponseHeader{Epoch: 8, TruncateTo: 1500, LogEnd: 3000},
		[]protocol.EpochEntry{{Epoch: 5, StartOffset: 0}, {Epoch: 7, StartOffset: 400}, {Epoch: 8, StartOffset: 1500}})
	refused("a log end before the master's own last epoch", protocol.ReplicaHelloResponseHeader{Epoch: 8, TruncateTo: 1500, LogEnd: 0}, succ)
}

// TestPromotionToAnAbsurdEpochRefused: even from a member (the cluster
// secret does not make a mistake right), REPLICA_PROMOTE at epoch 2^40 is
// refused and the replica stays a replica. (Issue 22: it made a second
// master and 2 acknowledged messages were lost.)
func TestPromotionToAnAbsurdEpochRefused(t *testing.T) {
	ns := startNamesrv(t, "127.0.1.1:0", "idc1", nil)
	master, _ := runBroker(t, groupOptions(t, 1, "broker-ep", 0, ReplicationSync, ns.Addr()))
	replica, _ := runBroker(t, groupOptions(t, 2, "broker-ep", 1, ReplicationSync, ns.Addr()))
	waitInSync(t, master, 1)
	c := newRawClient(t)
	promote := protocol.ReplicaPromoteRequestHeader{BrokerName: "broker-ep", Epoch: 1 << 40, LogEnd: -1}
	expectCode(t, invoke(t, c, replica.Addr(), protocol.ReplicaPromote, promote.Ext(), nil), protocol.InvalidParameter, "promotion to epoch 2^40")
	testutil.True(t, !replica.IsMaster() && master.IsMaster(), "one master")
}

// registrarState is the broker's registration state toward name server addr.
func registrarState(s *Server, addr string) string {
	s.namesrvs.mu.Lock()
	p := s.namesrvs.peers[addr]
	s.namesrvs.mu.Unlock()
	if p == nil {
		return ""
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state
}

// TestCopiedConfigBrokerRefused: an operator starts a second broker with a
// copy of a master's config (same name and id, its own empty data
// directory, another address) while the master restarts. The name server
// refuses it the master's slot, it says why, and the returning master
// keeps its role and its log. (Issue 22: the second process took the slot
// and the real master demoted itself for good.)
func TestCopiedConfigBrokerRefused(t *testing.T) {
	ns, opts, a, c := stoppedMasterWithData(t, "broker-dup", "DupT")

	copied := groupOptions(t, 2, "broker-dup", 0, ReplicationAsync, ns.Addr()) // same name and id, new dir and address
	b, _ := runBroker(t, copied)
	testutil.Eventually(t, 10*time.Second, func() error {
		if st := registrarState(b, ns.Addr()); st != peerRejected {
			return fmt.Errorf("the copy's registration is %q, want %q", st, peerRejected)
		}
		return nil
	})
	addr, _, err := registeredAt(t, c, ns.Addr(), "broker-dup")
	testutil.NoError(t, err)
	testutil.True(t, addr != b.Addr(), "the copy holds the master's slot")

	opts.Listen = a.Addr()
	a, _ = runBroker(t, opts)
	waitRegistered(t, c, ns.Addr(), a)
	testutil.True(t, a.IsMaster(), "the real master stepped down")
	testutil.Equal(t, len(readKeys(t, c, a.Addr(), "DupT", 4)), 20, "acknowledged messages on the real master")
}
