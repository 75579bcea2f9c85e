package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/testutil"
)

func TestBrokerRestartKeepsMessagesOffsetsAndTopics(t *testing.T) {
	opts := testBrokerOptions(t, "127.0.1.1", "idc1", "broker-d")
	s := startBroker(t, opts)
	c := newRawClient(t)
	createTopic(t, c, s.Addr(), "DurableTopic", 2)
	for i := range 20 {
		expectCode(t, sendRaw(t, c, s.Addr(), "DurableTopic", int32(i%2), nil, []byte(fmt.Sprintf("m%d", i))), protocol.Success, "send")
	}
	expectCode(t, sendRaw(t, c, s.Addr(), "AutoTopic", 0, nil, []byte("auto")), protocol.Success, "auto-create send")
	uh := protocol.UpdateConsumerOffsetRequestHeader{ConsumerGroup: "dur_cg", Topic: "DurableTopic", QueueID: 0, CommitOffset: 7}
	expectCode(t, invoke(t, c, s.Addr(), protocol.UpdateConsumerOffset, uh.Ext(), nil), protocol.Success, "commit offset")
	// A pull with the commit bit commits too.
	ph := protocol.PullMessageRequestHeader{ConsumerGroup: "dur_cg", Topic: "DurableTopic", QueueID: 1, QueueOffset: 4, MaxMsgNums: 1,
		SysFlag: protocol.PullFlagCommitOffset | protocol.PullFlagSubscription, CommitOffset: 4, Subscription: "*"}
	expectCode(t, invoke(t, c, s.Addr(), protocol.PullMessage, ph.Ext(), nil), protocol.Success, "pull with commit")
	s.Shutdown()

	opts.Listen = "127.0.1.1:0"
	s2 := startBroker(t, opts)
	c2 := newRawClient(t)
	for q, want := range map[int32]int64{0: 7, 1: 4} {
		qh := protocol.QueryConsumerOffsetRequestHeader{ConsumerGroup: "dur_cg", Topic: "DurableTopic", QueueID: q}
		resp := invoke(t, c2, s2.Addr(), protocol.QueryConsumerOffset, qh.Ext(), nil)
		expectCode(t, resp, protocol.Success, "query offset after restart")
		var oh protocol.OffsetResponseHeader
		testutil.NoError(t, oh.SetExt(resp.ExtFields), "offset header")
		testutil.Equal(t, oh.Offset, want, fmt.Sprintf("committed offset of queue %d", q))
	}
	mh := protocol.QueueRequestHeader{Topic: "DurableTopic", QueueID: 0}
	resp := invoke(t, c2, s2.Addr(), protocol.GetMaxOffset, mh.Ext(), nil)
	expectCode(t, resp, protocol.Success, "max offset")
	testutil.Equal(t, resp.ExtFields["offset"], "10", "max offset after restart")

	pull := pullRaw(t, c2, s2.Addr(), "dur_cg", "DurableTopic", 0, 0, "*", 32)
	expectCode(t, pull, protocol.Success, "pull after restart")
	ms := decodeAll(t, pull.Body)
	testutil.Equal(t, len(ms), 10, "messages after restart")
	for i, m := range ms {
		testutil.Equal(t, string(m.Body), fmt.Sprintf("m%d", 2*i), "body after restart")
	}
	for _, topic := range []string{"DurableTopic", "AutoTopic", protocol.AutoCreateTopicKey, "broker-d"} {
		_, ok := s2.topics.get(topic)
		testutil.True(t, ok, "topic kept: "+topic)
	}
	testutil.True(t, len(s2.groups.names()) > 0, "subscription groups kept")
	// The data version keeps counting up, so name servers see a change.
	testutil.True(t, s2.topics.snapshot().DataVersion.Counter > 1, "data version persisted")
}

func TestBrokerShutdownIsIdempotentWithoutRun(t *testing.T) {
	s, err := New(testBrokerOptions(t, "127.0.1.1", "idc1", "broker-x"))
	testutil.NoError(t, err, "New")
	s.Shutdown()
	s.Shutdown()
	testutil.True(t, s.Run(context.Background()) != nil, "Run after Shutdown fails")
	// The data directory is released: a new broker opens it at once.
	opts := s.opts
	opts.Listen = "127.0.1.1:0"
	s2, err := New(opts)
	testutil.NoError(t, err, "New on the same data directory")
	done := make(chan struct{})
	go func() { s2.Run(context.Background()); close(done) }()
	s2.Shutdown()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after Shutdown")
	}
}
