package broker

import (
	"testing"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/testutil"
)

// INVOKE_BROKER_TO_RESET_OFFSET: latest and earliest, force or not, and
// clear codes for bad requests.
func TestBrokerResetOffset(t *testing.T) {
	ns := startNamesrv(t, "127.0.1.1:0", "idc1", nil)
	s := startBroker(t, testBrokerOptions(t, "127.0.1.1", "idc1", "broker-rst", ns.Addr()))
	c := newRawClient(t)
	createTopic(t, c, s.Addr(), "RstTopic", 2)
	for i := range 4 {
		expectCode(t, sendRaw(t, c, s.Addr(), "RstTopic", int32(i%2), nil, []byte{byte(i)}), protocol.Success, "send")
	}
	reset := func(ts int64, force bool) map[protocol.MessageQueue]int64 {
		t.Helper()
		h := protocol.ResetOffsetRequestHeader{Topic: "RstTopic", Group: "rst_cg", Timestamp: ts, IsForce: force}
		resp := invoke(t, c, s.Addr(), protocol.InvokeBrokerToResetOffset, h.Ext(), nil)
		expectCode(t, resp, protocol.Success, "reset")
		b, err := protocol.DecodeResetOffsetBody(resp.Body)
		testutil.NoError(t, err)
		testutil.Equal(t, len(b.OffsetTable), 2, b.OffsetTable)
		for q, off := range b.OffsetTable {
			got, ok := s.store.QueryOffset("rst_cg", "RstTopic", int32(q.QueueID))
			testutil.True(t, ok && got == off, "committed", q, got, off)
		}
		return b.OffsetTable
	}
	q0 := protocol.MessageQueue{Topic: "RstTopic", BrokerName: "broker-rst", QueueID: 0}
	testutil.Equal(t, reset(protocol.ResetOffsetLatest, true)[q0], int64(2))
	testutil.Equal(t, reset(0, true)[q0], int64(0))
	// Without force a queue only moves back: from 0 it stays at 0.
	testutil.Equal(t, reset(protocol.ResetOffsetLatest, false)[q0], int64(0))

	bad := []struct {
		h    protocol.ResetOffsetRequestHeader
		want protocol.ResponseCode
	}{
		{protocol.ResetOffsetRequestHeader{Topic: "NoSuchTopic", Group: "rst_cg", Timestamp: 0}, protocol.TopicNotExist},
		{protocol.ResetOffsetRequestHeader{Topic: "RstTopic", Group: "bad group!", Timestamp: 0}, protocol.InvalidParameter},
		{protocol.ResetOffsetRequestHeader{Topic: "RstTopic", Group: "rst_cg", Timestamp: -5}, protocol.InvalidParameter},
	}
	for _, b := range bad {
		expectCode(t, invoke(t, c, s.Addr(), protocol.InvokeBrokerToResetOffset, b.h.Ext(), nil), b.want, b.h.Topic+"/"+b.h.Group)
	}
	resp := invoke(t, c, s.Addr(), protocol.InvokeBrokerToResetOffset, map[string]string{"topic": "RstTopic"}, nil)
	testutil.True(t, resp.Code != int32(protocol.Success), "a header without group is refused")
}
