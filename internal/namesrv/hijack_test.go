package namesrv

import (
	"fmt"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/testutil"
)

// Regression tests of issue 12's name-server attacks, with ACL off: each
// asserts the routes a client sees, never a time.

// routeGroup returns the IDC of broker group name in topic's route and
// the address of each of its ids.
func routeGroup(t *testing.T, ns, topic, name string) (string, map[int64]string) {
	t.Helper()
	r, resp := getRoute(t, newClient(t), ns, topic, nil)
	if r == nil {
		t.Fatalf("no route for %s: %d %q", topic, resp.Code, resp.Remark)
	}
	for _, bd := range r.BrokerDatas {
		if bd.BrokerName == name {
			return bd.ZoneName, bd.BrokerAddrs
		}
	}
	t.Fatalf("route of %s has no broker %s", topic, name)
	return "", nil
}

// TestNamesrvForgedRegisterBrokerRefused: a REGISTER_BROKER for a live
// broker's name and id from another connection (another address, a
// made-up IDC), re-sent in a loop, never reaches the routes; neither does
// one with the real address and an empty topic table, an UNREGISTER_BROKER
// or a heartbeat from that connection. A replica (id 1) in another IDC
// registers from its own connection.
func TestNamesrvForgedRegisterBrokerRefused(t *testing.T) {
	ns := startNamesrv(t, "127.0.1.1", "idc1", nil)
	real := newFakeBroker(t, "broker-a", "127.0.1.1:10911", "idc1")
	real.mustRegister(ns.Addr(), map[string]int{"TopicA": 4}, 1)

	forged := newFakeBroker(t, "broker-a", "127.0.9.1:10911", "idcEVIL")
	for i := range 50 {
		resp := forged.register(ns.Addr(), topicTable(map[string]int{"TopicA": 8, "TopicEvil": 1}), int64(100+i))
		wantCode(t, resp, protocol.NoPermission)
		// The real broker keeps beating over its own connection.
		wantCode(t, real.heartbeat(ns.Addr()), protocol.Success)
	}
	zone, addrs := routeGroup(t, ns.Addr(), "TopicA", "broker-a")
	testutil.Equal(t, zone, "idc1", "IDC of broker-a")
	testutil.Equal(t, fmt.Sprint(addrs), "map[0:127.0.1.1:10911]", "addresses of broker-a")
	testutil.NoError(t, routeIs(t, newClient(t), ns.Addr(), "TopicA", "broker-a@idc1=4")())
	testutil.NoError(t, routeIs(t, newClient(t), ns.Addr(), "TopicEvil", "<none>")())

	// The real address with an empty topic table, from another connection.
	spoof := newFakeBroker(t, "broker-a", real.addr, "idc1")
	wantCode(t, spoof.register(ns.Addr(), topicTable(nil), 99), protocol.NoPermission)
	// The real address under another name takes neither the address nor the
	// route.
	spoof.name = "broker-z"
	wantCode(t, spoof.register(ns.Addr(), topicTable(map[string]int{"TopicA": 1}), 1), protocol.NoPermission)
	spoof.name = "broker-a"
	wantCode(t, spoof.unregister(ns.Addr()), protocol.NoPermission)
	// A heartbeat from the wrong connection refreshes nothing and says so.
	wantCode(t, spoof.heartbeat(ns.Addr()), protocol.BrokerNotExist)
	testutil.NoError(t, routeIs(t, newClient(t), ns.Addr(), "TopicA", "broker-a@idc1=4")())

	// A replica of the group, in another IDC, from its own connection.
	replica := newFakeBroker(t, "broker-a", "127.0.2.1:10911", "idc2")
	replica.id = 1
	replica.mustRegister(ns.Addr(), map[string]int{"TopicA": 4}, 1)
	wantCode(t, replica.heartbeat(ns.Addr()), protocol.Success)
	zone, addrs = routeGroup(t, ns.Addr(), "TopicA", "broker-a")
	testutil.Equal(t, zone, "idc1", "a replica does not move the group's IDC")
	testutil.Equal(t, fmt.Sprint(addrs), "map[0:127.0.1.1:10911 1:127.0.2.1:10911]", "addresses of broker-a")
	// Its slot is held like the master's.
	forged.id = 1
	wantCode(t, forged.register(ns.Addr(), topicTable(nil), 1), protocol.NoPermission)

	// Once the real broker's connection closes its slot is free again: a
	// restarted broker registers from its new connection.
	closed := ns.connsClosed.Load()
	real.cli.CloseConn(ns.Addr())
	testutil.Eventually(t, 5*time.Second, func() error {
		if ns.connsClosed.Load() == closed {
			return fmt.Errorf("close not processed yet")
		}
		return nil
	})
	restarted := newFakeBroker(t, "broker-a", real.addr, "idc1")
	restarted.mustRegister(ns.Addr(), map[string]int{"TopicA": 4}, 2)
	testutil.NoError(t, routeIs(t, newClient(t), ns.Addr(), "TopicA", "broker-a@idc1=4")())
}

