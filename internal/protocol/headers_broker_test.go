package protocol

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestBrokerHeadersRoundTrip renders every broker header to ext fields and
// reads it back.
func TestBrokerHeadersRoundTrip(t *testing.T) {
	yes := true
	send := SendMessageRequestHeader{ProducerGroup: "pg", Topic: "T", DefaultTopic: "TBW102", DefaultTopicQueueNums: 4,
		QueueID: 3, SysFlag: 1, BornTimestamp: 1700000000000, Flag: 7, Properties: "TAGS\x01a\x02", ReconsumeTimes: 2,
		UnitMode: true, Batch: true, MaxReconsumeTimes: 16, BrokerName: "broker-a"}
	headers := []Header{
		&send,
		&SendMessageRequestHeaderV2{SendMessageRequestHeader: send},
		&SendMessageResponseHeader{MsgID: "7F00000100004DC700000000000003E8", QueueID: 1, QueueOffset: 9, TransactionID: "u", MsgRegion: "DefaultRegion", TraceOn: true},
		&PullMessageRequestHeader{ConsumerGroup: "g", Topic: "T", QueueID: 1, QueueOffset: 5, MaxMsgNums: 32, SysFlag: 6, CommitOffset: -1,
			SuspendTimeoutMillis: 20000, Subscription: "a || b", SubVersion: 99, ExpressionType: "TAG", MaxMsgBytes: 1024, BrokerName: "b"},
		&PullMessageResponseHeader{SuggestWhichBrokerID: 0, NextBeginOffset: 10, MinOffset: 1, MaxOffset: 11},
		&QueryConsumerOffsetRequestHeader{ConsumerGroup: "g", Topic: "T", QueueID: 2, SetZeroIfNotFound: &yes, BrokerName: "b"},
		&QueryConsumerOffsetRequestHeader{ConsumerGroup: "g", Topic: "T", QueueID: 2},
		&OffsetResponseHeader{Offset: 42},
		&UpdateConsumerOffsetRequestHeader{ConsumerGroup: "g", Topic: "T", QueueID: 1, CommitOffset: 8, BrokerName: "b"},
		&QueueRequestHeader{Topic: "T", QueueID: 3, BrokerName: "b"},
		&SearchOffsetRequestHeader{Topic: "T", QueueID: 3, Timestamp: 1700000000000},
		&TimestampResponseHeader{Timestamp: 1700000000001},
		&QueryMessageRequestHeader{Topic: "T", Key: "k", MaxNum: 32, BeginTimestamp: 1, EndTimestamp: 2},
		&QueryMessageResponseHeader{IndexLastUpdateTimestamp: 3, IndexLastUpdatePhyoffset: 4},
		&ViewMessageRequestHeader{Offset: 1000},
		&CreateTopicRequestHeader{Topic: "T", DefaultTopic: "TBW102", ReadQueueNums: 8, WriteQueueNums: 8, Perm: 6,
			TopicFilterType: "SINGLE_TAG", TopicSysFlag: 1, Order: true, Attributes: "+a=b"},
		&TopicRequestHeader{Topic: "T"},
		&ConsumerGroupRequestHeader{ConsumerGroup: "g"},
		&GetConsumeStatsRequestHeader{ConsumerGroup: "g", Topic: "T"},
		&UnregisterClientRequestHeader{ClientID: "c", ProducerGroup: "pg", ConsumerGroup: "cg"},
	}
	for _, h := range headers {
		ext := h.Ext()
		for k, v := range ext {
			if k == "" {
				t.Errorf("%T: empty key for value %q", h, v)
			}
		}
		got := reflect.New(reflect.TypeOf(h).Elem()).Interface().(Header)
		if err := got.SetExt(ext); err != nil {
			t.Errorf("%T: SetExt(%v): %v", h, ext, err)
			continue
		}
		if !reflect.DeepEqual(got, h) {
			t.Errorf("%T: round trip\n got %+v\nwant %+v", h, got, h)
		}
	}
}

