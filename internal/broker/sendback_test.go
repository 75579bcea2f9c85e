package broker

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/testutil"
)

func TestBrokerRetrySendBackRaw(t *testing.T) {
	levels := testDelayLevels()
	opts := testBrokerOptions(t, "127.0.1.1", "idc1", "broker-sb")
	opts.MessageDelayLevel = delayLevelString(levels)
	s := startBroker(t, opts)
	c := newRawClient(t)
	const topic, group = "SBTopic", "sb_cg"
	createTopic(t, c, s.Addr(), topic, 1)
	props := map[string]string{protocol.PropertyUniqClientMessageID: "UNIQ-sb", protocol.PropertyKeys: "kb", protocol.PropertyTags: "TagS"}
	resp := sendRaw(t, c, s.Addr(), topic, 0, props, []byte("payload"))
	expectCode(t, resp, protocol.Success, "send")
	_, off, err := protocol.ParseOffsetMessageID(resp.ExtFields["msgId"])
	testutil.NoError(t, err, "msgId")
	orig, err := s.store.MessageAt(off)
	testutil.NoError(t, err, "original")

	sendBack := func(offset int64, delayLevel, maxTimes int32) {
		t.Helper()
		h := consumerSendMsgBackHeader{Group: group, Offset: offset, DelayLevel: delayLevel, OriginMsgID: "UNIQ-sb",
			OriginTopic: topic, MaxReconsumeTimes: maxTimes, HasMaxReconsumeTimes: true}
		expectCode(t, invoke(t, c, s.Addr(), protocol.ConsumerSendMsgBack, h.ext(), nil), protocol.Success, "send back")
	}
	retryTopic, dlqTopic := protocol.RetryTopic(group), protocol.DLQTopic(group)
	check := func(m *protocol.MessageExt, reconsume int32) {
		t.Helper()
		testutil.Equal(t, m.ReconsumeTimes, reconsume, "reconsumeTimes")
		testutil.Equal(t, string(m.Body), "payload", "body")
		testutil.Equal(t, prop(m, protocol.PropertyRetryTopic), topic, "RETRY_TOPIC")
		testutil.Equal(t, prop(m, protocol.PropertyOriginMessageID), "UNIQ-sb", "ORIGIN_MESSAGE_ID")
		testutil.Equal(t, prop(m, protocol.PropertyUniqClientMessageID), "UNIQ-sb", "UNIQ_KEY")
		testutil.Equal(t, prop(m, protocol.PropertyKeys), "kb", "KEYS")
		testutil.Equal(t, prop(m, protocol.PropertyTags), "TagS", "TAGS")
		testutil.Equal(t, prop(m, protocol.PropertyReconsumeTime), fmt.Sprint(reconsume), "RECONSUME_TIME")
		_, hasDelay := protocol.Property(m.Properties, protocol.PropertyDelayLevel)
		testutil.True(t, !hasDelay, "no DELAY left on a delivered retry")
	}

	// First failure: %RETRY% after level 3 + 0.
	sendBack(off, 0, 2)
	r1 := waitQueueLen(t, c, s.Addr(), retryTopic, 0, 1)[0]
	check(r1, 1)
	testutil.True(t, r1.StoreTimestamp >= orig.StoreTimestamp+levels[2].Milliseconds(), "first retry not before level 3")
	// Second: level 3 + 1.
	sendBack(r1.CommitLogOffset, 0, 2)
	r2 := waitQueueLen(t, c, s.Addr(), retryTopic, 0, 2)[1]
	check(r2, 2)
	testutil.True(t, r2.StoreTimestamp >= r1.StoreTimestamp+levels[3].Milliseconds(), "second retry not before level 4")
	// Third: reconsumeTimes 2 has reached the maximum: dead letter, at once.
	sendBack(r2.CommitLogOffset, 0, 2)
	d1 := waitQueueLen(t, c, s.Addr(), dlqTopic, 0, 1)[0]
	check(d1, 3)
	testutil.Equal(t, prop(d1, protocol.PropertyDLQOriginTopic), topic, "DLQ_ORIGIN_TOPIC")
	cfg, ok := s.topics.get(dlqTopic)
	testutil.True(t, ok, "DLQ topic created")
	testutil.Equal(t, cfg.WriteQueueNums, 1, "DLQ queues")
	testutil.Equal(t, cfg.Perm, protocol.PermReadWrite, "DLQ perm")

	// delayLevel < 0: straight to the DLQ whatever the count.
	sendBack(off, -1, 16)
	check(waitQueueLen(t, c, s.Addr(), dlqTopic, 0, 2)[1], 1)
	// An explicit level is honoured.
	sendBack(off, 1, 16)
	r3 := waitQueueLen(t, c, s.Addr(), retryTopic, 0, 3)[2]
	check(r3, 1)

	// Without maxReconsumeTimes the group's retryMaxTimes (16) applies.
	h := consumerSendMsgBackHeader{Group: group, Offset: d1.CommitLogOffset, DelayLevel: 1}
	expectCode(t, invoke(t, c, s.Addr(), protocol.ConsumerSendMsgBack, h.ext(), nil), protocol.Success, "send back, group max")
	check(waitQueueLen(t, c, s.Addr(), retryTopic, 0, 4)[3], 4)

	// Refusals.
	h = consumerSendMsgBackHeader{Group: group, Offset: off + 1, DelayLevel: 0}
	resp = invoke(t, c, s.Addr(), protocol.ConsumerSendMsgBack, h.ext(), nil)
	expectCode(t, resp, protocol.SystemError, "send back of a bad offset")
	testutil.True(t, resp.Remark != "", "bad offset remark")
	expectCode(t, invoke(t, c, s.Addr(), protocol.ConsumerSendMsgBack, map[string]string{"group": group}, nil),
		protocol.InvalidParameter, "send back without offset")
	h = consumerSendMsgBackHeader{Group: "bad group!", Offset: off}
	expectCode(t, invoke(t, c, s.Addr(), protocol.ConsumerSendMsgBack, h.ext(), nil), protocol.InvalidParameter, "bad group")
}

