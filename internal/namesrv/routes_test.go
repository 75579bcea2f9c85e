package namesrv

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"encoding/json"
	"hash/crc32"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/testutil"
)

// TestNamesrvRegisterTwoIDCs: brokers of idc1 and idc2 register with the
// name servers of both IDCs; every route, the cluster info and the topic
// lists carry each broker's IDC.
func TestNamesrvRegisterTwoIDCs(t *testing.T) {
	ns1 := startNamesrv(t, "127.0.1.1", "idc1", nil)
	ns2 := startNamesrv(t, "127.0.2.1", "idc2", nil)
	a := newFakeBroker(t, "broker-a", "127.0.1.1:10911", "idc1")
	aSlave := newFakeBroker(t, "broker-a", "127.0.1.1:10921", "idc1")
	aSlave.id = 1
	b := newFakeBroker(t, "broker-b", "127.0.2.1:10911", "idc2")
	for _, ns := range []string{ns1.Addr(), ns2.Addr()} {
		resp := a.mustRegister(ns, map[string]int{"TopicA": 4, "TopicB": 2}, 1)
		if len(resp.ExtFields["masterAddr"]) != 0 {
			t.Fatalf("a master is told no master address: %v", resp.ExtFields)
		}
		resp = aSlave.mustRegister(ns, map[string]int{"TopicA": 4, "TopicB": 2}, 1)
		var rh protocol.RegisterBrokerResponseHeader
		testutil.NoError(t, rh.SetExt(resp.ExtFields))
		testutil.Equal(t, rh.MasterAddr, "127.0.1.1:10911", "slave's masterAddr")
		testutil.Equal(t, rh.HAServerAddr, a.ha, "slave's haServerAddr")
		b.mustRegister(ns, map[string]int{"TopicA": 8}, 1)
	}

	c := newClient(t)
	for _, ns := range []string{ns1.Addr(), ns2.Addr()} {
		r, resp := getRoute(t, c, ns, "TopicA", nil)
		if r == nil {
			t.Fatalf("no route from %s: %d %s", ns, resp.Code, resp.Remark)
		}
		testutil.Equal(t, routeBrokers(r), "broker-a@idc1=4 broker-b@idc2=8", "route from "+ns)
		want := []protocol.BrokerData{
			{Cluster: "DefaultCluster", BrokerName: "broker-a", ZoneName: "idc1",
				BrokerAddrs:     map[int64]string{0: "127.0.1.1:10911", 1: "127.0.1.1:10921"},
				BrokerAddrZones: map[int64]string{0: "idc1", 1: "idc1"}},
			{Cluster: "DefaultCluster", BrokerName: "broker-b", ZoneName: "idc2",
				BrokerAddrs:     map[int64]string{0: "127.0.2.1:10911"},
				BrokerAddrZones: map[int64]string{0: "idc2"}},
		}
		if !reflect.DeepEqual(r.BrokerDatas, want) {
			t.Fatalf("brokerDatas from %s:\n got %+v\nwant %+v", ns, r.BrokerDatas, want)
		}
		// The Go client reads brokerAddrs as raw text: compact, no spaces.
		if !bytes.Contains(resp.Body, []byte(`"brokerAddrs":{"0":"127.0.1.1:10911","1":"127.0.1.1:10921"}`)) ||
			!bytes.Contains(resp.Body, []byte(`"zoneName":"idc2"`)) || !bytes.Contains(resp.Body, []byte(`"queueDatas":[`)) {
			t.Fatalf("route body: %s", resp.Body)
		}
		r, _ = getRoute(t, c, ns, "TopicB", nil)
		testutil.Equal(t, routeBrokers(r), "broker-a@idc1=2", "TopicB")

		_, resp = getRoute(t, c, ns, "NoSuchTopic", nil)
		wantCode(t, resp, protocol.TopicNotExist)
		testutil.Equal(t, resp.Remark, "No topic route info in name server for the topic: NoSuchTopic", "remark")

		resp = invoke(t, c, ns, protocol.GetBrokerClusterInfo, nil, nil)
		wantCode(t, resp, protocol.Success)
		ci, err := protocol.DecodeClusterLiveInfo(resp.Body)
		testutil.NoError(t, err)
		testutil.Equal(t, strings.Join(ci.ClusterAddrTable["DefaultCluster"], ","), "broker-a,broker-b", "clusterAddrTable")
		testutil.Equal(t, ci.BrokerAddrTable["broker-b"].ZoneName, "idc2", "cluster info zone")
		testutil.Equal(t, len(ci.BrokerAddrTable["broker-a"].BrokerAddrs), 2, "broker-a addresses")
		testutil.Equal(t, len(ci.BrokerLiveTable), 3, "live addresses")
		live := ci.BrokerLiveTable["127.0.2.1:10911"]
		testutil.True(t, time.Since(time.UnixMilli(live.LastUpdateTimestamp)) < time.Minute, "last update is recent")
		testutil.Equal(t, live.HeartbeatTimeoutMillis, int64(3000), "default expiry")
		testutil.Equal(t, live.DataVersion.Counter, int64(1), "data version")

		resp = invoke(t, c, ns, protocol.GetAllTopicListFromNameServer, nil, nil)
		var tl protocol.TopicList
		testutil.NoError(t, json.Unmarshal(resp.Body, &tl))
		testutil.Equal(t, strings.Join(tl.TopicList, ","), "TopicA,TopicB", "topic list")

		resp = invoke(t, c, ns, protocol.GetTopicsByCluster, (&protocol.GetTopicsByClusterRequestHeader{Cluster: "DefaultCluster"}).Ext(), nil)
		testutil.NoError(t, json.Unmarshal(resp.Body, &tl))
		testutil.Equal(t, strings.Join(tl.TopicList, ","), "TopicA,TopicB", "topics of DefaultCluster")
		resp = invoke(t, c, ns, protocol.GetTopicsByCluster, (&protocol.GetTopicsByClusterRequestHeader{Cluster: "Other"}).Ext(), nil)
		testutil.NoError(t, json.Unmarshal(resp.Body, &tl))
		testutil.Equal(t, len(tl.TopicList), 0, "topics of an unknown cluster")
	}
}