// TestNamesrvDeleteTopicHeals: DELETE_TOPIC_IN_NAMESRV of a topic its
// broker still hosts is undone by the broker's next full registration, and
// the broker is asked for one at its next heartbeat (same data version:
// the registration alone must be enough). System topics cannot be deleted.
func TestNamesrvDeleteTopicHeals(t *testing.T) {
	ns := startNamesrv(t, "127.0.1.1", "idc1", nil)
	c := newClient(t)
	a := newFakeBroker(t, "broker-a", "127.0.1.1:10911", "idc1")
	a.mustRegister(ns.Addr(), map[string]int{"TopicA": 4, protocol.AutoCreateTopicKey: 8}, 1)

	del := protocol.DeleteTopicFromNamesrvRequestHeader{Topic: "TopicA"}
	wantCode(t, invoke(t, c, ns.Addr(), protocol.DeleteTopicInNamesrv, del.Ext(), nil), protocol.Success)
	testutil.NoError(t, routeIs(t, c, ns.Addr(), "TopicA", "<none>")())
	wantCode(t, a.heartbeat(ns.Addr()), protocol.BrokerNotExist)
	a.mustRegister(ns.Addr(), map[string]int{"TopicA": 4, protocol.AutoCreateTopicKey: 8}, 1)
	testutil.NoError(t, routeIs(t, c, ns.Addr(), "TopicA", "broker-a@idc1=4")())
	wantCode(t, a.heartbeat(ns.Addr()), protocol.Success)

	del.Topic = protocol.AutoCreateTopicKey
	wantCode(t, invoke(t, c, ns.Addr(), protocol.DeleteTopicInNamesrv, del.Ext(), nil), protocol.NoPermission)
	testutil.NoError(t, routeIs(t, c, ns.Addr(), protocol.AutoCreateTopicKey, "broker-a@idc1=8")())
	wantCode(t, a.heartbeat(ns.Addr()), protocol.Success)
}

