package broker

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/testutil"
)

func TestBrokerAdminRequests(t *testing.T) {
	ns := startNamesrv(t, "127.0.1.1:0", "idc1", nil)
	s := startBroker(t, testBrokerOptions(t, "127.0.1.1", "idc1", "broker-adm", ns.Addr()))
	c := newRawClient(t)
	createTopic(t, c, s.Addr(), "AdmTopic", 2)
	for i := range 3 {
		expectCode(t, sendRaw(t, c, s.Addr(), "AdmTopic", 1, nil, []byte{byte(i)}), protocol.Success, "send")
	}
	uh := protocol.UpdateConsumerOffsetRequestHeader{ConsumerGroup: "adm_cg", Topic: "AdmTopic", QueueID: 1, CommitOffset: 2}
	expectCode(t, invoke(t, c, s.Addr(), protocol.UpdateConsumerOffset, uh.Ext(), nil), protocol.Success, "commit")
	expectCode(t, invoke(t, c, s.Addr(), protocol.HeartBeat, nil,
		heartbeatBody("adm@1", "adm_cg", protocol.MessageModelCluster, map[string]string{"AdmTopic": "*"})), protocol.Success, "heartbeat")

	resp := invoke(t, c, s.Addr(), protocol.GetAllTopicConfig, nil, nil)
	expectCode(t, resp, protocol.Success, "GET_ALL_TOPIC_CONFIG")
	var w protocol.TopicConfigSerializeWrapper
	testutil.NoError(t, json.Unmarshal(resp.Body, &w), "topic wrapper")
	testutil.Equal(t, w.TopicConfigTable["AdmTopic"].ReadQueueNums, 2, "AdmTopic queues")
	testutil.True(t, w.DataVersion.Counter > 0, "data version")

	resp = invoke(t, c, s.Addr(), protocol.GetTopicStatsInfo, (&protocol.TopicRequestHeader{Topic: "AdmTopic"}).Ext(), nil)
	expectCode(t, resp, protocol.Success, "GET_TOPIC_STATS_INFO")
	stats, err := protocol.DecodeTopicStatsTable(resp.Body)
	testutil.NoError(t, err, "topic stats body")
	q1 := stats.OffsetTable[protocol.MessageQueue{Topic: "AdmTopic", BrokerName: "broker-adm", QueueID: 1}]
	testutil.Equal(t, q1.MaxOffset, int64(3), "queue 1 max")
	testutil.True(t, q1.LastUpdateTimestamp > time.Now().Add(-time.Minute).UnixMilli(), "queue 1 last update")

	resp = invoke(t, c, s.Addr(), protocol.GetConsumeStats, (&protocol.GetConsumeStatsRequestHeader{ConsumerGroup: "adm_cg"}).Ext(), nil)
	expectCode(t, resp, protocol.Success, "GET_CONSUME_STATS")
	cs, err := protocol.DecodeConsumeStats(resp.Body)
	testutil.NoError(t, err, "consume stats body")
	ow := cs.OffsetTable[protocol.MessageQueue{Topic: "AdmTopic", BrokerName: "broker-adm", QueueID: 1}]
	testutil.Equal(t, ow.BrokerOffset, int64(3), "broker offset")
	testutil.Equal(t, ow.ConsumerOffset, int64(2), "consumer offset")

	resp = invoke(t, c, s.Addr(), protocol.GetAllConsumerOffset, nil, nil)
	expectCode(t, resp, protocol.Success, "GET_ALL_CONSUMER_OFFSET")
	var ow2 protocol.ConsumerOffsetWrapper
	testutil.NoError(t, json.Unmarshal(resp.Body, &ow2), "offset wrapper")
	testutil.Equal(t, ow2.OffsetTable["AdmTopic@adm_cg"][1], int64(2), "all offsets")

	resp = invoke(t, c, s.Addr(), protocol.GetAllSubscriptionGroupConfig, nil, nil)
	expectCode(t, resp, protocol.Success, "GET_ALL_SUBSCRIPTIONGROUP_CONFIG")
	var gw protocol.SubscriptionGroupWrapper
	testutil.NoError(t, json.Unmarshal(resp.Body, &gw), "group wrapper")
	testutil.True(t, gw.SubscriptionGroupTable["adm_cg"].ConsumeEnable, "group auto-created")

	resp = invoke(t, c, s.Addr(), protocol.GetBrokerRuntimeInfo, nil, nil)
	expectCode(t, resp, protocol.Success, "GET_BROKER_RUNTIME_INFO")
	var kv protocol.KVTable
	testutil.NoError(t, json.Unmarshal(resp.Body, &kv), "runtime info")
	testutil.Equal(t, kv.Table["brokerName"], "broker-adm", "brokerName")
	testutil.Equal(t, kv.Table["idc"], "idc1", "idc")
	testutil.Equal(t, kv.Table["msgPutTotalSinceBoot"], "3", "puts")

	for _, q := range []protocol.RequestCode{protocol.GetMinOffset, protocol.GetMaxOffset, protocol.GetEarliestMsgStoretime} {
		expectCode(t, invoke(t, c, s.Addr(), q, (&protocol.QueueRequestHeader{Topic: "AdmTopic", QueueID: 1}).Ext(), nil), protocol.Success, q.String())
	}
	sh := protocol.SearchOffsetRequestHeader{Topic: "AdmTopic", QueueID: 1, Timestamp: time.Now().Add(time.Hour).UnixMilli()}
	resp = invoke(t, c, s.Addr(), protocol.SearchOffsetByTimestamp, sh.Ext(), nil)
	expectCode(t, resp, protocol.Success, "SEARCH_OFFSET_BY_TIMESTAMP")

	// Deleting a topic removes it here and, at once, from the name server.
	waitRoute(t, c, ns.Addr(), "AdmTopic", s)
	expectCode(t, invoke(t, c, s.Addr(), protocol.DeleteTopicInBroker, (&protocol.TopicRequestHeader{Topic: "AdmTopic"}).Ext(), nil),
		protocol.Success, "DELETE_TOPIC_IN_BROKER")
	_, ok := s.topics.get("AdmTopic")
	testutil.True(t, !ok, "topic deleted")
	expectCode(t, pullRaw(t, c, s.Addr(), "adm_cg", "AdmTopic", 1, 0, "*", 1), protocol.TopicNotExist, "pull a deleted topic")
}