// TestNamesrvRegisterDataVersion: queue data comes from the master only,
// and only when its data version changes.
func TestNamesrvRegisterDataVersion(t *testing.T) {
	ns := startNamesrv(t, "127.0.1.1", "idc1", nil)
	c := newClient(t)
	a := newFakeBroker(t, "broker-a", "127.0.1.1:10911", "idc1")
	a.mustRegister(ns.Addr(), map[string]int{"TopicA": 4}, 1)
	testutil.NoError(t, routeIs(t, c, ns.Addr(), "TopicA", "broker-a@idc1=4")())

	// Same version, different table: a full registration is the truth
	// whatever its version (that is what heals a poisoned route).
	a.mustRegister(ns.Addr(), map[string]int{"TopicA": 16, "TopicC": 1}, 1)
	testutil.NoError(t, routeIs(t, c, ns.Addr(), "TopicA", "broker-a@idc1=16")())
	testutil.NoError(t, routeIs(t, c, ns.Addr(), "TopicC", "broker-a@idc1=1")())

	// A slave's table is never loaded.
	slave := newFakeBroker(t, "broker-a", "127.0.1.1:10921", "idc1")
	slave.id = 1
	slave.mustRegister(ns.Addr(), map[string]int{"TopicS": 1}, 7)
	testutil.NoError(t, routeIs(t, c, ns.Addr(), "TopicS", "<none>")())

	// New version: the table is reloaded, and topics the master dropped go.
	a.mustRegister(ns.Addr(), map[string]int{"TopicB": 2}, 2)
	testutil.NoError(t, routeIs(t, c, ns.Addr(), "TopicB", "broker-a@idc1=2")())
	testutil.NoError(t, routeIs(t, c, ns.Addr(), "TopicA", "<none>")())

	// QUERY_DATA_VERSION tells the broker whether a full registration is due.
	q := protocol.QueryDataVersionRequestHeader{BrokerName: "broker-a", BrokerAddr: a.addr, ClusterName: a.cluster}
	dv, _ := json.Marshal(protocol.DataVersion{Counter: 2, Timestamp: 1700000000002})
	resp := invoke(t, c, ns.Addr(), protocol.QueryDataVersion, q.Ext(), dv)
	wantCode(t, resp, protocol.Success)
	testutil.Equal(t, resp.ExtFields["changed"], "false", "same version")
	var have protocol.DataVersion
	testutil.NoError(t, json.Unmarshal(resp.Body, &have))
	testutil.Equal(t, have.Counter, int64(2), "name server's version")
	dv, _ = json.Marshal(protocol.DataVersion{Counter: 3})
	resp = invoke(t, c, ns.Addr(), protocol.QueryDataVersion, q.Ext(), dv)
	testutil.Equal(t, resp.ExtFields["changed"], "true", "newer version")
	q.BrokerAddr = "127.0.9.9:1"
	resp = invoke(t, c, ns.Addr(), protocol.QueryDataVersion, q.Ext(), dv)
	testutil.Equal(t, resp.ExtFields["changed"], "true", "unknown broker")
	testutil.Equal(t, len(resp.Body), 0, "no version for an unknown broker")
}