// TestBrokerRetryRocketMQClientToDLQ runs the real push consumer against a
// handler that always fails: the message comes back through the retry topic
// with a growing ReconsumeTimes and ends in the DLQ after the maximum.
func TestBrokerRetryRocketMQClientToDLQ(t *testing.T) {
	ns := startNamesrv(t, "127.0.1.1:0", "idc1", nil)
	opts := testBrokerOptions(t, "127.0.1.1", "idc1", "broker-retry-go", ns.Addr())
	opts.MessageDelayLevel = delayLevelString(testDelayLevels())
	s := startBroker(t, opts)
	raw := newRawClient(t)
	const topic = "RetryGoTopic"
	createTopic(t, raw, s.Addr(), topic, 2)
	waitRoute(t, raw, ns.Addr(), topic, s)

	group := "retry_cg_" + runToken
	// The retry topic exists before the consumer starts, as it would in
	// production; otherwise a slow start may miss its route until the
	// client's 30 s route refresh.
	createTopic(t, raw, s.Addr(), protocol.RetryTopic(group), 1)
	waitRoute(t, raw, ns.Addr(), protocol.RetryTopic(group), s)
	var mu sync.Mutex
	attempts := map[string][]int32{}
	c, err := consumer.NewPushConsumer(
		consumer.WithGroupName(group),
		consumer.WithInstance(instanceName("retry"+runToken)),
		consumer.WithNsResolver(primitive.NewPassthroughResolver([]string{ns.Addr()})),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
		consumer.WithMaxReconsumeTimes(2),
	)
	testutil.NoError(t, err, "NewPushConsumer")
	err = c.Subscribe(topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"},
		func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			mu.Lock()
			defer mu.Unlock()
			for _, m := range msgs {
				attempts[m.GetKeys()] = append(attempts[m.GetKeys()], m.ReconsumeTimes)
			}
			return consumer.ConsumeRetryLater, nil
		})
	testutil.NoError(t, err, "Subscribe")
	testutil.NoError(t, c.Start(), "consumer Start")
	t.Cleanup(func() { c.Shutdown() })

	p, err := producer.NewDefaultProducer(
		producer.WithGroupName("retry_pg"),
		producer.WithInstanceName(instanceName("retryP"+runToken)),
		producer.WithNsResolver(primitive.NewPassthroughResolver([]string{ns.Addr()})),
	)
	testutil.NoError(t, err, "NewDefaultProducer")
	testutil.NoError(t, p.Start(), "producer Start")
	t.Cleanup(func() { p.Shutdown() })
	sent, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte("doomed")).WithKeys([]string{"rk"}).WithTag("TagR"))
	testutil.NoError(t, err, "SendSync")

	dlq := protocol.DLQTopic(group)
	var dead []*protocol.MessageExt
	testutil.Eventually(t, 40*time.Second, func() error {
		if _, ok := s.topics.get(dlq); !ok {
			mu.Lock()
			defer mu.Unlock()
			return fmt.Errorf("no DLQ yet; attempts so far %v", attempts["rk"])
		}
		dead = queueMessages(t, raw, s.Addr(), dlq, 0)
		if len(dead) == 0 {
			return fmt.Errorf("the DLQ is empty")
		}
		return nil
	})
	mu.Lock()
	got := slices.Clone(attempts["rk"])
	mu.Unlock()
	testutil.Equal(t, fmt.Sprint(got), "[0 1 2]", "ReconsumeTimes seen by the consumer")
	testutil.Equal(t, len(dead), 1, "dead letters")
	m := dead[0]
	testutil.Equal(t, string(m.Body), "doomed", "DLQ body")
	testutil.Equal(t, m.ReconsumeTimes, int32(3), "DLQ reconsumeTimes")
	testutil.Equal(t, prop(m, protocol.PropertyKeys), "rk", "DLQ KEYS")
	testutil.Equal(t, prop(m, protocol.PropertyTags), "TagR", "DLQ TAGS")
	testutil.Equal(t, prop(m, protocol.PropertyRetryTopic), topic, "DLQ RETRY_TOPIC")
	testutil.Equal(t, prop(m, protocol.PropertyUniqClientMessageID), sent.MsgID, "DLQ UNIQ_KEY")
	testutil.Equal(t, prop(m, protocol.PropertyOriginMessageID), sent.MsgID, "DLQ ORIGIN_MESSAGE_ID")
}
