package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/testutil"
)

// sendDelayed sends one message with a DELAY level and returns the send
// answer's header.
func sendDelayed(t *testing.T, c *remoting.Client, addr, topic string, queueID int32, level int, key string) protocol.SendMessageResponseHeader {
	t.Helper()
	props := map[string]string{
		protocol.PropertyKeys: key, protocol.PropertyTags: "TagD", protocol.PropertyDelayLevel: strconv.Itoa(level),
		protocol.PropertyUniqClientMessageID: "UNIQ-" + key,
	}
	resp := sendRaw(t, c, addr, topic, queueID, props, []byte(key))
	expectCode(t, resp, protocol.Success, "delayed send "+key)
	var rh protocol.SendMessageResponseHeader
	testutil.NoError(t, rh.SetExt(resp.ExtFields), "send answer")
	return rh
}

func TestBrokerDelayRawDeliversNotBeforeDue(t *testing.T) {
	levels := testDelayLevels()
	opts := testBrokerOptions(t, "127.0.1.1", "idc1", "broker-delay")
	opts.MessageDelayLevel = delayLevelString(levels)
	s := startBroker(t, opts)
	c := newRawClient(t)
	const topic = "DelayTopic"
	createTopic(t, c, s.Addr(), topic, 2)

	sent := map[string]int{"d5": 5, "d1": 1, "d3": 3, "d25": 25} // 25 is clamped to 18
	schedStore := map[string]int64{}
	for _, key := range []string{"d5", "d1", "d3", "d25"} {
		rh := sendDelayed(t, c, s.Addr(), topic, 1, sent[key], key)
		testutil.Equal(t, rh.QueueID, int32(1), "the answer names the producer's queue")
		_, off, err := protocol.ParseOffsetMessageID(rh.MsgID)
		testutil.NoError(t, err, "msgId")
		sm, err := s.store.MessageAt(off)
		testutil.NoError(t, err, "schedule record")
		testutil.Equal(t, sm.Topic, protocol.ScheduleTopic, "stored in the schedule topic")
		level := min(sent[key], 18)
		testutil.Equal(t, sm.QueueID, int32(level-1), "schedule queue = level-1")
		testutil.Equal(t, prop(sm, protocol.PropertyRealTopic), topic, "REAL_TOPIC")
		testutil.Equal(t, prop(sm, protocol.PropertyRealQueueID), "1", "REAL_QID")
		testutil.Equal(t, prop(sm, protocol.PropertyDelayLevel), strconv.Itoa(level), "DELAY kept (clamped)")
		schedStore[key] = sm.StoreTimestamp
	}

	ms := waitQueueLen(t, c, s.Addr(), topic, 1, 4)
	order := ""
	for _, m := range ms {
		key := prop(m, protocol.PropertyKeys)
		order += key + " "
		level := min(sent[key], 18)
		due := schedStore[key] + levels[level-1].Milliseconds()
		if m.StoreTimestamp < due {
			t.Errorf("%s delivered at %d, before it was due at %d", key, m.StoreTimestamp, due)
		}
		testutil.Equal(t, prop(m, protocol.PropertyUniqClientMessageID), "UNIQ-"+key, "UNIQ_KEY kept")
		testutil.Equal(t, prop(m, protocol.PropertyTags), "TagD", "TAGS kept")
		testutil.Equal(t, prop(m, protocol.PropertyRealTopic), topic, "REAL_TOPIC kept, as in RocketMQ")
		_, hasDelay := protocol.Property(m.Properties, protocol.PropertyDelayLevel)
		testutil.True(t, !hasDelay, "DELAY removed from "+key)
		testutil.Equal(t, string(m.Body), key, "body")
	}
	testutil.Equal(t, order, "d1 d3 d5 d25 ", "delivery order follows due times")

	// Tag filtering works on delivered messages (the tag hash is computed
	// from TAGS on delivery).
	resp := pullRaw(t, c, s.Addr(), "tag_reader", topic, 1, 0, "TagD", 32)
	expectCode(t, resp, protocol.Success, "pull TagD")
	testutil.Equal(t, len(decodeAll(t, resp.Body)), 4, "tagged messages")

	// GET_ALL_DELAY_OFFSET reports the delivered offsets by level.
	resp = invoke(t, c, s.Addr(), protocol.GetAllDelayOffset, nil, nil)
	expectCode(t, resp, protocol.Success, "GET_ALL_DELAY_OFFSET")
	var table delayOffsetTable
	testutil.NoError(t, json.Unmarshal(resp.Body, &table), "delay offsets")
	for _, level := range []int{1, 3, 5, 18} {
		testutil.Equal(t, table.OffsetTable[level], int64(1), fmt.Sprintf("offset of level %d", level))
	}
	testutil.Equal(t, table.OffsetTable[2], int64(0), "offset of level 2")

	// A delayed batch is refused (RocketMQ refuses it too).
	body := encodeBatchItem(0, []byte("b"), protocol.EncodeProperties(map[string]string{protocol.PropertyDelayLevel: "2"}))
	bh := protocol.SendMessageRequestHeaderV2{SendMessageRequestHeader: protocol.SendMessageRequestHeader{
		ProducerGroup: "raw_pg", Topic: topic, QueueID: 0, BornTimestamp: time.Now().UnixMilli(), Batch: true}}
	expectCode(t, invoke(t, c, s.Addr(), protocol.SendBatchMessage, bh.Ext(), body), protocol.MessageIllegal, "delayed batch")
}