// compressedBody builds RocketMQ's compressed registration by hand.
func compressedBody(_ *testing.T, dv protocol.DataVersion, lines []string, filterServers string, withMappings bool) []byte {
	var raw bytes.Buffer
	item := func(b []byte) {
		binary.Write(&raw, binary.BigEndian, int32(len(b)))
		raw.Write(b)
	}
	dvb, _ := json.Marshal(dv)
	item(dvb)
	binary.Write(&raw, binary.BigEndian, int32(len(lines)))
	for _, l := range lines {
		item([]byte(l))
	}
	item([]byte(filterServers))
	if withMappings {
		binary.Write(&raw, binary.BigEndian, int32(1))
		item([]byte(`{"topic":"TopicZ","totalQueues":1,"bname":"broker-a","epoch":0,"dirty":false,"currIdMap":{0:0}}`))
	}
	var out bytes.Buffer
	zw := zlib.NewWriter(&out)
	zw.Write(raw.Bytes())
	zw.Close()
	return out.Bytes()
}

// TestNamesrvRegisterBodyFormats: JSON, an old broker's bare wrapper, the
// compressed format, the checksum and bad input.
func TestNamesrvRegisterBodyFormats(t *testing.T) {
	ns := startNamesrv(t, "127.0.1.1", "idc1", nil)
	c := newClient(t)
	send := func(b *fakeBroker, h *protocol.RegisterBrokerRequestHeader, body []byte) *protocol.ResponseCode {
		resp := invoke(t, b.cli, ns.Addr(), protocol.RegisterBroker, h.Ext(), body)
		code := protocol.ResponseCode(resp.Code)
		if code != protocol.Success {
			t.Logf("remark: %s", resp.Remark)
		}
		return &code
	}

	t.Run("bare wrapper from an old broker", func(t *testing.T) {
		b := newFakeBroker(t, "broker-old", "127.0.1.1:20911", "")
		body, _ := json.Marshal(protocol.TopicConfigSerializeWrapper{
			TopicConfigTable: topicTable(map[string]int{"TopicOld": 3}),
			DataVersion:      protocol.DataVersion{Counter: 1},
		})
		testutil.Equal(t, *send(b, b.header(), body), protocol.Success, "register")
		testutil.NoError(t, routeIs(t, c, ns.Addr(), "TopicOld", "broker-old@=3")())
		r, resp := getRoute(t, c, ns.Addr(), "TopicOld", nil)
		testutil.True(t, !bytes.Contains(resp.Body, []byte("zoneName")), "no zoneName key for a broker without a zone")
		testutil.Equal(t, r.BrokerDatas[0].ZoneName, "", "zone")
	})

	t.Run("fastjson body with unquoted integer keys", func(t *testing.T) {
		b := newFakeBroker(t, "broker-java", "127.0.1.1:21911", "idc1")
		body := []byte(`{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":3,"stateVersion":0,"timestamp":1700000000000},` +
			`"topicConfigTable":{"TopicJ":{"attributes":{},"order":false,"perm":6,"readQueueNums":8,"topicFilterType":"SINGLE_TAG","topicName":"TopicJ","topicSysFlag":0,"writeQueueNums":8}},` +
			`"topicQueueMappingInfoMap":{},"topicQueueMappingDetailMap":{"TopicJ":{"hostedQueues":{0:[]}}}}}`)
		h := b.header()
		h.BodyCRC32 = int32(crc32.ChecksumIEEE(body) & 0x7FFFFFFF)
		testutil.Equal(t, *send(b, h, body), protocol.Success, "register")
		testutil.NoError(t, routeIs(t, c, ns.Addr(), "TopicJ", "broker-java@idc1=8")())
	})

	t.Run("compressed", func(t *testing.T) {
		b := newFakeBroker(t, "broker-zip", "127.0.1.1:22911", "idc1")
		h := b.header()
		h.Compressed = true
		body := compressedBody(t, protocol.DataVersion{Counter: 5},
			[]string{"TopicZ 4 2 6 SINGLE_TAG {\"+message.type\":\"NORMAL\"}", "TopicY 1 1 4 SINGLE_TAG "}, `["127.0.1.1:30000"]`, true)
		h.BodyCRC32 = int32(crc32.ChecksumIEEE(body) & 0x7FFFFFFF)
		testutil.Equal(t, *send(b, h, body), protocol.Success, "register")
		testutil.NoError(t, routeIs(t, c, ns.Addr(), "TopicZ", "broker-zip@idc1=2")())
		r, _ := getRoute(t, c, ns.Addr(), "TopicY", nil)
		testutil.Equal(t, r.QueueDatas[0].Perm, 4, "perm")
		testutil.Equal(t, strings.Join(r.FilterServerTable["127.0.1.1:22911"], ","), "127.0.1.1:30000", "filter servers")

		// A RocketMQ 4 broker's compressed body ends after the filter servers.
		b4 := newFakeBroker(t, "broker-zip4", "127.0.1.1:23911", "idc1")
		h = b4.header()
		h.Compressed = true
		testutil.Equal(t, *send(b4, h, compressedBody(t, protocol.DataVersion{Counter: 1}, []string{"TopicV4 2 2 6 SINGLE_TAG"}, `[]`, false)),
			protocol.Success, "register v4")
		testutil.NoError(t, routeIs(t, c, ns.Addr(), "TopicV4", "broker-zip4@idc1=2")())

		testutil.Equal(t, *send(b4, h, []byte("not zlib")), protocol.InvalidParameter, "garbage compressed body")
		testutil.Equal(t, *send(b4, h, compressedBody(t, protocol.DataVersion{}, []string{"TopicV4 x 2 6 SINGLE_TAG"}, `[]`, false)),
			protocol.InvalidParameter, "bad topic line")
	})

	t.Run("checksum", func(t *testing.T) {
		b := newFakeBroker(t, "broker-crc", "127.0.1.1:24911", "idc1")
		body := registerBody(topicTable(map[string]int{"TopicCRC": 1}), 1)
		h := b.header()
		h.BodyCRC32 = int32(crc32.ChecksumIEEE(body)&0x7FFFFFFF) ^ 1
		resp := invoke(t, b.cli, ns.Addr(), protocol.RegisterBroker, h.Ext(), body)
		wantCode(t, resp, protocol.SystemError)
		testutil.Equal(t, resp.Remark, "crc32 not match", "remark")
		testutil.NoError(t, routeIs(t, c, ns.Addr(), "TopicCRC", "<none>")())
		h.BodyCRC32 = 0 // 0 = not checked
		testutil.Equal(t, *send(b, h, body), protocol.Success, "unchecked")
	})

	t.Run("bad input", func(t *testing.T) {
		b := newFakeBroker(t, "broker-bad", "127.0.1.1:25911", "idc1")
		testutil.Equal(t, *send(b, b.header(), []byte("{not json")), protocol.InvalidParameter, "bad JSON")
		resp := invoke(t, b.cli, ns.Addr(), protocol.RegisterBroker, map[string]string{"brokerName": "x"}, nil)
		wantCode(t, resp, protocol.InvalidParameter)
		testutil.True(t, strings.Contains(resp.Remark, "brokerAddr"), "remark names the field: "+resp.Remark)
		h := b.header()
		h.BrokerID = -1
		testutil.Equal(t, *send(b, h, nil), protocol.InvalidParameter, "negative id")
		h = b.header()
		h.BrokerName = ""
		testutil.Equal(t, *send(b, h, nil), protocol.InvalidParameter, "empty name")
		// No body: registered for liveness, no topics.
		testutil.Equal(t, *send(b, b.header(), nil), protocol.Success, "no body")
	})
}