// TestNamesrvRegisterTopicCannotPoisonSystemTopics: REGISTER_TOPIC_IN_NAMESRV
// cannot set TBW102 (or another system topic) to perm 0; an ordinary topic
// it changed is restored by the broker's next full registration.
func TestNamesrvRegisterTopicCannotPoisonSystemTopics(t *testing.T) {
	ns := startNamesrv(t, "127.0.1.1", "idc1", nil)
	c := newClient(t)
	a := newFakeBroker(t, "broker-a", "127.0.1.1:10911", "idc1")
	a.mustRegister(ns.Addr(), map[string]int{"TopicA": 4, protocol.AutoCreateTopicKey: 8}, 1)

	poison := protocol.TopicRouteData{QueueDatas: []protocol.QueueData{
		{BrokerName: "broker-a", ReadQueueNums: 8, WriteQueueNums: 8, Perm: 0},
	}}
	for _, topic := range []string{protocol.AutoCreateTopicKey, protocol.ScheduleTopic, "RMQ_SYS_TRACE_TOPIC"} {
		h := protocol.RegisterTopicRequestHeader{Topic: topic}
		wantCode(t, invoke(t, c, ns.Addr(), protocol.RegisterTopicInNamesrv, h.Ext(), poison.Encode()), protocol.NoPermission)
	}
	r, _ := getRoute(t, c, ns.Addr(), protocol.AutoCreateTopicKey, nil)
	testutil.Equal(t, r.QueueDatas[0].Perm, protocol.PermReadWrite, "perm of TBW102")

	h := protocol.RegisterTopicRequestHeader{Topic: "TopicA"}
	wantCode(t, invoke(t, c, ns.Addr(), protocol.RegisterTopicInNamesrv, h.Ext(), poison.Encode()), protocol.Success)
	r, _ = getRoute(t, c, ns.Addr(), "TopicA", nil)
	testutil.Equal(t, r.QueueDatas[0].Perm, 0, "perm of TopicA after the change")
	a.mustRegister(ns.Addr(), map[string]int{"TopicA": 4, protocol.AutoCreateTopicKey: 8}, 1)
	r, _ = getRoute(t, c, ns.Addr(), "TopicA", nil)
	testutil.Equal(t, r.QueueDatas[0].Perm, protocol.PermReadWrite, "perm of TopicA after the registration")
}

// TestNamesrvSwitchoverSwapsSlots: the master (id 0) and its replica (id 1)
// swap ids in a switchover, in either order, each from its own connection:
// the first request is refused while the other slot is live, the second
// is agreed as a swap and applies both at once, the retry of the first
// changes nothing. A third connection
// that holds nothing the others want still takes nothing.
func TestNamesrvSwitchoverSwapsSlots(t *testing.T) {
	for _, replicaFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("replicaFirst=%v", replicaFirst), func(t *testing.T) {
			ns := startNamesrv(t, "127.0.1.1", "idc1", nil)
			a := newFakeBroker(t, "broker-a", "127.0.1.1:10911", "idc1")
			b := newFakeBroker(t, "broker-a", "127.0.2.1:10911", "idc2")
			b.id = 1
			a.mustRegister(ns.Addr(), map[string]int{"TopicA": 4}, 1)
			b.mustRegister(ns.Addr(), map[string]int{"TopicA": 4}, 1)

			thief := newFakeBroker(t, "broker-a", "127.0.9.1:10911", "idcEVIL")
			thief.id = 7
			thief.mustRegister(ns.Addr(), nil, 1)
			thief.id = 0
			wantCode(t, thief.register(ns.Addr(), topicTable(nil), 1), protocol.NoPermission)

			a.id, b.id = 1, 0
			first, second := a, b
			if replicaFirst {
				first, second = b, a
			}
			wantCode(t, first.register(ns.Addr(), topicTable(map[string]int{"TopicA": 4}), 2), protocol.NoPermission)
			second.mustRegister(ns.Addr(), map[string]int{"TopicA": 4}, 2)
			// The agreed swap applied both registrations at once: no gap.
			_, addrs := routeGroup(t, ns.Addr(), "TopicA", "broker-a")
			testutil.Equal(t, addrs[0], "127.0.2.1:10911", "new master")
			testutil.Equal(t, addrs[1], "127.0.1.1:10911", "old master, now replica 1")
			first.mustRegister(ns.Addr(), map[string]int{"TopicA": 4}, 2)
			_, addrs = routeGroup(t, ns.Addr(), "TopicA", "broker-a")
			testutil.Equal(t, addrs[0]+" "+addrs[1], "127.0.2.1:10911 127.0.1.1:10911", "ids 0 and 1 after the retry")
			wantCode(t, a.heartbeat(ns.Addr()), protocol.Success)
			wantCode(t, b.heartbeat(ns.Addr()), protocol.Success)
			// The thief's earlier claim on id 0 gives it nothing now either.
			wantCode(t, thief.register(ns.Addr(), topicTable(nil), 1), protocol.NoPermission)
		})
	}
}
