package protocol

import (
	"fmt"
	"maps"
	"testing"

	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/testutil"
)

// TestHeadersEncodeExtMatchExt: a frame whose header writes itself
// (EncodeExt) decodes to the same ext fields as one built from Ext, in both
// header encodings.
func TestHeadersEncodeExtMatchExt(t *testing.T) {
	send := SendMessageRequestHeader{
		ProducerGroup: "pg", Topic: "T", DefaultTopic: AutoCreateTopicKey, DefaultTopicQueueNums: 4,
		QueueID: 3, SysFlag: 2, BornTimestamp: 1_700_000_000_123, Flag: -7,
		Properties: "UNIQ_KEY\u0001abc\u0002TAGS\u0001\"quoted\" ü\u0002", ReconsumeTimes: 1, Batch: true, BrokerName: "broker-a",
	}
	noName := send
	noName.BrokerName, noName.maxReconsumeTimesAbsent, noName.MaxReconsumeTimes = "", false, 16
	absent := send
	absent.maxReconsumeTimesAbsent = true
	pull := PullMessageRequestHeader{
		ConsumerGroup: "cg", Topic: "T", QueueID: 2, QueueOffset: 1234, MaxMsgNums: 32, SysFlag: 6,
		CommitOffset: 1200, SuspendTimeoutMillis: 15000, Subscription: "*", SubVersion: 1_700_000_000_000,
	}
	pullAll := pull
	pullAll.ExpressionType, pullAll.BrokerName, pullAll.MaxMsgBytes = ExpressionTypeTag, "broker-a", 1<<20
	cases := []struct {
		name string
		h    remoting.ExtHeader
		ext  map[string]string
	}{
		{"send", &send, send.Ext()},
		{"send without broker name", &noName, noName.Ext()},
		{"send without maxReconsumeTimes", &absent, absent.Ext()},
		{"send V2", &SendMessageRequestHeaderV2{send}, (&SendMessageRequestHeaderV2{send}).Ext()},
		{"send V2 without broker name", &SendMessageRequestHeaderV2{noName}, (&SendMessageRequestHeaderV2{noName}).Ext()},
		{"send response", &SendMessageResponseHeader{MsgID: "AB", QueueID: 1, QueueOffset: 99, TransactionID: "u", MsgRegion: "r", TraceOn: true, BrokerEpoch: 3},
			(&SendMessageResponseHeader{MsgID: "AB", QueueID: 1, QueueOffset: 99, TransactionID: "u", MsgRegion: "r", TraceOn: true, BrokerEpoch: 3}).Ext()},
		{"send response without transaction", &SendMessageResponseHeader{MsgID: "AB"}, (&SendMessageResponseHeader{MsgID: "AB"}).Ext()},
		{"pull", &pull, pull.Ext()},
		{"pull with max bytes and broker name", &pullAll, pullAll.Ext()},
		{"pull response", &PullMessageResponseHeader{NextBeginOffset: 32, MinOffset: 1, MaxOffset: 99},
			(&PullMessageResponseHeader{NextBeginOffset: 32, MinOffset: 1, MaxOffset: 99}).Ext()},
	}
	for _, c := range cases {
		for _, ser := range []remoting.SerializeType{remoting.SerializeJSON, remoting.SerializeRocketMQ} {
			cmd := &remoting.Command{Code: 10, Opaque: 5, Header: c.h, Body: []byte("b"), Serialize: ser}
			got, err := remoting.DecodeWholeFrame(remoting.EncodeFrame(cmd))
			testutil.NoError(t, err, c.name)
			testutil.True(t, maps.Equal(got.ExtFields, c.ext), fmt.Sprintf("%s, %v: EncodeExt wrote %v, Ext has %v", c.name, ser, got.ExtFields, c.ext))
			testutil.Equal(t, string(got.Body), "b")
		}
	}
}