// TestNamesrvUnregisterAndDeleteTopic: a clean shutdown leaves the routes
// at once; DELETE_TOPIC_IN_NAMESRV and REGISTER_TOPIC_IN_NAMESRV edit them.
func TestNamesrvUnregisterAndDeleteTopic(t *testing.T) {
	ns := startNamesrv(t, "127.0.1.1", "idc1", nil)
	c := newClient(t)
	a := newFakeBroker(t, "broker-a", "127.0.1.1:10911", "idc1")
	aSlave := newFakeBroker(t, "broker-a", "127.0.1.1:10921", "idc1")
	aSlave.id = 1
	b := newFakeBroker(t, "broker-b", "127.0.2.1:10911", "idc2")
	b.cluster = "OtherCluster"
	a.mustRegister(ns.Addr(), map[string]int{"TopicA": 4, "TopicB": 1}, 1)
	aSlave.mustRegister(ns.Addr(), nil, 1)
	b.mustRegister(ns.Addr(), map[string]int{"TopicA": 2}, 1)

	wantCode(t, aSlave.unregister(ns.Addr()), protocol.Success)
	r, _ := getRoute(t, c, ns.Addr(), "TopicA", nil)
	testutil.Equal(t, len(r.BrokerDatas[0].BrokerAddrs), 1, "slave address gone, master stays")

	// Delete TopicA on OtherCluster only, then everywhere.
	del := protocol.DeleteTopicFromNamesrvRequestHeader{Topic: "TopicA", ClusterName: "OtherCluster"}
	wantCode(t, invoke(t, c, ns.Addr(), protocol.DeleteTopicInNamesrv, del.Ext(), nil), protocol.Success)
	testutil.NoError(t, routeIs(t, c, ns.Addr(), "TopicA", "broker-a@idc1=4")())
	del.ClusterName = ""
	wantCode(t, invoke(t, c, ns.Addr(), protocol.DeleteTopicInNamesrv, del.Ext(), nil), protocol.Success)
	testutil.NoError(t, routeIs(t, c, ns.Addr(), "TopicA", "<none>")())

	// Register a topic on both brokers by hand.
	route := protocol.TopicRouteData{QueueDatas: []protocol.QueueData{
		{BrokerName: "broker-a", ReadQueueNums: 3, WriteQueueNums: 3, Perm: 6},
		{BrokerName: "broker-b", ReadQueueNums: 5, WriteQueueNums: 5, Perm: 6},
	}}
	reg := protocol.RegisterTopicRequestHeader{Topic: "TopicR"}
	wantCode(t, invoke(t, c, ns.Addr(), protocol.RegisterTopicInNamesrv, reg.Ext(), route.Encode()), protocol.Success)
	testutil.NoError(t, routeIs(t, c, ns.Addr(), "TopicR", "broker-a@idc1=3 broker-b@idc2=5")())
	route.QueueDatas = append(route.QueueDatas, protocol.QueueData{BrokerName: "broker-ghost", WriteQueueNums: 1})
	reg.Topic = "TopicGhost"
	resp := invoke(t, c, ns.Addr(), protocol.RegisterTopicInNamesrv, reg.Ext(), route.Encode())
	wantCode(t, resp, protocol.InvalidParameter)
	testutil.NoError(t, routeIs(t, c, ns.Addr(), "TopicGhost", "<none>")())
	reg.Topic = "bad topic!"
	wantCode(t, invoke(t, c, ns.Addr(), protocol.RegisterTopicInNamesrv, reg.Ext(), route.Encode()), protocol.InvalidParameter)

	// The master unregisters: its queues and its BrokerData go.
	wantCode(t, a.unregister(ns.Addr()), protocol.Success)
	testutil.NoError(t, routeIs(t, c, ns.Addr(), "TopicB", "<none>")())
	testutil.NoError(t, routeIs(t, c, ns.Addr(), "TopicR", "broker-b@idc2=5")())
	resp = invoke(t, c, ns.Addr(), protocol.GetBrokerClusterInfo, nil, nil)
	ci, err := protocol.DecodeClusterLiveInfo(resp.Body)
	testutil.NoError(t, err)
	_, stillThere := ci.BrokerAddrTable["broker-a"]
	testutil.True(t, !stillThere, "broker-a left the cluster info")
	_, clusterThere := ci.ClusterAddrTable["DefaultCluster"]
	testutil.True(t, !clusterThere, "the emptied cluster left the cluster info")
	// Unregistering again, or an unknown broker, is harmless.
	wantCode(t, a.unregister(ns.Addr()), protocol.Success)
}