func TestBrokerDelaySurvivesRestart(t *testing.T) {
	levels := testDelayLevels()
	levels[17] = 1500 * time.Millisecond
	opts := testBrokerOptions(t, "127.0.1.1", "idc1", "broker-delay-restart")
	opts.MessageDelayLevel = delayLevelString(levels)
	s := startBroker(t, opts)
	c := newRawClient(t)
	const topic = "DelayRestart"
	createTopic(t, c, s.Addr(), topic, 1)

	sendDelayed(t, c, s.Addr(), topic, 0, 1, "early")
	waitQueueLen(t, c, s.Addr(), topic, 0, 1)
	rh := sendDelayed(t, c, s.Addr(), topic, 0, 18, "late")
	_, off, err := protocol.ParseOffsetMessageID(rh.MsgID)
	testutil.NoError(t, err, "msgId")
	sm, err := s.store.MessageAt(off)
	testutil.NoError(t, err, "schedule record of late")
	due := sm.StoreTimestamp + levels[17].Milliseconds()
	s.Shutdown()

	s2 := startBroker(t, opts)
	ms := waitQueueLen(t, c, s2.Addr(), topic, 0, 2)
	testutil.Equal(t, prop(ms[0], protocol.PropertyKeys), "early", "first delivery")
	testutil.Equal(t, prop(ms[1], protocol.PropertyKeys), "late", "second delivery")
	testutil.True(t, ms[1].StoreTimestamp >= due, "late delivered no earlier than due after the restart")
	// Every level has caught up, and the early message was not delivered
	// again (it would have been first, being overdue at the restart).
	testutil.Eventually(t, 10*time.Second, func() error {
		for level := 1; level <= maxDelayLevel; level++ {
			end := s2.store.MaxOffset(protocol.ScheduleTopic, int32(level-1))
			if got := s2.extra.schedule.offset(level - 1); got != end {
				return fmt.Errorf("level %d delivered up to %d of %d", level, got, end)
			}
		}
		return nil
	})
	testutil.Equal(t, len(queueMessages(t, c, s2.Addr(), topic, 0)), 2, "no duplicate delivery")
}

func TestBrokerDelayRocketMQClient(t *testing.T) {
	levels := testDelayLevels()
	ns := startNamesrv(t, "127.0.1.1:0", "idc1", nil)
	opts := testBrokerOptions(t, "127.0.1.1", "idc1", "broker-delay-go", ns.Addr())
	opts.MessageDelayLevel = delayLevelString(levels)
	s := startBroker(t, opts)
	raw := newRawClient(t)
	const topic = "DelayGoTopic"
	createTopic(t, raw, s.Addr(), topic, 2)
	waitRoute(t, raw, ns.Addr(), topic, s)

	type arrival struct {
		born, at int64
		level    int
	}
	var mu sync.Mutex
	got := map[string]arrival{}
	group := "delay_cg_" + runToken
	c, err := consumer.NewPushConsumer(
		consumer.WithGroupName(group),
		consumer.WithInstance(instanceName("delay"+runToken)),
		consumer.WithNsResolver(primitive.NewPassthroughResolver([]string{ns.Addr()})),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	)
	testutil.NoError(t, err, "NewPushConsumer")
	err = c.Subscribe(topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"}, func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		now := time.Now().UnixMilli()
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			level, _ := strconv.Atoi(m.GetProperty("LEVEL"))
			got[m.GetKeys()] = arrival{born: m.BornTimestamp, at: now, level: level}
		}
		return consumer.ConsumeSuccess, nil
	})
	testutil.NoError(t, err, "Subscribe")
	testutil.NoError(t, c.Start(), "consumer Start")
	t.Cleanup(func() { c.Shutdown() })

	p := startRocketMQProducer(t, ns.Addr(), "delay_pg", "delayP")

	want := map[string]int{"g0": 0, "g2": 2, "g4": 4, "g7": 7}
	for key, level := range want {
		msg := primitive.NewMessage(topic, []byte(key)).WithKeys([]string{key})
		msg.WithProperty("LEVEL", strconv.Itoa(level))
		if level > 0 {
			msg.WithDelayTimeLevel(level)
		}
		r, err := p.SendSync(context.Background(), msg)
		testutil.NoError(t, err, "SendSync "+key)
		testutil.Equal(t, r.Status, primitive.SendOK, "send status "+key)
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(got) < len(want) {
			return fmt.Errorf("received %d of %d", len(got), len(want))
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	for key, a := range got {
		if a.level == 0 {
			continue
		}
		if earliest := a.born + levels[a.level-1].Milliseconds(); a.at < earliest {
			t.Errorf("%s (level %d) consumed at %d, before born %d + delay %v", key, a.level, a.at, a.born, levels[a.level-1])
		}
	}
}
