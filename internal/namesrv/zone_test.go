package namesrv

import (
	"testing"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/testutil"
)

// TestNamesrvZoneMode: a zone-mode query gets its own IDC's brokers only,
// and the full route when its IDC has no writable broker for the topic
// (where stock RocketMQ would return a route without a usable broker).
func TestNamesrvZoneMode(t *testing.T) {
	ns := startNamesrv(t, "127.0.1.1", "idc1", nil)
	c := newClient(t)
	a := newFakeBroker(t, "broker-a", "127.0.1.1:10911", "idc1")
	a2 := newFakeBroker(t, "broker-a2", "127.0.1.1:10912", "IDC1")
	b := newFakeBroker(t, "broker-b", "127.0.2.1:10911", "idc2")
	bSlave := newFakeBroker(t, "broker-b", "127.0.2.1:10921", "idc2")
	bSlave.id = 1
	a.mustRegister(ns.Addr(), map[string]int{"TopicA": 4, "TopicRO": 2, "TopicOnlyB": 0}, 1)
	a2.mustRegister(ns.Addr(), map[string]int{"TopicA": 1}, 1)
	b.mustRegister(ns.Addr(), map[string]int{"TopicA": 8, "TopicRO": 2, "TopicOnlyB": 3}, 1)
	bSlave.mustRegister(ns.Addr(), nil, 1)
	// TopicRO is read-only on broker-b (perm 4): idc2 cannot send to it.
	tables := topicTable(map[string]int{"TopicA": 8, "TopicRO": 2, "TopicOnlyB": 3})
	ro := tables["TopicRO"]
	ro.Perm = protocol.PermRead
	tables["TopicRO"] = ro
	wantCode(t, b.register(ns.Addr(), tables, 2), protocol.Success)

	zone := func(name string) map[string]string {
		return map[string]string{protocol.ExtZoneMode: "true", protocol.ExtZoneName: name}
	}
	cases := []struct {
		name, topic string
		ext         map[string]string
		want        string
	}{
		{"no zone mode", "TopicA", nil, "broker-a@idc1=4 broker-a2@IDC1=1 broker-b@idc2=8"},
		{"zone name without zone mode", "TopicA", map[string]string{protocol.ExtZoneName: "idc1"}, "broker-a@idc1=4 broker-a2@IDC1=1 broker-b@idc2=8"},
		{"zone mode false", "TopicA", map[string]string{protocol.ExtZoneMode: "false", protocol.ExtZoneName: "idc1"}, "broker-a@idc1=4 broker-a2@IDC1=1 broker-b@idc2=8"},
		{"zone mode without zone name", "TopicA", map[string]string{protocol.ExtZoneMode: "true"}, "broker-a@idc1=4 broker-a2@IDC1=1 broker-b@idc2=8"},
		{"idc1, zone names compared case-insensitively", "TopicA", zone("idc1"), "broker-a@idc1=4 broker-a2@IDC1=1"},
		{"Idc1", "TopicA", zone("Idc1"), "broker-a@idc1=4 broker-a2@IDC1=1"},
		{"idc2", "TopicA", zone("idc2"), "broker-b@idc2=8"},
		{"fallback: idc3 has no broker", "TopicA", zone("idc3"), "broker-a@idc1=4 broker-a2@IDC1=1 broker-b@idc2=8"},
		{"fallback: idc2's queues are read-only", "TopicRO", zone("idc2"), "broker-a@idc1=2 broker-b@idc2=2"},
		{"idc1 keeps its writable queues", "TopicRO", zone("idc1"), "broker-a@idc1=2"},
		{"fallback: idc1 has no writable queue", "TopicOnlyB", zone("idc1"), "broker-a@idc1=0 broker-b@idc2=3"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, resp := getRoute(t, c, ns.Addr(), tc.topic, tc.ext)
			if r == nil {
				t.Fatalf("no route: %d %s", resp.Code, resp.Remark)
			}
			testutil.Equal(t, routeBrokers(r), tc.want, "route")
			testutil.Equal(t, len(r.BrokerDatas), len(r.QueueDatas), "one BrokerData per QueueData")
		})
	}

	// broker-b loses its master: idc2 has no broker a producer can use, so
	// idc2's zone query falls back to the full route.
	wantCode(t, b.unregister(ns.Addr()), protocol.Success)
	r, _ := getRoute(t, c, ns.Addr(), "TopicA", zone("idc2"))
	testutil.Equal(t, routeBrokers(r), "broker-a@idc1=4 broker-a2@IDC1=1 broker-b@idc2=8", "masterless idc2")
	// Its slave acts as master for readers, with read-only queues.
	testutil.Equal(t, r.BrokerDatas[2].MasterAddr(), "127.0.2.1:10921", "broker-b's slave acts as master")
	testutil.True(t, r.BrokerDatas[2].EnableActingMaster, "enableActingMaster")
	testutil.True(t, !protocol.Writeable(r.QueueDatas[2].Perm), "the acting master's queues are read-only")
}

func TestNamesrvFilterByZoneKeepsFilterServers(t *testing.T) {
	r := &protocol.TopicRouteData{
		OrderTopicConf: "broker-a:1",
		QueueDatas: []protocol.QueueData{
			{BrokerName: "broker-a", WriteQueueNums: 1, ReadQueueNums: 1, Perm: 6},
			{BrokerName: "broker-b", WriteQueueNums: 1, ReadQueueNums: 1, Perm: 6},
		},
		BrokerDatas: []protocol.BrokerData{
			{BrokerName: "broker-a", ZoneName: "idc1", BrokerAddrs: map[int64]string{0: "a:1"}},
			{BrokerName: "broker-b", ZoneName: "idc2", BrokerAddrs: map[int64]string{0: "b:1"}},
		},
		FilterServerTable: map[string][]string{"a:1": {"fa"}, "b:1": {"fb"}},
	}
	out, narrowed := filterByZone(r, "idc2")
	testutil.True(t, narrowed, "narrowed")
	testutil.Equal(t, len(out.FilterServerTable), 1, "filter servers of kept brokers only")
	testutil.Equal(t, out.FilterServerTable["b:1"][0], "fb", "kept filter server")
	testutil.Equal(t, out.OrderTopicConf, "broker-a:1", "orderTopicConf is left alone")
	testutil.Equal(t, len(r.BrokerDatas), 2, "the input route is not modified")
}