// TestNamesrvUnknownRequestCode: codes the name server does not serve get
// REQUEST_CODE_NOT_SUPPORTED and the connection stays usable.
func TestNamesrvUnknownRequestCode(t *testing.T) {
	ns := startNamesrv(t, "127.0.1.1", "idc1", nil)
	c := newClient(t)
	wantCode(t, invoke(t, c, ns.Addr(), protocol.SendMessage, nil, nil), protocol.RequestCodeNotSupported)
	_, resp := getRoute(t, c, ns.Addr(), "T", nil)
	wantCode(t, resp, protocol.TopicNotExist)
}

func TestNamesrvParseTopicConfigLine(t *testing.T) {
	tc, err := parseTopicConfigLine(`T 8 4 6 SINGLE_TAG {"a":"b c"}`)
	testutil.NoError(t, err)
	testutil.Equal(t, tc.TopicName+"/"+tc.TopicFilterType+"/"+tc.Attributes["a"], "T/SINGLE_TAG/b c", "fields")
	testutil.Equal(t, tc.ReadQueueNums*100+tc.WriteQueueNums*10+tc.Perm, 846, "numbers")
	for _, bad := range []string{"", "T 1 2 6", "T 1 -2 6 SINGLE_TAG", " 1 1 6 SINGLE_TAG"} {
		if _, err := parseTopicConfigLine(bad); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}
