package broker

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/testutil"
)

// encodeBatchItem encodes one message the way clients encode batch items.
func encodeBatchItem(flag int32, body []byte, props string) []byte {
	var b []byte
	total := batchItemFixedLen + len(body) + len(props)
	b = binary.BigEndian.AppendUint32(b, uint32(total))
	b = binary.BigEndian.AppendUint32(b, 0) // magic
	b = binary.BigEndian.AppendUint32(b, 0) // body crc
	b = binary.BigEndian.AppendUint32(b, uint32(flag))
	b = binary.BigEndian.AppendUint32(b, uint32(len(body)))
	b = append(b, body...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(props)))
	return append(b, props...)
}

func TestBrokerSendAndPullRaw(t *testing.T) {
	s := startBroker(t, testBrokerOptions(t, "127.0.1.1", "idc1", "broker-a"))
	c := newRawClient(t)

	// Auto-create on first send, with a queue picked by the broker.
	props := map[string]string{protocol.PropertyTags: "TagA", protocol.PropertyKeys: "k1 k2", protocol.PropertyUniqClientMessageID: "C0A8000100002A9F0000000000000001"}
	resp := sendRaw(t, c, s.Addr(), "RawTopic", -1, props, []byte("hello"))
	expectCode(t, resp, protocol.Success, "first send")
	var rh protocol.SendMessageResponseHeader
	testutil.NoError(t, rh.SetExt(resp.ExtFields), "send response header")
	testutil.Equal(t, rh.MsgRegion, DefaultRegion, "MSG_REGION")
	testutil.True(t, rh.TraceOn, "TRACE_ON")
	testutil.Equal(t, rh.TransactionID, props[protocol.PropertyUniqClientMessageID], "transactionId")
	host, off, err := protocol.ParseOffsetMessageID(rh.MsgID)
	testutil.NoError(t, err, "msgId")
	testutil.Equal(t, host.String(), s.Addr(), "msgId host")
	cfg, ok := s.topics.get("RawTopic")
	testutil.True(t, ok, "topic auto-created")
	testutil.Equal(t, cfg.WriteQueueNums, 4, "auto-created queue count")
	testutil.Equal(t, cfg.Perm, protocol.PermReadWrite, "auto-created perm")
	testutil.True(t, rh.QueueID >= 0 && rh.QueueID < 4, "picked queue in range")

	// VIEW_MESSAGE_BY_ID returns the stored record.
	view := invoke(t, c, s.Addr(), protocol.ViewMessageByID, (&protocol.ViewMessageRequestHeader{Offset: off}).Ext(), nil)
	expectCode(t, view, protocol.Success, "view by id")
	ms := decodeAll(t, view.Body)
	testutil.Equal(t, string(ms[0].Body), "hello", "viewed body")
	testutil.Equal(t, ms[0].Properties, protocol.EncodeProperties(props), "properties stored as given")

	// A batch lands at consecutive offsets of one queue, one record each.
	var body []byte
	for i := range 3 {
		body = append(body, encodeBatchItem(int32(i), []byte(fmt.Sprintf("b%d", i)), protocol.EncodeProperties(map[string]string{protocol.PropertyTags: "TagB"}))...)
	}
	bh := protocol.SendMessageRequestHeaderV2{SendMessageRequestHeader: protocol.SendMessageRequestHeader{
		ProducerGroup: "raw_pg", Topic: "RawBatch", DefaultTopic: protocol.AutoCreateTopicKey, DefaultTopicQueueNums: 4,
		QueueID: 2, BornTimestamp: time.Now().UnixMilli(), Batch: true,
	}}
	resp = invoke(t, c, s.Addr(), protocol.SendBatchMessage, bh.Ext(), body)
	expectCode(t, resp, protocol.Success, "batch send")
	testutil.NoError(t, rh.SetExt(resp.ExtFields), "batch response header")
	ids := strings.Split(rh.MsgID, ",")
	testutil.Equal(t, len(ids), 3, "batch msgIds")
	for _, id := range ids {
		_, _, err := protocol.ParseOffsetMessageID(id)
		testutil.NoError(t, err, "batch msgId "+id)
	}
	testutil.Equal(t, rh.QueueID, int32(2), "batch queue")

	pull := pullRaw(t, c, s.Addr(), "raw_cg", "RawBatch", 2, 0, "*", 32)
	expectCode(t, pull, protocol.Success, "pull batch queue")
	ms = decodeAll(t, pull.Body)
	testutil.Equal(t, len(ms), 3, "records pulled")
	for i, m := range ms {
		testutil.Equal(t, m.QueueOffset, int64(i), "queue offset")
		testutil.Equal(t, string(m.Body), fmt.Sprintf("b%d", i), "body")
		testutil.Equal(t, m.Flag, int32(i), "flag")
	}
	var ph protocol.PullMessageResponseHeader
	testutil.NoError(t, ph.SetExt(pull.ExtFields), "pull response header")
	testutil.Equal(t, ph.NextBeginOffset, int64(3), "nextBeginOffset")
	testutil.Equal(t, ph.MaxOffset, int64(3), "maxOffset")
	testutil.Equal(t, pull.Remark, "FOUND", "remark")

	// maxMsgNums 0 still returns one message (the Go pull consumer sends 0).
	pull = pullRaw(t, c, s.Addr(), "raw_cg", "RawBatch", 2, 0, "*", 0)
	expectCode(t, pull, protocol.Success, "pull maxMsgNums 0")
	testutil.Equal(t, len(decodeAll(t, pull.Body)), 1, "messages for maxMsgNums 0")

	// Caught up: PULL_NOT_FOUND with all four offsets.
	pull = pullRaw(t, c, s.Addr(), "raw_cg", "RawBatch", 2, 3, "*", 32)
	expectCode(t, pull, protocol.PullNotFound, "pull at max")
	for _, k := range []string{"nextBeginOffset", "minOffset", "maxOffset", "suggestWhichBrokerId"} {
		_, ok := pull.ExtFields[k]
		testutil.True(t, ok, "pull answer has "+k)
	}
	// Beyond max: offset moved.
	pull = pullRaw(t, c, s.Addr(), "raw_cg", "RawBatch", 2, 10, "*", 32)
	expectCode(t, pull, protocol.PullOffsetMoved, "pull beyond max")

	// Server-side tag filtering: the TagB batch does not match TagA.
	pull = pullRaw(t, c, s.Addr(), "raw_cg", "RawBatch", 2, 0, "TagA || TagC", 32)
	expectCode(t, pull, protocol.PullRetryImmediately, "pull TagA from a TagB queue")
	testutil.NoError(t, ph.SetExt(pull.ExtFields), "pull response header")
	testutil.Equal(t, ph.NextBeginOffset, int64(3), "filtered entries are stepped over")
	pull = pullRaw(t, c, s.Addr(), "raw_cg", "RawBatch", 2, 0, "TagA || TagB", 32)
	expectCode(t, pull, protocol.Success, "pull TagA || TagB")
	testutil.Equal(t, len(decodeAll(t, pull.Body)), 3, "messages matching TagB")

	// Compressed bodies are stored as received, sysFlag kept.
	h := protocol.SendMessageRequestHeader{ProducerGroup: "raw_pg", Topic: "RawZip", DefaultTopic: protocol.AutoCreateTopicKey, QueueID: 1, SysFlag: protocol.SysFlagCompressed,
		BornTimestamp: time.Now().UnixMilli()}
	zipped := []byte{0x78, 0x9c, 0x01, 0x02, 0x03}
	expectCode(t, invoke(t, c, s.Addr(), protocol.SendMessage, h.Ext(), zipped), protocol.Success, "compressed send")
	pull = pullRaw(t, c, s.Addr(), "raw_cg", "RawZip", 1, 0, "*", 32)
	expectCode(t, pull, protocol.Success, "pull compressed")
	ms = decodeAll(t, pull.Body)
	testutil.True(t, bytes.Equal(ms[0].Body, zipped), "compressed body kept")
	testutil.Equal(t, ms[0].SysFlag&protocol.SysFlagCompressed, protocol.SysFlagCompressed, "compressed sysFlag kept")

	// QUERY_MESSAGE finds the first message by key.
	qh := protocol.QueryMessageRequestHeader{Topic: "RawTopic", Key: "k2", MaxNum: 10, EndTimestamp: time.Now().Add(time.Hour).UnixMilli()}
	q := invoke(t, c, s.Addr(), protocol.QueryMessage, qh.Ext(), nil)
	expectCode(t, q, protocol.Success, "query by key")
	testutil.Equal(t, string(decodeAll(t, q.Body)[0].Body), "hello", "queried body")
}
