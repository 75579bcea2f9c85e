package namesrv

import (
	"testing"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/testutil"
)

// TestNamesrvGroupSpanningIDCs: a broker group with its master in idc1 and
// its replica in idc2 keeps each address's IDC in brokerAddrZones; the
// group's zoneName is the master's IDC, and the replica's once the master
// is gone, so zone filtering and the SDK send readers to the replica's IDC.
func TestNamesrvGroupSpanningIDCs(t *testing.T) {
	ns := startNamesrv(t, "127.0.1.1", "idc1", nil)
	master := newFakeBroker(t, "broker-a", "127.0.1.1:10911", "idc1")
	replica := newFakeBroker(t, "broker-a", "127.0.2.1:10911", "idc2")
	replica.id = 1
	replica.mustRegister(ns.Addr(), map[string]int{"TopicA": 4}, 1)
	master.mustRegister(ns.Addr(), map[string]int{"TopicA": 4}, 1)

	c := newClient(t)
	r, resp := getRoute(t, c, ns.Addr(), "TopicA", nil)
	if r == nil {
		t.Fatalf("no route: %d %s", resp.Code, resp.Remark)
	}
	bd := r.BrokerDatas[0]
	testutil.Equal(t, bd.ZoneName, "idc1", "zoneName with the master present")
	testutil.Equal(t, bd.AddrZone(0), "idc1", "master's IDC")
	testutil.Equal(t, bd.AddrZone(1), "idc2", "replica's IDC")

	wantCode(t, master.unregister(ns.Addr()), 0)
	r, resp = getRoute(t, c, ns.Addr(), "TopicA", nil)
	if r == nil {
		t.Fatalf("the replica keeps the route readable, got %d %s", resp.Code, resp.Remark)
	}
	// The replica acts as master for readers: id 0, read-only queues.
	bd = r.BrokerDatas[0]
	testutil.Equal(t, bd.MasterAddr(), "127.0.2.1:10911", "the replica listed as acting master")
	testutil.Equal(t, len(bd.BrokerAddrs), 1, "addresses")
	testutil.True(t, bd.EnableActingMaster, "enableActingMaster")
	testutil.Equal(t, bd.ZoneName, "idc2", "zoneName follows the remaining replica")
	testutil.Equal(t, bd.AddrZone(0), "idc2", "acting master's IDC")
	testutil.Equal(t, len(r.QueueDatas), 1, "queue data kept while a replica serves reads")
	testutil.True(t, !protocol.Writeable(r.QueueDatas[0].Perm) && protocol.Readable(r.QueueDatas[0].Perm),
		"the acting master's queues are read-only")

	// The cluster view (admin) shows the truth.
	resp = invoke(t, c, ns.Addr(), protocol.GetBrokerClusterInfo, nil, nil)
	ci, err := protocol.DecodeClusterLiveInfo(resp.Body)
	testutil.NoError(t, err)
	truth := ci.BrokerAddrTable["broker-a"]
	testutil.Equal(t, truth.MasterAddr(), "", "no master in the cluster info")
}
