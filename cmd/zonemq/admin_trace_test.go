package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"

	"github.com/zonemq/zonemq/internal/testutil"
)

// TestCLIAdminTrace: rocketmq-client-go with WithTrace on a producer and a
// consumer; `admin trace` shows where each message was produced, stored
// (broker and IDC) and consumed (group and client).
func TestCLIAdminTrace(t *testing.T) {
	rlog.SetLogLevel("error")
	t.Setenv("HOME", t.TempDir()) // rocketmq-client-go writes under ~/logs
	c := cliCluster(t, 2)
	const topic = "TracedTopic"
	r := cli(t, cliArgs(c, 1, []string{"admin", "topic", "create", "--topic", topic, "--queues", "2"})...)
	testutil.Equal(t, r.code, 0, r.stderr)

	trace := &primitive.TraceConfig{NamesrvAddrs: c.NamesrvAddrs(), Access: primitive.Local}
	p, err := producer.NewDefaultProducer(
		producer.WithGroupName("traced_pg"),
		producer.WithInstanceName(fmt.Sprintf("traced-p-%d", time.Now().UnixNano())),
		producer.WithNsResolver(primitive.NewPassthroughResolver(c.NamesrvAddrs())),
		producer.WithTrace(trace),
	)
	testutil.NoError(t, err, "NewDefaultProducer")
	testutil.NoError(t, p.Start(), "producer Start")
	t.Cleanup(func() { p.Shutdown() })

	var mu sync.Mutex
	consumed := map[string]bool{}
	pc, err := consumer.NewPushConsumer(
		consumer.WithGroupName("traced_cg"),
		consumer.WithInstance(fmt.Sprintf("traced-c-%d", time.Now().UnixNano())),
		consumer.WithNsResolver(primitive.NewPassthroughResolver(c.NamesrvAddrs())),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
		consumer.WithTrace(trace),
	)
	testutil.NoError(t, err, "NewPushConsumer")
	testutil.NoError(t, pc.Subscribe(topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"},
		func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			mu.Lock()
			defer mu.Unlock()
			for _, m := range msgs {
				consumed[m.MsgId] = true
			}
			return consumer.ConsumeSuccess, nil
		}), "Subscribe")
	testutil.NoError(t, pc.Start(), "consumer Start")
	t.Cleanup(func() { pc.Shutdown() })

	ids := map[string]string{} // msg id → key
	for i := range 3 {
		key := fmt.Sprintf("order-%d", i)
		res, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte(key)).WithKeys([]string{key}).WithTag("T"))
		testutil.NoError(t, err, "SendSync")
		ids[res.MsgID] = key
	}

	for id, key := range ids {
		var evs []traceEventJSON
		testutil.Eventually(t, 60*time.Second, func() error {
			r := cli(t, cliArgs(c, 1, []string{"admin", "trace", "--msg-id", id, "--output", "json"})...)
			if r.code != 0 {
				return fmt.Errorf("exit %d: %s", r.code, r.stderr)
			}
			evs = nil
			cliDecode(t, r.stdout, &evs)
			types := map[string]int{}
			for _, e := range evs {
				types[e.Type]++
			}
			if types["Pub"] == 0 || types["SubBefore"] == 0 || types["SubAfter"] == 0 {
				return fmt.Errorf("trace of %s so far: %v", id, types)
			}
			return nil
		})
		for _, e := range evs {
			testutil.Equal(t, e.MsgID, id, "event of another message")
			switch e.Type {
			case "Pub":
				testutil.Equal(t, e.Group, "traced_pg", "producer group")
				testutil.Equal(t, e.Topic, topic, "topic")
				testutil.Equal(t, e.Keys, key, "keys")
				testutil.True(t, e.Success, "send succeeded")
				testutil.True(t, strings.HasPrefix(e.Broker, "broker-idc") && strings.HasPrefix(e.IDC, "idc"),
					fmt.Sprintf("stored on broker %q in IDC %q", e.Broker, e.IDC))
			case "SubBefore", "SubAfter":
				testutil.Equal(t, e.Group, "traced_cg", "consumer group")
				testutil.True(t, e.ClientHost != "", "consumer client host")
				if e.Type == "SubAfter" {
					testutil.True(t, e.Success, "consumed successfully")
				}
			}
		}
	}

	// By key, as text.
	r = cli(t, cliArgs(c, 2, []string{"admin", "trace", "--key", "order-1"})...)
	testutil.Equal(t, r.code, 0, r.stderr)
	t.Logf("zonemq admin trace --key order-1:\n%s", r.stdout)
	for _, want := range []string{"produced to " + topic, "delivered", "consumed", "traced_pg", "traced_cg", "idc"} {
		testutil.True(t, strings.Contains(r.stdout, want), fmt.Sprintf("--key output lacks %q:\n%s", want, r.stdout))
	}
	r = cli(t, cliArgs(c, 1, []string{"admin", "trace", "--key", "no-such-key"})...)
	testutil.True(t, r.code != 0 && strings.Contains(r.stderr, "no trace"), r.stderr)
	r = cli(t, cliArgs(c, 1, []string{"admin", "trace"})...)
	testutil.True(t, r.code != 0 && strings.Contains(r.stderr, "--msg-id"), r.stderr)
}
