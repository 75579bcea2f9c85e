package broker

import (
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/testutil"
)

// sendExt returns valid SEND_MESSAGE ext fields for topic, with changes
// applied (an empty value deletes the key).
func sendExt(topic string, changes map[string]string) map[string]string {
	h := protocol.SendMessageRequestHeader{ProducerGroup: "bad_pg", Topic: topic, DefaultTopic: protocol.AutoCreateTopicKey,
		DefaultTopicQueueNums: 4, QueueID: 0, BornTimestamp: time.Now().UnixMilli()}
	return edit(h.Ext(), changes)
}

func edit(ext map[string]string, changes map[string]string) map[string]string {
	for k, v := range changes {
		if v == "" {
			delete(ext, k)
		} else {
			ext[k] = v
		}
	}
	return ext
}

func pullExt(changes map[string]string) map[string]string {
	h := protocol.PullMessageRequestHeader{ConsumerGroup: "bad_cg", Topic: "BadTopic", QueueID: 0, QueueOffset: 0, MaxMsgNums: 32,
		SysFlag: protocol.PullFlagSubscription, Subscription: "*", ExpressionType: protocol.ExpressionTypeTag}
	return edit(h.Ext(), changes)
}

func TestBrokerBadInput(t *testing.T) {
	opts := testBrokerOptions(t, "127.0.1.1", "idc1", "broker-bad")
	opts.MaxMessageSize = 1024
	s := startBroker(t, opts)
	c := newRawClient(t)
	createTopic(t, c, s.Addr(), "BadTopic", 2)
	readOnly := protocol.CreateTopicRequestHeader{Topic: "ReadOnlyTopic", ReadQueueNums: 1, WriteQueueNums: 1, Perm: protocol.PermRead}
	expectCode(t, invoke(t, c, s.Addr(), protocol.UpdateAndCreateTopic, readOnly.Ext(), nil), protocol.Success, "create read-only topic")

	v2 := func(changes map[string]string) map[string]string {
		return edit((&protocol.SendMessageRequestHeaderV2{SendMessageRequestHeader: protocol.SendMessageRequestHeader{
			ProducerGroup: "bad_pg", Topic: "BadTopic", QueueID: 0, BornTimestamp: 1}}).Ext(), changes)
	}
	item := encodeBatchItem(0, []byte("ok"), "")
	lying := append([]byte(nil), item...)
	binary.BigEndian.PutUint32(lying, 1<<30) // TOTALSIZE far beyond the body
	badBodyLen := append([]byte(nil), item...)
	binary.BigEndian.PutUint32(badBodyLen[16:], 0xFFFFFFF0) // negative BODYLEN

	cases := []struct {
		name   string
		code   protocol.RequestCode
		ext    map[string]string
		body   []byte
		want   protocol.ResponseCode
		remark string // a substring the remark must contain
	}{
		{"send without topic", protocol.SendMessage, sendExt("BadTopic", map[string]string{"topic": ""}), []byte("x"), protocol.InvalidParameter, "topic"},
		{"send with a non-numeric queueId", protocol.SendMessage, sendExt("BadTopic", map[string]string{"queueId": "abc"}), []byte("x"), protocol.InvalidParameter, "queueId"},
		{"send with a non-numeric bornTimestamp", protocol.SendMessage, sendExt("BadTopic", map[string]string{"bornTimestamp": "yesterday"}), []byte("x"), protocol.InvalidParameter, "bornTimestamp"},
		{"send v2 without topic key b", protocol.SendMessageV2, v2(map[string]string{"b": ""}), []byte("x"), protocol.InvalidParameter, "topic (short key b)"},
		{"send v2 with sysFlag f=NaN", protocol.SendMessageV2, v2(map[string]string{"f": "NaN"}), []byte("x"), protocol.InvalidParameter, "sysFlag"},
		{"send with an illegal topic name", protocol.SendMessage, sendExt("bad topic!", nil), []byte("x"), protocol.MessageIllegal, "bad topic!"},
		{"send with an over-long topic", protocol.SendMessage, sendExt(strings.Repeat("t", 128), nil), []byte("x"), protocol.MessageIllegal, "127"},
		{"send to TBW102", protocol.SendMessage, sendExt(protocol.AutoCreateTopicKey, nil), []byte("x"), protocol.NoPermission, "system topic"},
		{"send to a read-only topic", protocol.SendMessage, sendExt("ReadOnlyTopic", nil), []byte("x"), protocol.NoPermission, "not writable"},
		{"send to queue 99", protocol.SendMessage, sendExt("BadTopic", map[string]string{"queueId": "99"}), []byte("x"), protocol.SystemError, "queueId[99]"},
		{"send a body above maxMessageSize", protocol.SendMessage, sendExt("BadTopic", nil), make([]byte, 2000), protocol.MessageIllegal, "2000 bytes; this broker's limit (maxMessageSize) is 1024"},
		{"send a huge body to a new topic", protocol.SendMessage, sendExt("BigNewTopic", nil), make([]byte, 1025), protocol.MessageIllegal, "maxMessageSize"},
		{"send over-long properties", protocol.SendMessage, sendExt("BadTopic", map[string]string{"properties": "K\x01" + strings.Repeat("v", 40000) + "\x02"}), []byte("x"), protocol.MessageIllegal, "properties"},
		{"batch with a garbage body", protocol.SendBatchMessage, v2(nil), []byte{1, 2, 3}, protocol.MessageIllegal, "item 0"},
		{"batch with an empty body", protocol.SendBatchMessage, v2(nil), nil, protocol.MessageIllegal, "empty"},
		{"batch whose TOTALSIZE lies", protocol.SendBatchMessage, v2(nil), lying, protocol.MessageIllegal, "TOTALSIZE"},
		{"batch with a negative BODYLEN", protocol.SendBatchMessage, v2(nil), badBodyLen, protocol.MessageIllegal, "BODYLEN"},
		{"batch to a retry topic", protocol.SendBatchMessage, v2(map[string]string{"b": "%RETRY%bad_cg"}), item, protocol.MessageIllegal, "retry topic"},
		{"batch with a DELAY item", protocol.SendBatchMessage, v2(nil), encodeBatchItem(0, []byte("x"), "DELAY\x013\x02"), protocol.MessageIllegal, "DELAY"},
		{"pull without queueOffset", protocol.PullMessage, pullExt(map[string]string{"queueOffset": ""}), nil, protocol.InvalidParameter, "queueOffset"},
		{"pull with maxMsgNums=lots", protocol.PullMessage, pullExt(map[string]string{"maxMsgNums": "lots"}), nil, protocol.InvalidParameter, "maxMsgNums"},
		{"pull an unknown topic", protocol.PullMessage, pullExt(map[string]string{"topic": "NoSuchTopic"}), nil, protocol.TopicNotExist, "NoSuchTopic"},
		{"pull queue 7 of 2", protocol.PullMessage, pullExt(map[string]string{"queueId": "7"}), nil, protocol.InvalidParameter, "queueId[7]"},
		{"pull without a heartbeat subscription", protocol.PullMessage, pullExt(map[string]string{"sysFlag": "0"}), nil, protocol.SubscriptionNotExist, "bad_cg"},
		{"pull with bad SQL92", protocol.PullMessage, pullExt(map[string]string{"expressionType": "SQL92", "subscription": "a > 'x'"}), nil, protocol.SubscriptionParseFailed, "only numbers can be ordered"},
		{"pull with unknown expression type", protocol.PullMessage, pullExt(map[string]string{"expressionType": "XPATH", "subscription": "a"}), nil, protocol.SubscriptionParseFailed, "XPATH"},
		{"pull with an illegal group", protocol.PullMessage, pullExt(map[string]string{"consumerGroup": "no group!"}), nil, protocol.InvalidParameter, "consumerGroup"},
		{"heartbeat with a garbage body", protocol.HeartBeat, nil, []byte("{not json"), protocol.InvalidParameter, "heartbeat"},
		{"heartbeat without clientID", protocol.HeartBeat, nil, []byte(`{"consumerDataSet":[]}`), protocol.InvalidParameter, "clientID"},
		{"heartbeat with a bad codeSet", protocol.HeartBeat, nil, []byte(`{"clientID":"x","consumerDataSet":[{"groupName":"g","subscriptionDataSet":[{"topic":"t","codeSet":["abc"]}]}]}`), protocol.InvalidParameter, "codeSet"},
		{"heartbeat with an illegal group", protocol.HeartBeat, nil, heartbeatBody("c1", "bad group!", protocol.MessageModelCluster, nil), protocol.InvalidParameter, "bad group!"},
		{"query offset of an unknown topic", protocol.QueryConsumerOffset, map[string]string{"consumerGroup": "g", "topic": "NoSuchTopic", "queueId": "0"}, nil, protocol.TopicNotExist, "NoSuchTopic"},
		{"query offset of queue -1", protocol.QueryConsumerOffset, map[string]string{"consumerGroup": "g", "topic": "BadTopic", "queueId": "-1"}, nil, protocol.InvalidParameter, "queueId[-1]"},
		{"query offset never committed", protocol.QueryConsumerOffset, map[string]string{"consumerGroup": "g", "topic": "BadTopic", "queueId": "1"}, nil, protocol.QueryNotFound, "no offset"},
		{"update offset with commitOffset=x", protocol.UpdateConsumerOffset, map[string]string{"consumerGroup": "g", "topic": "BadTopic", "queueId": "0", "commitOffset": "x"}, nil, protocol.InvalidParameter, "commitOffset"},
		{"update offset negative", protocol.UpdateConsumerOffset, map[string]string{"consumerGroup": "g", "topic": "BadTopic", "queueId": "0", "commitOffset": "-5"}, nil, protocol.InvalidParameter, "negative"},
		{"max offset without queueId", protocol.GetMaxOffset, map[string]string{"topic": "BadTopic"}, nil, protocol.InvalidParameter, "queueId"},
		{"search offset without timestamp", protocol.SearchOffsetByTimestamp, map[string]string{"topic": "BadTopic", "queueId": "0"}, nil, protocol.InvalidParameter, "timestamp"},
		{"earliest store time of an empty queue", protocol.GetEarliestMsgStoretime, map[string]string{"topic": "BadTopic", "queueId": "1"}, nil, protocol.SystemError, "no message"},
		{"create topic with perm 99", protocol.UpdateAndCreateTopic, map[string]string{"topic": "T2", "readQueueNums": "1", "writeQueueNums": "1", "perm": "99"}, nil, protocol.InvalidParameter, "perm"},
		{"create topic with 0 queues", protocol.UpdateAndCreateTopic, map[string]string{"topic": "T2", "readQueueNums": "0", "writeQueueNums": "1", "perm": "6"}, nil, protocol.InvalidParameter, "readQueueNums"},
		{"create TBW102", protocol.UpdateAndCreateTopic, map[string]string{"topic": "TBW102", "readQueueNums": "1", "writeQueueNums": "1", "perm": "6"}, nil, protocol.InvalidParameter, "system topic"},
		{"delete without topic", protocol.DeleteTopicInBroker, nil, nil, protocol.InvalidParameter, "topic"},
		{"view a message beyond the log", protocol.ViewMessageByID, map[string]string{"offset": "999999999"}, nil, protocol.SystemError, "999999999"},
		{"view with offset=abc", protocol.ViewMessageByID, map[string]string{"offset": "abc"}, nil, protocol.InvalidParameter, "offset"},
		{"query message without key", protocol.QueryMessage, map[string]string{"topic": "BadTopic", "maxNum": "1", "beginTimestamp": "0", "endTimestamp": "1"}, nil, protocol.InvalidParameter, "key"},
		{"consumer list of an unknown group", protocol.GetConsumerListByGroup, map[string]string{"consumerGroup": "nobody"}, nil, protocol.SystemError, "nobody"},
		{"consumer list without group", protocol.GetConsumerListByGroup, nil, nil, protocol.InvalidParameter, "consumerGroup"},
		{"an unknown request code", protocol.RequestCode(9999), nil, nil, protocol.RequestCodeNotSupported, "9999"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := invoke(t, c, s.Addr(), tc.code, tc.ext, tc.body)
			expectCode(t, resp, tc.want, tc.name)
			if !strings.Contains(resp.Remark, tc.remark) {
				t.Fatalf("%s: remark %q does not mention %q", tc.name, resp.Remark, tc.remark)
			}
		})
	}

	if s.prepareTransaction == nil {
		// Without the transaction service, half messages are refused.
		resp := invoke(t, c, s.Addr(), protocol.SendMessage, sendExt("BadTopic", map[string]string{"sysFlag": "4"}), []byte("x"))
		expectCode(t, resp, protocol.NoPermission, "send a transaction half message")
		testutil.True(t, strings.Contains(resp.Remark, "transaction"), "remark names transactions: "+resp.Remark)
	}
	_, ok := s.topics.get("%RETRY%bad_cg")
	testutil.True(t, !ok, "a refused batch creates no retry topic")
	_, ok = s.topics.get("BigNewTopic")
	testutil.True(t, !ok, "a refused message creates no topic")

	// A full disk refuses sends with a remark saying so; clients retry
	// elsewhere (SERVICE_NOT_AVAILABLE).
	s.store.SetDiskMaxUsedRatio(1e-9)
	resp := sendRaw(t, c, s.Addr(), "BadTopic", 0, nil, []byte("x"))
	expectCode(t, resp, protocol.ServiceNotAvailable, "send to a full disk")
	testutil.True(t, strings.Contains(resp.Remark, "disk") && strings.Contains(resp.Remark, "full"), "remark says the disk is full: "+resp.Remark)
	s.store.SetDiskMaxUsedRatio(1)

	// Nothing above hurt the broker: a good client is served.
	expectCode(t, sendRaw(t, c, s.Addr(), "BadTopic", 1, nil, []byte("good")), protocol.Success, "good send")
	pull := pullRaw(t, c, s.Addr(), "good_cg", "BadTopic", 1, 0, "*", 32)
	expectCode(t, pull, protocol.Success, "good pull")
	ms := decodeAll(t, pull.Body)
	testutil.Equal(t, len(ms), 1, "only the good message was stored in queue 1")
	testutil.Equal(t, string(ms[0].Body), "good", "good body")
	for q := range int32(2) {
		testutil.True(t, s.store.MaxOffset("BadTopic", q) <= 1, "no bad message was stored")
	}
}