// TestBrokerHeadersWireKeys pins the keys rocketmq-client-go sends and reads.
func TestBrokerHeadersWireKeys(t *testing.T) {
	// Captured from the Go client (ROCKETMQ-REMOTING.md §8).
	batch := map[string]string{"a": "probe_pg", "c": "TBW102", "e": "0", "f": "0", "g": "1796009302584", "h": "0", "i": "",
		"k": "false", "b": "ProbeTopic", "d": "4", "j": "0", "l": "0", "m": "true", "n": "broker-a"}
	var v2 SendMessageRequestHeaderV2
	if err := v2.SetExt(batch); err != nil {
		t.Fatal(err)
	}
	if v2.Topic != "ProbeTopic" || v2.ProducerGroup != "probe_pg" || !v2.Batch || v2.BrokerName != "broker-a" || v2.BornTimestamp != 1796009302584 {
		t.Fatalf("decoded %+v", v2)
	}
	pull := map[string]string{"queueId": "0", "queueOffset": "0", "maxMsgNums": "32", "suspendTimeoutMillis": "20000",
		"subscription": "", "bname": "broker-a", "consumerGroup": "probe_cg", "topic": "ProbeTopic", "sysFlag": "2",
		"commitOffset": "-1", "subVersion": "0", "expressionType": "TAG"}
	var ph PullMessageRequestHeader
	if err := ph.SetExt(pull); err != nil {
		t.Fatal(err)
	}
	if ph.SysFlag != PullFlagSuspend || ph.CommitOffset != -1 || ph.MaxMsgNums != 32 {
		t.Fatalf("decoded %+v", ph)
	}
	resp := (&PullMessageResponseHeader{}).Ext()
	for _, k := range []string{"nextBeginOffset", "minOffset", "maxOffset", "suggestWhichBrokerId"} {
		if _, ok := resp[k]; !ok {
			t.Errorf("pull response lacks %s", k)
		}
	}
	sr := (&SendMessageResponseHeader{MsgRegion: "DefaultRegion", TraceOn: true}).Ext()
	for _, k := range []string{"msgId", "queueId", "queueOffset", "MSG_REGION", "TRACE_ON"} {
		if _, ok := sr[k]; !ok {
			t.Errorf("send response lacks %s", k)
		}
	}
}

// maxReconsumeTimes absent and maxReconsumeTimes "0" are told apart, under
// both key sets, and an absent field stays absent when written back.
func TestBrokerHeadersMaxReconsumeTimesPresence(t *testing.T) {
	built := SendMessageRequestHeader{ProducerGroup: "pg", Topic: "T"}
	if !built.HasMaxReconsumeTimes() || built.Ext()["maxReconsumeTimes"] != "0" {
		t.Fatalf("a header built in code carries maxReconsumeTimes: %v", built.Ext())
	}
	long := map[string]string{"producerGroup": "pg", "topic": "%RETRY%g", "queueId": "0", "sysFlag": "0",
		"bornTimestamp": "1", "flag": "0", "reconsumeTimes": "3"}
	var h SendMessageRequestHeader
	if err := h.SetExt(long); err != nil {
		t.Fatal(err)
	}
	if h.HasMaxReconsumeTimes() || h.MaxReconsumeTimes != 0 {
		t.Fatalf("absent read as present: %+v", h)
	}
	if _, ok := h.Ext()["maxReconsumeTimes"]; ok {
		t.Fatalf("an absent maxReconsumeTimes was written back: %v", h.Ext())
	}
	long["maxReconsumeTimes"] = "0"
	if err := h.SetExt(long); err != nil {
		t.Fatal(err)
	}
	if !h.HasMaxReconsumeTimes() || h.MaxReconsumeTimes != 0 || h.Ext()["maxReconsumeTimes"] != "0" {
		t.Fatalf("an explicit 0 was lost: %+v", h)
	}
	v2 := map[string]string{"a": "pg", "b": "%RETRY%g", "e": "0", "f": "0", "g": "1", "h": "0", "j": "3"}
	var hv2 SendMessageRequestHeaderV2
	if err := hv2.SetExt(v2); err != nil {
		t.Fatal(err)
	}
	if hv2.HasMaxReconsumeTimes() {
		t.Fatalf("absent l read as present: %+v", hv2)
	}
	v2["l"] = "2"
	if err := hv2.SetExt(v2); err != nil {
		t.Fatal(err)
	}
	if !hv2.HasMaxReconsumeTimes() || hv2.MaxReconsumeTimes != 2 || hv2.Ext()["l"] != "2" {
		t.Fatalf("l=2 decoded %+v", hv2)
	}
}

func TestBrokerHeadersErrorsNameTheField(t *testing.T) {
	var v2 SendMessageRequestHeaderV2
	err := v2.SetExt(map[string]string{"a": "pg", "e": "0", "f": "0", "g": "1", "h": "0"})
	if err == nil || !strings.Contains(err.Error(), "topic (short key b)") {
		t.Fatalf("missing b: %v", err)
	}
	err = v2.SetExt(map[string]string{"a": "pg", "b": "T", "e": "x", "f": "0", "g": "1", "h": "0"})
	if err == nil || !strings.Contains(err.Error(), "queueId") || !strings.Contains(err.Error(), "short key e") {
		t.Fatalf("bad e: %v", err)
	}
	var ph PullMessageRequestHeader
	if err := ph.SetExt(map[string]string{"consumerGroup": "g"}); err == nil || !strings.Contains(err.Error(), "topic") {
		t.Fatalf("missing topic: %v", err)
	}
}

