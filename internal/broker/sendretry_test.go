package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/testutil"
	"github.com/zonemq/zonemq/internal/wallclock"
)

// A send marked as a retry whose UNIQ_KEY the topic already holds is
// answered with the stored copy (same queue and offset) and stores
// nothing, and so is an unmarked one (a stock client's retry); a retry the
// broker has no copy of is stored as usual, and so is every send to a retry
// topic. Both header forms carry the mark.
func TestBrokerRetriedSendAnsweredWithTheStoredCopy(t *testing.T) {
	s := startBroker(t, testBrokerOptions(t, "127.0.1.1", "idc1", "broker-a"))
	c := newRawClient(t)
	const topic = "RetryTopic"
	createTopic(t, c, s.Addr(), topic, 4)

	send := func(uniq string, queue int32, retry, v2 bool) protocol.SendMessageResponseHeader {
		t.Helper()
		h := protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: topic, DefaultTopic: protocol.AutoCreateTopicKey,
			DefaultTopicQueueNums: 4, QueueID: queue, BornTimestamp: time.Now().UnixMilli(), Retry: retry,
			Properties: protocol.EncodeProperties(map[string]string{protocol.PropertyUniqClientMessageID: uniq})}
		code, ext := protocol.SendMessage, h.Ext()
		if v2 {
			code, ext = protocol.SendMessageV2, (&protocol.SendMessageRequestHeaderV2{SendMessageRequestHeader: h}).Ext()
		}
		resp := invoke(t, c, s.Addr(), code, ext, []byte("body of "+uniq))
		expectCode(t, resp, protocol.Success, "send "+uniq)
		var rh protocol.SendMessageResponseHeader
		testutil.NoError(t, rh.SetExt(resp.ExtFields), "send response")
		return rh
	}
	first := send("U1", 1, false, false)
	testutil.Equal(t, first.QueueID, int32(1), "first copy's queue")

	for _, v2 := range []bool{false, true} {
		again := send("U1", 2, true, v2) // a retry may pick another queue
		testutil.Equal(t, again.QueueID, first.QueueID, "retry answered with the first copy's queue (v2 %v)", v2)
		testutil.Equal(t, again.QueueOffset, first.QueueOffset, "and offset")
		testutil.Equal(t, again.MsgID, first.MsgID, "and message id")
	}
	// As the SDK sends it: a typed V2 header written straight into the frame.
	h := protocol.SendMessageRequestHeaderV2{SendMessageRequestHeader: protocol.SendMessageRequestHeader{ProducerGroup: "pg",
		Topic: topic, DefaultTopic: protocol.AutoCreateTopicKey, DefaultTopicQueueNums: 4, QueueID: 2, Retry: true,
		Properties: protocol.EncodeProperties(map[string]string{protocol.PropertyUniqClientMessageID: "U1"})}}
	req := remoting.NewRequest(int32(protocol.SendMessageV2), nil, []byte("body of U1"))
	req.Header = &h
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Invoke(ctx, s.Addr(), req)
	testutil.NoError(t, err, "typed retry")
	expectCode(t, resp, protocol.Success, "typed retry")
	testutil.Equal(t, resp.Ext("queueId"), "1", "typed retry answered with the first copy")

	testutil.Equal(t, s.store.MaxOffset(topic, 2), int64(0), "the retries stored nothing")
	testutil.Equal(t, s.retriesAnswered.Load(), int64(3), "retries answered from the store")

	fresh := send("U2", 2, true, true)
	testutil.Equal(t, fresh.QueueID, int32(2), "a retry with no earlier copy is stored")
	testutil.Equal(t, s.store.MaxOffset(topic, 2), int64(1), "stored")

	// Unmarked, as rocketmq-client-go and the Java client retry: the same
	// answer.
	again := send("U1", 3, false, false)
	testutil.Equal(t, again.QueueOffset, first.QueueOffset, "an unmarked repeat answered with the first copy")
	testutil.Equal(t, again.MsgID, first.MsgID, "and its message id")
	testutil.Equal(t, s.store.MaxOffset(topic, 3), int64(0), "the unmarked repeat stored nothing")
	testutil.Equal(t, s.retriesAnswered.Load(), int64(4), "retries answered from the store")

	// A message consumed and sent back twice reaches its retry topic twice.
	retryTopic := protocol.RetryGroupPrefix + "cg"
	for range 2 {
		h := protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: retryTopic, DefaultTopic: protocol.AutoCreateTopicKey,
			DefaultTopicQueueNums: 1, QueueID: 0, BornTimestamp: time.Now().UnixMilli(),
			Properties: protocol.EncodeProperties(map[string]string{protocol.PropertyUniqClientMessageID: "U1"})}
		expectCode(t, invoke(t, c, s.Addr(), protocol.SendMessage, h.Ext(), []byte("again")), protocol.Success, "send to the retry topic")
	}
	testutil.Equal(t, s.store.MaxOffset(retryTopic, 0), int64(2), "both sends to the retry topic stored")
}

