package proxy_test

import (
	"testing"

	"github.com/zonemq/zonemq/internal/rmqpb"
	"github.com/zonemq/zonemq/internal/testutil"
)

// A RocketMQ 5 client resends an unanswered SendMessage with the same
// message id, as a new call. The access point marks the repeat as a resend,
// so the broker answers it with the stored copy: one copy, one position
// (the chaos campaign's v5 workload found the message stored twice in one
// group).
func TestV5ResendIsStoredOnce(t *testing.T) {
	c, ap := cluster(t, "V5Resend")
	cl, ctx := rawGRPC(t, ap.Addr(), "resend-client")
	send := func(id string) *rmqpb.SendResultEntry {
		t.Helper()
		resp, err := cl.SendMessage(ctx, &rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{{
			Topic:            &rmqpb.Resource{Name: "V5Resend"},
			SystemProperties: &rmqpb.SystemProperties{MessageId: id, MessageType: rmqpb.MessageType_NORMAL},
			Body:             []byte("body of " + id),
		}}})
		testutil.NoError(t, err, "SendMessage")
		if resp.GetStatus().GetCode() != rmqpb.Code_OK || len(resp.GetEntries()) != 1 {
			t.Fatalf("SendMessage %s: %v", id, resp.GetStatus())
		}
		return resp.GetEntries()[0]
	}
	first := send("RESEND0000000000000000000000001")
	again := send("RESEND0000000000000000000000001")
	other := send("RESEND0000000000000000000000002")
	testutil.Equal(t, again.GetOffset(), first.GetOffset(), "the resend's offset")
	copies := map[string]int{}
	for _, m := range drain(t, c, "V5Resend") {
		copies[m.MsgID]++
	}
	testutil.Equal(t, copies[first.GetMessageId()], 1, "copies of the resent message")
	testutil.Equal(t, copies[other.GetMessageId()], 1, "copies of the other message")
}