func TestBrokerHeartbeatBodyDecodes(t *testing.T) {
	// The Go client's heartbeat (codeSet as strings) and a Java one
	// (numbers) decode alike.
	goBody := `{"clientID":"192.0.2.2@10815","producerDataSet":[{"groupName":"probe_pg"}],"consumerDataSet":[{"groupName":"probe_cg","consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET","subscriptionDataSet":[{"classFilterMode":false,"topic":"%RETRY%probe_cg","subString":"*","tagsSet":[],"codeSet":[],"subVersion":1796009197820135463,"expressionType":"TAG"},{"classFilterMode":false,"topic":"ProbeTopic","subString":"TagA || TagB","tagsSet":["TagA","TagB"],"codeSet":["2598919","2598920"],"subVersion":1796009197820118159,"expressionType":"TAG"}],"unitMode":false}]}`
	javaCodes := `[2598919,2598920]`
	for _, body := range []string{goBody, strings.Replace(goBody, `["2598919","2598920"]`, javaCodes, 1)} {
		var hb HeartbeatData
		if err := json.Unmarshal([]byte(body), &hb); err != nil {
			t.Fatal(err)
		}
		sd := hb.ConsumerDataSet[0].SubscriptionDataSet[1]
		if hb.ClientID != "192.0.2.2@10815" || len(sd.CodeSet) != 2 || sd.CodeSet[0] != TagsHashCode("TagA") || sd.CodeSet[1] != TagsHashCode("TagB") {
			t.Fatalf("decoded %+v", hb)
		}
	}
	// heartbeatIntervalMillis (zonemq SDK) is read at the top level and in
	// a consumer's data; bodies without it read 0.
	withInterval := strings.Replace(goBody, `"clientID"`, `"heartbeatIntervalMillis":1000,"clientID"`, 1)
	withInterval = strings.Replace(withInterval, `"unitMode":false}`, `"unitMode":false,"heartbeatIntervalMillis":500}`, 1)
	var hb HeartbeatData
	if err := json.Unmarshal([]byte(withInterval), &hb); err != nil {
		t.Fatal(err)
	}
	if hb.HeartbeatIntervalMillis != 1000 || hb.ConsumerDataSet[0].HeartbeatIntervalMillis != 500 {
		t.Fatalf("heartbeatIntervalMillis decoded %+v", hb)
	}
	if b, _ := json.Marshal(HeartbeatData{ClientID: "c", ConsumerDataSet: []ConsumerData{{GroupName: "g"}}}); strings.Contains(string(b), "heartbeatIntervalMillis") {
		t.Fatalf("a zero heartbeatIntervalMillis is written: %s", b)
	}

	tags, codes := ParseSubscription(" TagA ||TagB|| ")
	if len(tags) != 2 || tags[1] != "TagB" || codes[0] != 2598919 {
		t.Fatalf("ParseSubscription: %v %v", tags, codes)
	}
	if tags, _ := ParseSubscription("*"); tags != nil {
		t.Fatalf("* parsed to %v", tags)
	}
}

func TestBrokerQueueKeyedBodies(t *testing.T) {
	ts := TopicStatsTable{OffsetTable: map[MessageQueue]TopicOffset{
		{Topic: "T", BrokerName: "b", QueueID: 1}: {MinOffset: 1, MaxOffset: 5, LastUpdateTimestamp: 9},
		{Topic: "T", BrokerName: "b", QueueID: 0}: {MaxOffset: 2},
	}}
	enc := ts.Encode()
	if !strings.HasPrefix(string(enc), `{"offsetTable":{{"topic":"T","brokerName":"b","queueId":0}:`) {
		t.Fatalf("encoded %s", enc)
	}
	got, err := DecodeTopicStatsTable(enc)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.OffsetTable, ts.OffsetTable) {
		t.Fatalf("round trip %+v", got)
	}
	cs := ConsumeStats{ConsumeTPS: 1.5, OffsetTable: map[MessageQueue]OffsetWrapper{{Topic: "T,:{}", BrokerName: "b", QueueID: 0}: {BrokerOffset: 3, ConsumerOffset: 2}}}
	gotCS, err := DecodeConsumeStats(cs.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotCS, &cs) {
		t.Fatalf("round trip %+v", gotCS)
	}
	for _, bad := range []string{``, `{`, `{"offsetTable":{{"topic":1}:{}}}`, `{"offsetTable":{{"topic":"T"}}}`, `[1]`} {
		if _, err := DecodeConsumeStats([]byte(bad)); err == nil {
			t.Errorf("%q decoded", bad)
		}
	}
}