// The mark survives the frame codecs: what a header writes, it reads.
func TestSendHeaderRetryMarkRoundTrips(t *testing.T) {
	h := protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: "T", QueueID: 1, Retry: true}
	for _, v2 := range []bool{false, true} {
		req := remoting.NewRequest(int32(protocol.SendMessage), h.Ext(), nil)
		var got protocol.SendMessageRequestHeader
		if v2 {
			hv := protocol.SendMessageRequestHeaderV2{SendMessageRequestHeader: h}
			req = remoting.NewRequest(int32(protocol.SendMessageV2), hv.Ext(), nil)
			var gv protocol.SendMessageRequestHeaderV2
			testutil.NoError(t, gv.ReadCommand(req))
			got = gv.SendMessageRequestHeader
		} else {
			testutil.NoError(t, got.ReadCommand(req))
		}
		testutil.True(t, got.Retry, "retry mark read back (v2 %v)", v2)
	}
}

// A retry finds its first copy across a step of the wall clock: forward
// (the records after the step are stamped ahead of the first copy, which
// then lies beyond the lookback of the stepped clock), and back (a first
// copy stamped by a clock 10 minutes slow, as a master's whose clock ran
// behind the new master's). Found by planning the chaos campaign's clock
// fault; the two newest segments are always looked through.
func TestRetryFindsItsFirstCopyAcrossAClockStep(t *testing.T) {
	t.Cleanup(func() { wallclock.Set(0) })
	wallclock.Set(-10 * time.Minute)
	s := startBroker(t, testBrokerOptions(t, "127.0.1.1", "idc1", "broker-a"))
	c := newRawClient(t)
	const topic = "ClockTopic"
	createTopic(t, c, s.Addr(), topic, 4)
	send := func(uniq string, queue int32, retry bool) protocol.SendMessageResponseHeader {
		t.Helper()
		h := protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: topic, DefaultTopic: protocol.AutoCreateTopicKey,
			DefaultTopicQueueNums: 4, QueueID: queue, BornTimestamp: time.Now().UnixMilli(), Retry: retry,
			Properties: protocol.EncodeProperties(map[string]string{protocol.PropertyUniqClientMessageID: uniq})}
		resp := invoke(t, c, s.Addr(), protocol.SendMessage, h.Ext(), []byte("body of "+uniq))
		expectCode(t, resp, protocol.Success, "send "+uniq)
		var rh protocol.SendMessageResponseHeader
		testutil.NoError(t, rh.SetExt(resp.ExtFields), "send response")
		return rh
	}
	slow := send("SLOW", 1, false) // stamped 10 minutes behind
	wallclock.Set(0)
	again := send("SLOW", 2, true)
	testutil.Equal(t, again.QueueID, slow.QueueID, "a retry after the clock caught up finds the copy a slow clock stamped")
	testutil.Equal(t, again.QueueOffset, slow.QueueOffset, "and its offset")

	first := send("STEP", 1, false)
	wallclock.Set(10 * time.Minute)
	send("AFTER", 3, false) // stamped ahead
	again = send("STEP", 2, true)
	testutil.Equal(t, again.QueueID, first.QueueID, "a retry after a forward step finds the first copy")
	testutil.Equal(t, again.QueueOffset, first.QueueOffset, "and its offset")
	testutil.Equal(t, s.store.MaxOffset(topic, 2), int64(0), "the retries stored nothing")
}

// Two attempts of one message reaching the master at once — a RocketMQ 5
// client's resend through another access point beside its first attempt,
// the chaos campaign's seed 64: both stored within a millisecond — are
// stored once: the first to claim the UNIQ_KEY stores it, the other waits
// for that copy and is answered with it.
func TestTwinSendsAtOnceStoredOnce(t *testing.T) {
	s := startBroker(t, testBrokerOptions(t, "127.0.1.1", "idc1", "broker-a"))
	a, b := newRawClient(t), newRawClient(t)
	const topic, pairs = "TwinTopic", 200
	createTopic(t, a, s.Addr(), topic, 4)
	send := func(c *remoting.Client, uniq string, queue int32) <-chan *remoting.Command {
		h := protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: topic, QueueID: queue, BornTimestamp: time.Now().UnixMilli(),
			Properties: protocol.EncodeProperties(map[string]string{protocol.PropertyUniqClientMessageID: uniq})}
		return asyncInvoke(c, s.Addr(), remoting.NewRequest(int32(protocol.SendMessage), h.Ext(), []byte("twin "+uniq)))
	}
	for i := range pairs {
		uniq := fmt.Sprintf("TWIN%05d", i)
		first, second := send(a, uniq, 0), send(b, uniq, 1)
		r1, r2 := <-first, <-second
		expectCode(t, r1, protocol.Success, "first of "+uniq)
		expectCode(t, r2, protocol.Success, "second of "+uniq)
		testutil.Equal(t, r1.ExtFields["msgId"], r2.ExtFields["msgId"], "both attempts of %s answered with one copy", uniq)
	}
	stored := int64(0)
	for q := range int32(4) {
		stored += s.store.MaxOffset(topic, q)
	}
	testutil.Equal(t, stored, int64(pairs), "copies stored")
}
