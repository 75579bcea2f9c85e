package broker

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/zonemq/zonemq/internal/testutil"
)

// TestBrokerTimerRocketMQClient: rocketmq-client-go's WithDelayTimestamp
// (TIMER_DELIVER_MS) and RocketMQ 5's TIMER_DELAY_SEC / TIMER_DELAY_MS
// properties hold messages until their time; none is consumed early.
func TestBrokerTimerRocketMQClient(t *testing.T) {
	ns := startNamesrv(t, "127.0.1.1:0", "idc1", nil)
	s := startBroker(t, testBrokerOptions(t, "127.0.1.1", "idc1", "broker-timergo", ns.Addr()))
	raw := newRawClient(t)
	const topic = "TimerGoTopic"
	createTopic(t, raw, s.Addr(), topic, 2)
	waitRoute(t, raw, ns.Addr(), topic, s)

	var mu sync.Mutex
	consumed := map[string]time.Time{}
	c, err := consumer.NewPushConsumer(
		consumer.WithGroupName("timer_go_"+runToken),
		consumer.WithInstance(instanceName("TC"+runToken)),
		consumer.WithNsResolver(primitive.NewPassthroughResolver([]string{ns.Addr()})),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	)
	testutil.NoError(t, err, "NewPushConsumer")
	testutil.NoError(t, c.Subscribe(topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"},
		func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			mu.Lock()
			defer mu.Unlock()
			for _, m := range msgs {
				if _, ok := consumed[m.GetKeys()]; !ok {
					consumed[m.GetKeys()] = time.Now()
				}
			}
			return consumer.ConsumeSuccess, nil
		}), "Subscribe")
	testutil.NoError(t, c.Start(), "push consumer Start")
	t.Cleanup(func() { c.Shutdown() })

	p, err := producer.NewDefaultProducer(
		producer.WithGroupName("timer_go_pg"),
		producer.WithInstanceName(instanceName("TP"+runToken)),
		producer.WithNsResolver(primitive.NewPassthroughResolver([]string{ns.Addr()})),
	)
	testutil.NoError(t, err, "NewDefaultProducer")
	testutil.NoError(t, p.Start(), "producer Start")
	t.Cleanup(func() { p.Shutdown() })

	earliest := map[string]time.Time{}
	for i := range 30 {
		key := fmt.Sprintf("tg-%d", i)
		m := primitive.NewMessage(topic, []byte(key)).WithKeys([]string{key})
		sent := time.Now()
		switch i % 3 {
		case 0:
			earliest[key] = sent.Add(800 * time.Millisecond)
			m.WithDelayTimestamp(earliest[key])
		case 1:
			m.WithProperty("TIMER_DELAY_SEC", "1")
			earliest[key] = sent.Add(time.Second)
		case 2:
			m.WithProperty("TIMER_DELAY_MS", "600")
			earliest[key] = sent.Add(600 * time.Millisecond)
		}
		r, err := p.SendSync(context.Background(), m)
		testutil.NoError(t, err, "SendSync")
		testutil.Equal(t, r.Status, primitive.SendOK, "send status")
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(consumed) < len(earliest) {
			return fmt.Errorf("%d of %d consumed", len(consumed), len(earliest))
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	for key, at := range consumed {
		// The broker takes the delay from its receipt, after the send
		// began: consuming before the send began plus the delay is early.
		// Timers are kept to the millisecond (WithDelayTimestamp truncates).
		if at.UnixMilli() < earliest[key].UnixMilli() {
			t.Fatalf("%s consumed %v early", key, earliest[key].Sub(at))
		}
	}
}
