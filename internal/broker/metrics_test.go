package broker

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/testutil"
)

// heartbeatAs registers c's connection as a producer and consumer whose
// client id carries clientIDC.
func heartbeatAs(t *testing.T, c *remoting.Client, addr, clientIDC, group string) {
	t.Helper()
	hb := protocol.HeartbeatData{
		ClientID:        "127.0.0.1@" + instanceName("metrics") + "@idc=" + clientIDC,
		ProducerDataSet: []protocol.ProducerData{{GroupName: "metrics_pg"}},
		ConsumerDataSet: []protocol.ConsumerData{{GroupName: group, ConsumeType: protocol.ConsumePassively,
			MessageModel: "CLUSTERING", ConsumeFromWhere: "CONSUME_FROM_FIRST_OFFSET"}},
	}
	body, err := json.Marshal(hb)
	testutil.NoError(t, err, "heartbeat body")
	expectCode(t, invoke(t, c, addr, protocol.HeartBeat, nil, body), protocol.Success, "heartbeat as "+clientIDC)
}

func TestBrokerMetricsAfterTraffic(t *testing.T) {
	opts := testBrokerOptions(t, "127.0.1.1", "idc1", "broker-m")
	opts.MetricsListen = "127.0.1.1:0"
	s := startBroker(t, opts)
	testutil.True(t, s.MetricsAddr() != "", "metrics address reported")
	const topic, group = "MetricsTopic", "metrics_cg"

	local, foreign := newRawClient(t), newRawClient(t)
	heartbeatAs(t, local, s.Addr(), "idc1", group)
	heartbeatAs(t, foreign, s.Addr(), "idc2", group)
	createTopic(t, local, s.Addr(), topic, 1)

	// idc2's producer sends three messages here: cross-IDC traffic.
	bodies := []string{"a", "bb", "ccc"}
	for _, b := range bodies {
		expectCode(t, sendRaw(t, foreign, s.Addr(), topic, 0, nil, []byte(b)), protocol.Success, "send")
	}
	// idc1's consumer reads them, then idc2's takes the queue over.
	for _, c := range []*remoting.Client{local, foreign} {
		resp := pullRaw(t, c, s.Addr(), group, topic, 0, 0, "*", 32)
		expectCode(t, resp, protocol.Success, "pull")
		testutil.Equal(t, len(decodeAll(t, resp.Body)), 3, "messages pulled")
	}
	commit := protocol.UpdateConsumerOffsetRequestHeader{ConsumerGroup: group, Topic: topic, QueueID: 0, CommitOffset: 1}
	expectCode(t, invoke(t, local, s.Addr(), protocol.UpdateConsumerOffset, commit.Ext(), nil), protocol.Success, "commit")

	series := testutil.Scrape(t, "http://"+s.MetricsAddr()+"/metrics")
	want := func(name string, v float64, labels ...string) {
		t.Helper()
		got, ok := testutil.Find(series, name, append([]string{"broker", "broker-m", "idc", "idc1"}, labels...)...)
		if !ok {
			t.Errorf("%s%v: no such series", name, labels)
		} else if got != v {
			t.Errorf("%s%v = %v, want %v", name, labels, got, v)
		}
	}
	atLeast := func(name string, v float64) {
		t.Helper()
		if got, ok := testutil.Find(series, name, "broker", "broker-m"); !ok || got < v {
			t.Errorf("%s = %v (present %v), want ≥ %v", name, got, ok, v)
		}
	}
	want("zonemq_broker_messages_in_total", 3, "topic", topic)
	want("zonemq_broker_bytes_in_total", 6, "topic", topic)
	want("zonemq_broker_messages_out_total", 6, "topic", topic, "group", group)
	want("zonemq_broker_cross_idc_messages_in_total", 3, "client_idc", "idc2")
	want("zonemq_broker_cross_idc_messages_out_total", 3, "client_idc", "idc2")
	want("zonemq_broker_client_messages_in_total", 3, "client_idc", "idc2")
	want("zonemq_broker_client_messages_out_total", 3, "client_idc", "idc1")
	want("zonemq_broker_client_messages_out_total", 3, "client_idc", "idc2")
	want("zonemq_broker_takeovers_total", 1)
	want("zonemq_broker_consumer_lag_messages", 2, "group", group, "topic", topic, "queue", "0")
	want("zonemq_broker_send_latency_seconds_count", 3)
	want("zonemq_broker_disk_max_used_ratio", opts.DiskMaxUsedRatio)
	atLeast("zonemq_broker_store_put_latency_seconds_count", 3)
	atLeast("zonemq_broker_commitlog_bytes", 1)
	atLeast("zonemq_broker_connections", 2)
	atLeast("zonemq_broker_last_takeover_timestamp_seconds", 1)
	if _, ok := testutil.Find(series, "zonemq_broker_cross_idc_messages_in_total", "client_idc", "idc1"); ok {
		t.Errorf("own-IDC traffic counted as cross-IDC")
	}
	if _, ok := testutil.Find(series, "go_goroutines"); !ok {
		t.Errorf("the Go runtime collector is missing")
	}

	// docs/metrics.md lists every broker metric the endpoint serves.
	doc, err := os.ReadFile("../../docs/metrics.md")
	testutil.NoError(t, err, "reading docs/metrics.md")
	for _, se := range series {
		name, ok := strings.CutPrefix(se.Name, "zonemq_broker_")
		if !ok {
			continue
		}
		for _, suffix := range []string{"_bucket", "_count", "_sum"} {
			if base, cut := strings.CutSuffix(name, suffix); cut && strings.HasSuffix(base, "_seconds") {
				name = base
			}
		}
		if !bytes.Contains(doc, []byte("`"+name+"`")) {
			t.Errorf("%s is served but not listed in docs/metrics.md", se.Name)
		}
	}
}
