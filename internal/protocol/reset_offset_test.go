package protocol_test

import (
	"maps"
	"testing"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/testutil"
)

// The body keeps the exact fastjson shape rocketmq-client-go's parser splits
// by hand ("},"/"}:" separators, no spaces), and reads the gson form too.
func TestResetOffsetBodyShapes(t *testing.T) {
	q0 := protocol.MessageQueue{Topic: "T", BrokerName: "b", QueueID: 0}
	q1 := protocol.MessageQueue{Topic: "T", BrokerName: "b", QueueID: 1}
	b := protocol.ResetOffsetBody{OffsetTable: map[protocol.MessageQueue]int64{q1: 7, q0: 12}}
	enc := b.Encode()
	testutil.Equal(t, string(enc), `{"offsetTable":{{"topic":"T","brokerName":"b","queueId":0}:12,{"topic":"T","brokerName":"b","queueId":1}:7}}`)
	got, err := protocol.DecodeResetOffsetBody(enc)
	testutil.NoError(t, err)
	testutil.True(t, maps.Equal(got.OffsetTable, b.OffsetTable), got.OffsetTable)

	got, err = protocol.DecodeResetOffsetBody([]byte(`{"offsetTable":[[{"topic":"T","brokerName":"b","queueId":1},7],[{"topic":"T","brokerName":"b","queueId":0},12]]}`))
	testutil.NoError(t, err)
	testutil.True(t, maps.Equal(got.OffsetTable, b.OffsetTable), got.OffsetTable)

	_, err = protocol.DecodeResetOffsetBody([]byte(`{"offsetTable":{{"topic":}`))
	testutil.True(t, err != nil, "a torn body is an error")
}
